"""Will it fit? Predict a config's memory before it runs, from the GGUF alone, and compare with the device.

The prediction is the memory the llama.cpp child will hold resident, split by where it lives:

- weights: every tensor's size from the GGUF tensor table (never the file size: metadata and padding are not
  weights), split by ``-ngl`` as llama.cpp splits them: the last ``ngl`` repeating layers on the GPU, the
  output layer there too when ``ngl > n_layer``, the token embedding always on the CPU;
- KV cache: ``2 · n_layer · n_kv_heads · head_dim · bytes(type) · cells`` summed per layer, with per-layer KV
  head counts where the GGUF gives an array, and sliding-window layers holding only ``n_swa + n_ubatch``
  cells (llama-bench, and edgeprof, run with ``swa_full = false``);
- compute buffers: llama.cpp reserves them for a full ``n_ubatch`` at the full context, but on the CPU only
  the pages a request touches become resident, so the CPU term follows the depth the workload reaches
  (prompt + n_predict). A GPU buffer is committed when allocated, so the GPU term is the full reservation;
- the runtime: Python, llama.cpp and its libraries before any model (a measured constant, below).

The constants were calibrated on this project's demo models (``edgeprof models demo``) against the child's
measured ``VmHWM``; ``tests/integration/test_memory_fit.py`` holds the prediction to within 5 % + 4 MiB
of the measured peak at ctx 512, 2048 and 8192.

The GGUF is read with a small parser of our own, not ``gguf.GGUFReader``: the reader builds an object per
vocabulary entry (hundreds of thousands on a real model) that this question does not need.
"""

from __future__ import annotations

import mmap
import re
import struct
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.gguf.info import GGUFError

MIB = 1024 * 1024

# The worker process before it loads a model: interpreter, llama_cpp and ggml libraries, the event pipe.
# Measured as VmHWM minus weights, KV and the touched compute on the demo models on x86_64 (CPU build):
# 52–56 MiB right after setup.sh, 47–49 MiB once the libraries' pages have been evicted and read back (fresh
# writes sit in large page-cache folios that a fault maps whole). 54 errs towards "does not fit" there.
# A CUDA build adds the CUDA context on top, which only a run on such a build can measure; it is not
# guessed here: the sweep replaces this constant by what its own finished runs show (agent/sweep/fit.py).
RUNTIME_BASE_MIB = 54.0

# Bytes per element of the KV cache types (llama-bench's -ctk/-ctv); block types as (block, bytes).
_KV_TYPE_BYTES: dict[str, float] = {
    "f32": 4.0,
    "f16": 2.0,
    "bf16": 2.0,
    "q8_0": 34 / 32,
    "q4_0": 18 / 32,
    "q4_1": 20 / 32,
    "q5_0": 22 / 32,
    "q5_1": 24 / 32,
    "iq4_nl": 18 / 32,
}

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

# Types llama.cpp's CPU backend repacks into an interleaved copy (the CPU_REPACK buffer: q4_0/q4_K/iq4_nl
# "8x8" on AVX2, "4x4"/"8x8" on ARM) for the layers' matrices. With mmap the file pages stay mapped and
# touched beside the copy, so those bytes are resident twice: the demo Q4_K_M measured 13 MiB above its
# weights + KV + compute without this term (llama.cpp reported an 11.5 MiB CPU_REPACK buffer).
_REPACKED_TYPES = frozenset({"Q4_0", "Q4_K", "IQ4_NL"})

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


def _shape(p: Path, meta: dict[str, Any], tensors: list[TensorInfo]) -> ModelShape:
    arch = str(meta.get("general.architecture") or "")

    def num(suffix: str, default: int | None = None) -> int | None:
        value = meta.get(f"{arch}.{suffix}")
        if isinstance(value, list):
            return int(max(value)) if value else default
        return int(value) if isinstance(value, (int, float)) else default

    n_layer = num("block_count")
    n_embd = num("embedding_length")
    if not arch or n_layer is None or n_embd is None:
        raise GGUFError(f"{p}: the GGUF lacks architecture, block_count or embedding_length")
    n_head = num("attention.head_count", 1) or 1
    raw_kv = meta.get(f"{arch}.attention.head_count_kv", n_head)
    if isinstance(raw_kv, list):
        n_head_kv = tuple(int(v) for v in raw_kv)[:n_layer]
    else:
        n_head_kv = (int(raw_kv),) * n_layer
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


def kv_type_bytes(type_name: str) -> float:
    try:
        return _KV_TYPE_BYTES[type_name]
    except KeyError:
        raise ValueError(f"unknown KV cache type {type_name!r}") from None


def kv_bytes_per_cell(shape: ModelShape, type_k: str, type_v: str, layers: range | None = None) -> float:
    """K and V bytes one context position costs, summed over ``layers`` (default all)."""
    bk, bv = kv_type_bytes(type_k), kv_type_bytes(type_v)
    total = 0.0
    for il in layers if layers is not None else range(shape.n_layer):
        n_kv = shape.n_head_kv[il] if il < len(shape.n_head_kv) else shape.n_head_kv[-1]
        total += n_kv * (shape.head_dim_k * bk + shape.head_dim_v * bv)
    return total


def _pad(n: int, to: int = 256) -> int:
    return (n + to - 1) // to * to


def kv_cells(
    shape: ModelShape, il: int, n_ctx: int, n_ubatch: int, swa_full: bool = False, n_seq_max: int = 1
) -> int:
    """Cells layer ``il`` holds: the context, or for a sliding-window layer (unless swa_full) the window per
    sequence plus one ubatch, as llama.cpp sizes its SWA cache."""
    if not swa_full and shape.n_swa > 0 and il < len(shape.swa_layers) and shape.swa_layers[il]:
        return min(n_ctx, _pad(shape.n_swa * max(1, n_seq_max) + n_ubatch))
    return n_ctx


def kv_bytes(
    shape: ModelShape,
    n_ctx: int,
    n_ubatch: int,
    type_k: str,
    type_v: str,
    layers: range,
    swa_full: bool = False,
    n_seq_max: int = 1,
) -> float:
    return sum(
        kv_bytes_per_cell(shape, type_k, type_v, range(il, il + 1))
        * kv_cells(shape, il, n_ctx, n_ubatch, swa_full, n_seq_max)
        for il in layers
    )


def compute_bytes(
    shape: ModelShape, n_kv: int, n_tokens: int, flash_attn: bool, n_outputs: int
) -> float:
    """The graph's working set for ``n_tokens`` tokens against ``n_kv`` cached positions (f32 activations).

    Without flash attention the largest tensor is KQ (n_kv · n_tokens · n_head) next to the mask; with it,
    only the f16 mask. The rest of the graph (residual, Q/K/V, FFN activations) fitted as 7 · n_embd floats
    per token on the demo models (llama.cpp reports 8.5 and 15.0 MiB for the tiny and small demo at ctx 512,
    n_ubatch 512, flash attention off; 83.5 and 150.0 at ctx 8192). Logits: n_vocab floats per output.
    """
    attn = n_kv * n_tokens * 2.0 if flash_attn else n_kv * n_tokens * 4.0 * (shape.n_head + 1)
    return attn + n_tokens * 7.0 * shape.n_embd * 4.0 + n_outputs * shape.n_vocab * 4.0


@dataclass(frozen=True)
class MemoryPrediction:
    """Predicted resident memory of one config, MiB, with its parts (stored as the run's evidence)."""

    total_mb: float  # what the device must give: host + GPU on unified memory, host only otherwise
    host_mb: float
    gpu_mb: float
    weights_cpu_mb: float  # including the repacked copies
    weights_gpu_mb: float
    repack_mb: float
    kv_cpu_mb: float
    kv_gpu_mb: float
    compute_cpu_mb: float
    compute_gpu_mb: float
    runtime_mb: float
    unified: bool
    n_kv_touched: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    scoring_mb: float = 0.0  # a quality run's own arrays (included in host_mb)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["notes"] = list(self.notes)
        return {k: round(v, 2) if isinstance(v, float) else v for k, v in out.items()}


def predict_memory(
    shape: ModelShape,
    *,
    n_ctx: int,
    n_gpu_layers: int,
    n_batch: int,
    n_ubatch: int,
    type_k: str,
    type_v: str,
    flash_attn: str,
    use_mmap: bool,
    prompt_tokens: int,
    n_predict: int,
    gpu_offload: bool = False,
    unified: bool = False,
    swa_full: bool = False,
    n_seq_max: int = 1,
    n_outputs: int = 1,
    runtime_mb: float = RUNTIME_BASE_MIB,
    scoring_bytes: float = 0.0,
) -> MemoryPrediction:
    """Predict a config's memory. ``gpu_offload``: the build can offload (a CPU build ignores -ngl);
    ``n_outputs``: positions whose logits a request keeps (1 for generation, every one for scoring)."""
    ngl = max(0, min(n_gpu_layers, shape.n_layer + 1)) if gpu_offload else 0
    weights = _split_weights(shape, ngl, use_mmap)
    i_gpu_start = shape.n_layer - min(ngl, shape.n_layer)
    gpu_layers = range(i_gpu_start, shape.n_layer) if ngl > 0 else range(0)
    cpu_layers = range(0, i_gpu_start) if ngl > 0 else range(shape.n_layer)
    kv_cpu = kv_bytes(shape, n_ctx, n_ubatch, type_k, type_v, cpu_layers, swa_full, n_seq_max)
    kv_gpu = kv_bytes(shape, n_ctx, n_ubatch, type_k, type_v, gpu_layers, swa_full, n_seq_max)
    # "auto" resolves to on wherever the attention runs on the layer's own device (the CPU backend and
    # CUDA both have the kernel), so the prediction takes it as on; the run records what llama.cpp chose
    fa = flash_attn in ("on", "auto")
    n_ub = max(1, min(n_ubatch, n_batch))
    n_kv_touched, compute_cpu = _cpu_compute(shape, n_ctx, n_ub, fa, prompt_tokens, n_predict, n_outputs)
    # A GPU buffer is committed when allocated: the full reservation (n_ubatch at the full context).
    compute_gpu = compute_bytes(shape, n_ctx, n_ub, fa, n_ub) if ngl > 0 else 0.0
    mb = 1.0 / MIB
    host = runtime_mb + (weights.cpu + kv_cpu + compute_cpu + scoring_bytes) * mb
    gpu = (weights.gpu + kv_gpu + compute_gpu) * mb
    notes = ("CUDA context not included (not measured on this build)",) if gpu_offload and ngl > 0 else ()
    return MemoryPrediction(
        total_mb=host + gpu if unified else host,
        host_mb=host,
        gpu_mb=gpu,
        weights_cpu_mb=weights.cpu * mb,
        weights_gpu_mb=weights.gpu * mb,
        repack_mb=weights.repack * mb,
        kv_cpu_mb=kv_cpu * mb,
        kv_gpu_mb=kv_gpu * mb,
        compute_cpu_mb=compute_cpu * mb,
        compute_gpu_mb=compute_gpu * mb,
        runtime_mb=runtime_mb,
        unified=unified,
        n_kv_touched=n_kv_touched,
        notes=notes,
        scoring_mb=scoring_bytes * mb,
    )


def _cpu_compute(
    shape: ModelShape, n_ctx: int, n_ub: int, fa: bool, prompt_tokens: int, n_predict: int, n_outputs: int
) -> tuple[int, float]:
    """(KV cells touched, resident CPU compute bytes): on the CPU only the pages a request touches become
    resident, so the working set follows the depth and batch a request of this workload actually reaches."""
    depth = min(n_ctx, prompt_tokens + n_predict)
    n_kv_touched = min(n_ctx, _pad(max(depth, 1)))
    touched_tokens = max(1, min(n_ub, prompt_tokens))
    # The graph's logits for one ubatch, plus llama.cpp's output buffer holding every kept position.
    compute_cpu = compute_bytes(shape, n_kv_touched, touched_tokens, fa, min(n_outputs, touched_tokens))
    if n_outputs > 1:
        compute_cpu += n_outputs * shape.n_vocab * 4.0
    return n_kv_touched, compute_cpu


@dataclass(frozen=True)
class _Weights:
    """Weight bytes by device; ``cpu`` includes ``repack``, the CPU backend's interleaved copies."""

    cpu: float
    gpu: float
    repack: float


def _split_weights(shape: ModelShape, ngl: int, use_mmap: bool) -> _Weights:
    """Split the tensors as llama.cpp does for ``ngl`` offloaded layers: the last ``ngl`` repeating layers on
    the GPU, the output layer too when ``ngl > n_layer``, the token embedding always on the CPU."""
    i_gpu_start = shape.n_layer - min(ngl, shape.n_layer)
    output_on_gpu = ngl > shape.n_layer
    w_cpu = w_gpu = repack = 0.0
    for t in shape.tensors:
        on_gpu = (t.layer is not None and t.layer >= i_gpu_start and ngl > 0) or (
            t.layer is None and t.name != "token_embd.weight" and output_on_gpu
        )
        if on_gpu:
            w_gpu += t.n_bytes
        else:
            w_cpu += t.n_bytes
            if t.layer is not None and t.ggml_type in _REPACKED_TYPES:
                repack += t.n_bytes
    if shape.tied_output and output_on_gpu:
        embd = next((t for t in shape.tensors if t.name == "token_embd.weight"), None)
        if embd is not None:
            w_gpu += embd.n_bytes  # llama.cpp places a copy of the tied embedding with the output layer
    if not use_mmap:
        # The file is read into a staging buffer and repacked from there: one resident copy, not two.
        repack = 0.0
    return _Weights(cpu=w_cpu + repack, gpu=w_gpu, repack=repack)


def mem_available_mb(root: Path | str = "/") -> float | None:
    """``MemAvailable`` from ``{root}/proc/meminfo`` in MiB (the kernel's estimate of what can be allocated
    without swapping); None where it cannot be read. On a Jetson the GPU draws from the same pool."""
    try:
        text = (Path(root) / "proc/meminfo").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            try:
                return int(line.split()[1]) / 1024.0
            except (IndexError, ValueError):
                return None
    return None


def is_unified_memory(root: Path | str = "/") -> bool:
    """A Jetson (Tegra): CPU and GPU share one DRAM, so a GPU allocation comes out of MemAvailable too."""
    return (Path(root) / "etc/nv_tegra_release").exists()


def fmt_gb(mib: float) -> str:
    return f"{mib * MIB / 1e9:.1f} GB" if mib * MIB >= 1e9 else f"{mib:.0f} MB"


@dataclass(frozen=True)
class FitCheck:
    fits: bool | None  # None: the device's free memory is unknown
    needed_mb: float
    available_mb: float | None
    reserve_mb: float
    what: str = ""  # "" for the host's (or unified) memory, "GPU memory" for a discrete GPU's

    def message(self) -> str:
        avail = "unknown" if self.available_mb is None else fmt_gb(self.available_mb)
        extra = f" after the plan's reserve of {fmt_gb(self.reserve_mb)}" if self.reserve_mb else ""
        of = f" of {self.what}" if self.what else ""
        return f"needs ≈ {fmt_gb(self.needed_mb)}{of}, {avail} available{extra}"


def check_fit(prediction: MemoryPrediction, available_mb: float | None, reserve_mb: float = 0.0) -> FitCheck:
    if available_mb is None:
        return FitCheck(None, prediction.total_mb, None, reserve_mb)
    free = available_mb - reserve_mb
    return FitCheck(prediction.total_mb <= free, prediction.total_mb, free, reserve_mb)
