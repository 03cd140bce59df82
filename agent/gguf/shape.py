"""What the memory and bandwidth models need from a GGUF: its shape (layers, heads, vocabulary, the sliding
window) and every tensor's size and type, read from the header alone.

The GGUF is read with a small parser of our own, not ``gguf.GGUFReader``: the reader builds an object per
vocabulary entry (hundreds of thousands on a real model) that this question does not need.
"""

from __future__ import annotations

import mmap
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgeprof.gguf.info import GGUF_COUNT_MAX, GGUFError

# Architectures whose sliding-window layers follow a fixed period when the GGUF has no per-layer pattern:
# in each run of ``period`` layers all but the last use the window (llama.cpp's set_swa_pattern default).
_SWA_PERIOD: dict[str, int] = {
    "gemma2": 2,
    "gemma3": 6,
    "gemma3n": 5,
    "cohere2": 4,
    "llama4": 4,
    "gpt-oss": 2,
}

_GGUF_VALUE_FMT = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_GGUF_STRING, _GGUF_ARRAY = 8, 9

_LAYER_RE = re.compile(r"^blk\.(\d+)\.")


@dataclass(frozen=True)
class TensorInfo:
    name: str
    n_elements: int
    n_bytes: int
    ggml_type: str
    layer: int | None  # the repeating layer it belongs to; None for embedding, output and the like


@dataclass(frozen=True)
class ModelShape:
    """What the memory and bandwidth models need from a GGUF."""

    arch: str
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: tuple[int, ...]  # per layer
    head_dim_k: int
    head_dim_v: int
    n_vocab: int
    n_ff: int
    n_swa: int
    swa_layers: tuple[bool, ...]  # per layer: uses the sliding window
    n_expert: int
    n_expert_used: int
    tensors: tuple[TensorInfo, ...]

    @property
    def weight_bytes(self) -> int:
        return sum(t.n_bytes for t in self.tensors)

    @property
    def tied_output(self) -> bool:
        return not any(t.name == "output.weight" for t in self.tensors)


class _Buf:
    """Little-endian cursor over a memory-mapped GGUF header."""

    def __init__(self, data: mmap.mmap | bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise GGUFError("header ends early")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return value

    def string(self) -> str:
        n = int(self.take("<Q"))
        if self.pos + n > len(self.data):
            raise GGUFError("header ends early")
        raw = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return raw.decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        n = int(self.take("<Q"))
        self.pos += n

    def value(self, vtype: int, keep: bool) -> Any:
        if vtype in _GGUF_VALUE_FMT:
            return self.take(_GGUF_VALUE_FMT[vtype])
        if vtype == _GGUF_STRING:
            return self.string() if keep else self.skip_string()
        if vtype == _GGUF_ARRAY:
            itype = int(self.take("<I"))
            n = int(self.take("<Q"))
            if itype in _GGUF_VALUE_FMT and not keep:
                self.pos += n * struct.calcsize(_GGUF_VALUE_FMT[itype])
                return _Count(n)
            if itype == _GGUF_STRING and not keep:
                for _ in range(n):  # lengths differ: walk them, but build nothing
                    self.pos += 8 + int(struct.unpack_from("<Q", self.data, self.pos)[0])
                return _Count(n)
            return [self.value(itype, True) for _ in range(n)]
        raise GGUFError(f"unknown metadata value type {vtype}")


@dataclass(frozen=True)
class _Count:
    """A skipped array: only its length is kept."""

    n: int


def _kept(key: str) -> bool:
    # Small per-layer arrays (head counts, SWA pattern) are read; the vocabulary and merges are skipped.
    return not key.startswith("tokenizer.")


def read_model_shape(path: str | Path) -> ModelShape:
    """Parse a GGUF's metadata and tensor table (not its data); GGUFError with one line on bad input."""
    import gguf

    p = Path(path)
    try:
        with p.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            buf = _Buf(data)
            if bytes(data[:4]) != b"GGUF":
                raise GGUFError(f"{p}: not a GGUF file")
            buf.pos = 4
            version = int(buf.take("<I"))
            if version < 2:
                raise GGUFError(f"{p}: GGUF version {version} is too old")
            n_tensors = int(buf.take("<Q"))
            n_kv = int(buf.take("<Q"))
            meta: dict[str, Any] = {}
            for _ in range(n_kv):
                key = buf.string()
                vtype = int(buf.take("<I"))
                meta[key] = buf.value(vtype, _kept(key))
            tensors: list[TensorInfo] = []
            for _ in range(n_tensors):
                name = buf.string()
                n_dims = int(buf.take("<I"))
                n_el = 1
                for _d in range(n_dims):
                    n_el *= int(buf.take("<Q"))
                ttype = int(buf.take("<I"))
                buf.take("<Q")  # data offset: validity is read_gguf_info's job
                try:
                    block, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(ttype)]
                except (ValueError, KeyError):
                    raise GGUFError(f"{p}: tensor {name} has unknown type {ttype}") from None
                m = _LAYER_RE.match(name)
                tensors.append(
                    TensorInfo(
                        name,
                        n_el,
                        n_el // block * type_size,
                        gguf.GGMLQuantizationType(ttype).name,
                        int(m.group(1)) if m else None,
                    )
                )
    except FileNotFoundError:
        raise GGUFError(f"{p}: no such file") from None
    except (OSError, ValueError) as exc:
        raise GGUFError(f"{p}: cannot read the GGUF header: {exc}") from None
    except struct.error as exc:
        raise GGUFError(f"{p}: truncated GGUF header ({exc})") from None
    return _shape(p, meta, tensors)


# A value past GGUF_COUNT_MAX (a context_length of 2^64-1, a block_count of 2^63) or heads given as text is a
# damaged or hostile file, refused where it is read rather than met as an overflow in the middle of a sweep.
MAX_LAYERS = 65_536


class GGUFRangeError(GGUFError):
    """A count of the model's shape that llama.cpp could not hold; ``run --check`` refuses the model."""


def gguf_count(p: Path, key: str, value: Any) -> int:
    """``value`` of ``key`` as a count in 0..GGUF_COUNT_MAX; GGUFRangeError naming the key otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GGUFRangeError(f"{p}: {key} is {str(value)[:40]!r}, not a number")
    if isinstance(value, float) and not value.is_integer():
        raise GGUFRangeError(f"{p}: {key} = {value} is not a whole number")
    if not 0 <= value <= GGUF_COUNT_MAX:
        raise GGUFRangeError(f"{p}: {key} = {int(value)} is outside 0..{GGUF_COUNT_MAX}")
    return int(value)


def _shape(p: Path, meta: dict[str, Any], tensors: list[TensorInfo]) -> ModelShape:
    arch = str(meta.get("general.architecture") or "")

    def num(suffix: str, default: int | None = None) -> int | None:
        value = meta.get(f"{arch}.{suffix}")
        if isinstance(value, list):
            return max(gguf_count(p, f"{arch}.{suffix}", v) for v in value) if value else default
        return gguf_count(p, f"{arch}.{suffix}", value) if value is not None else default

    n_layer = num("block_count")
    n_embd = num("embedding_length")
    if not arch or n_layer is None or n_embd is None:
        raise GGUFError(f"{p}: the GGUF lacks architecture, block_count or embedding_length")
    if n_layer > MAX_LAYERS:
        raise GGUFRangeError(f"{p}: {arch}.block_count = {n_layer} is more than {MAX_LAYERS} layers")
    n_head = num("attention.head_count", 1) or 1
    raw_kv = meta.get(f"{arch}.attention.head_count_kv", n_head)
    key_kv = f"{arch}.attention.head_count_kv"
    if isinstance(raw_kv, list):
        n_head_kv = tuple(gguf_count(p, key_kv, v) for v in raw_kv[:n_layer])
    else:
        n_head_kv = (gguf_count(p, key_kv, raw_kv),) * n_layer
    head_dim_k = num("attention.key_length") or n_embd // n_head
    head_dim_v = num("attention.value_length") or n_embd // n_head
    tok = meta.get("tokenizer.ggml.tokens")
    n_vocab = num("vocab_size") or (tok.n if isinstance(tok, _Count) else 0)
    if not n_vocab:
        embd = next((t for t in tensors if t.name == "token_embd.weight"), None)
        n_vocab = embd.n_elements // n_embd if embd else 0
    n_swa = num("attention.sliding_window", 0) or 0
    pattern = meta.get(f"{arch}.attention.sliding_window_pattern")
    if n_swa <= 0:
        swa = (False,) * n_layer
    elif isinstance(pattern, list):
        swa = tuple(bool(v) for v in pattern)[:n_layer]
    else:
        period = int(pattern) if isinstance(pattern, int) and pattern > 0 else _SWA_PERIOD.get(arch, 0)
        # No pattern known: assume every layer uses the window only for archs that do (mistral-style SWA).
        swa = tuple((il % period) < period - 1 for il in range(n_layer)) if period else (True,) * n_layer
    return ModelShape(
        arch=arch,
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim_k=head_dim_k,
        head_dim_v=head_dim_v,
        n_vocab=int(n_vocab),
        n_ff=num("feed_forward_length", 4 * n_embd) or 4 * n_embd,
        n_swa=n_swa,
        swa_layers=swa,
        n_expert=num("expert_count", 0) or 0,
        n_expert_used=num("expert_used_count", 0) or 0,
        tensors=tuple(tensors),
    )
