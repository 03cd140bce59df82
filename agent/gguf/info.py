"""Read what a GGUF file says about itself (architecture, quant type, parameter count), without llama.cpp.

Used by plan validation (is this a whole GGUF file at all?) and to describe every model in storage.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgeprof.gguf.bounded import BoundedGGUFError, GGUFHeader, read_header

GGUF_MAGIC = b"GGUF"


class GGUFError(ValueError):
    """The file is not a readable, complete GGUF file; the message says why in one line."""


# A model's counts as llama.cpp reads them: 32-bit (context, layers, heads, sizes).
GGUF_COUNT_MAX = (1 << 31) - 1


@dataclass(frozen=True)
class GGUFInfo:
    path: str
    size_bytes: int
    mtime_ns: int
    arch: str | None
    name: str | None
    file_type: int | None
    quant_type: str | None
    n_params: int
    n_layers: int | None
    context_length: int | None
    vocab_size: int | None
    tensor_bytes: int = 0  # sum of the tensors' data sizes (what the weights take, without metadata/padding)

    @property
    def bits_per_weight(self) -> float | None:
        """Effective bits per parameter: the ordering key for 'highest-precision variant'."""
        if self.n_params <= 0:
            return None
        return self.size_bytes * 8 / self.n_params

    @property
    def tensor_bits_per_weight(self) -> float | None:
        """Bits per parameter from the tensor sizes, not the file size: a large vocabulary or metadata
        block in the file cannot reorder two variants."""
        if self.n_params <= 0 or self.tensor_bytes <= 0:
            return None
        return self.tensor_bytes * 8 / self.n_params


def _field_value(reader: Any, key: str) -> Any:
    field = reader.fields.get(key)
    if field is None:
        return None
    try:
        return field.contents()
    except Exception:  # noqa: BLE001 - an odd field must not make a valid model unreadable
        return None


def quant_name(file_type: int | None, tensor_types: list[str]) -> str | None:
    """Name of the file's quantization ('Q4_K_M'), from general.file_type or the dominant tensor type."""
    import gguf

    if file_type is not None:
        try:
            name = gguf.LlamaFileType(file_type).name
        except ValueError:
            name = None
        if name is not None and name != "GUESSED":
            return name.removeprefix("MOSTLY_").removeprefix("ALL_")
    if tensor_types:
        return max(set(tensor_types), key=tensor_types.count)
    return None


def read_gguf_info(path: str | Path) -> GGUFInfo:
    """Parse the header, metadata and tensor table; check that every tensor's data lies inside the file."""
    p = Path(path)
    st = _stat_gguf(p)
    header = _read_bounded_header(p)
    if not header.tensors:
        raise GGUFError(f"{p}: a GGUF without tensors is no model")
    tensors = _tensor_table(p, header, st.st_size)
    fields = header.fields
    arch = fields.get("general.architecture")
    arch_s = str(arch) if isinstance(arch, str) else None
    file_type = fields.get("general.file_type")

    def arch_int(suffix: str) -> int | None:
        if arch_s is None:
            return None
        value = fields.get(f"{arch_s}.{suffix}")
        if not isinstance(value, int) or isinstance(value, bool):
            return None
        if not 0 <= value <= GGUF_COUNT_MAX:  # llama.cpp reads these as 32-bit: 2^64-1 is no context
            raise GGUFError(f"{p}: {arch_s}.{suffix} = {value} is outside 0..{GGUF_COUNT_MAX}")
        return value

    name = fields.get("general.name")
    return GGUFInfo(
        path=str(p),
        size_bytes=st.st_size,
        mtime_ns=st.st_mtime_ns,
        arch=arch_s,
        name=str(name) if name is not None else None,
        file_type=int(file_type) if isinstance(file_type, int) else None,
        quant_type=quant_name(int(file_type) if isinstance(file_type, int) else None, tensors.types),
        n_params=tensors.n_params,
        n_layers=arch_int("block_count"),
        context_length=arch_int("context_length"),
        vocab_size=header.array_len.get("tokenizer.ggml.tokens"),
        tensor_bytes=tensors.n_bytes,
    )


def _stat_gguf(p: Path) -> os.stat_result:
    """The file's stat, once it is known to be a regular file that starts like a GGUF."""
    try:
        st = p.stat()
    except FileNotFoundError:
        raise GGUFError(f"{p}: no such file") from None
    except OSError as exc:
        raise GGUFError(f"{p}: cannot stat: {exc.strerror}") from None
    if not p.is_file():
        raise GGUFError(f"{p}: not a regular file")
    try:
        with p.open("rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise GGUFError(f"{p}: cannot read: {exc.strerror}") from None
    if len(magic) < 4:
        raise GGUFError(f"{p}: not a GGUF file (only {st.st_size} bytes)")
    if magic != GGUF_MAGIC:
        # The bytes themselves are not echoed: the path may name a file the plan's author cannot read.
        raise GGUFError(f"{p}: not a GGUF file (it does not start with b'GGUF')")
    return st


def _read_bounded_header(p: Path) -> GGUFHeader:
    try:
        # Bounded: every count is checked against the file's size before it is read, so a corrupt or hostile
        # file is one error line, not a huge allocation; arrays such as a 262k vocabulary are skipped, never
        # materialised.
        return read_header(p)
    except BoundedGGUFError as exc:
        raise GGUFError(f"{p}: truncated or corrupt GGUF ({exc})") from None
    except (OSError, ValueError) as exc:
        raise GGUFError(f"{p}: cannot read: {exc}") from None


@dataclass(frozen=True)
class _Tensors:
    n_params: int
    n_bytes: int
    types: list[str]


def _tensor_table(p: Path, header: GGUFHeader, file_size: int) -> _Tensors:
    """Parameter count, data size and types of the tensors; every tensor must be whole inside the file."""
    import gguf

    n_params = 0
    tensor_bytes = 0
    end = 0
    tensor_types: list[str] = []
    for t_name, dims, ggml_type, offset in header.tensors:
        try:
            qtype = gguf.GGMLQuantizationType(ggml_type)
            block, type_size = gguf.GGML_QUANT_SIZES[qtype]
        except (ValueError, KeyError):
            raise GGUFError(f"{p}: tensor {t_name!r} has an unknown type {ggml_type}") from None
        n_elements = 1
        for d in dims:
            n_elements *= d
        if n_elements % block:
            raise GGUFError(f"{p}: tensor {t_name!r}: {n_elements} elements do not fill {qtype.name} blocks")
        n_bytes = n_elements // block * type_size
        n_params += n_elements
        tensor_bytes += n_bytes
        end = max(end, header.data_start + offset + n_bytes)
        tensor_types.append(qtype.name)
    if end > file_size:
        raise GGUFError(
            f"{p}: truncated GGUF: tensor data ends at byte {end} but the file has {file_size} bytes"
        )
    return _Tensors(n_params, tensor_bytes, tensor_types)


def sha256_file(
    path: str | Path, chunk_bytes: int = 4 << 20, progress: Callable[[], None] | None = None
) -> str:
    """sha256 of a file; ``progress`` is called per chunk (hashing 8 GB from an SD card takes minutes)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            block = fh.read(chunk_bytes)
            if not block:
                break
            h.update(block)
            if progress is not None:
                progress()
    return h.hexdigest()


def drop_page_cache(path: str | Path) -> bool:
    """Ask the kernel to evict the file's clean pages so the next load reads from storage (a real cold start).

    Works without root for pages no process has mapped; returns False where the platform cannot do it.
    """
    if not hasattr(os, "posix_fadvise"):
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
