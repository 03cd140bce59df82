"""Making the quants a user wants to compare from the F16/BF16/F32 GGUF they start with (``edgeprof models
quantize``), with llama.cpp's own quantizer, and what a file's tensors really are (its tensor-type mix).

A quantized source is refused unless asked for: a Q5_K_M made from a Q8_0 has lost precision twice, and
its KLD against that Q8_0 measures the distance from a lossy file, not from the weights. When asked for
(``allow_requantize``), every file made so is marked in its own metadata (``edgeprof.requantized_from``:
the source's type and sha256), which travels with the file, and every report marks it.

The tensor-type mix: a file's name ("Q5_K_M") says what its maker asked for; where a matrix's row length is
no multiple of a K-quant's block (256), llama.cpp falls back to another type, so a "Q5_K_M" may hold mostly
Q5_0, Q6_K or Q8_0 weights. The mix gives each type's share of the weights (elements), and warns where most
weight matrices are not of the named type.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.gguf.bounded import BoundedGGUFError, read_header
from edgeprof.gguf.info import quant_name
from edgeprof.safefs import OutputKind, check_output
from edgeprof.safetext import safe_text

# llama.cpp's llama_ftype values (llama.h) of the types users make most; the name is what the file says.
QUANT_FTYPES: dict[str, int] = {
    "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9, "Q2_K": 10, "Q3_K_S": 11, "Q3_K_M": 12,
    "Q3_K_L": 13, "Q4_K_S": 14, "Q4_K_M": 15, "Q5_K_S": 16, "Q5_K_M": 17, "Q6_K": 18, "IQ4_NL": 25,
    "IQ4_XS": 30, "F16": 1, "BF16": 32,
}  # fmt: skip
# Tensor types that are no quantization: a source made of these is an original.
UNQUANTIZED = ("F32", "F16", "BF16", "F64")
# The metadata key that marks a requantized file, and what it holds.
REQUANT_KEY = "edgeprof.requantized_from"
# A mix whose named type holds under this share of the weight matrices is warned about.
NAMED_TYPE_MIN_SHARE = 0.5


class QuantizeError(RuntimeError):
    """Why a quantization was refused or failed, in one line."""


@dataclass(frozen=True)
class TensorMix:
    """A file's weights by tensor type."""

    shares: dict[str, float]  # ggml type -> its share of all tensor elements, largest first
    named: str | None  # the type the file's name gives (Q5_K_M -> Q5_K), None where unknown
    named_share: float | None  # share of the weight matrices (2-D+ tensors) of that type
    n_matrices: int
    requantized_from: str | None = None
    quantized_matrices: int = 0  # weight matrices in a quantized type (not F32/F16/BF16)

    @property
    def warning(self) -> str | None:
        if self.named is None or self.named_share is None or self.named_share >= NAMED_TYPE_MIN_SHARE:
            return None
        n_named = round(self.named_share * self.n_matrices)
        return (
            f"only {n_named} of {self.n_matrices} weight matrices are {self.named}: "
            f"the rest fell back to other types"
        )

    def describe(self) -> str:
        return describe_shares(self.shares)

    def to_json(self) -> dict[str, Any]:
        return {
            "shares": {t: round(s, 4) for t, s in self.shares.items()},
            "named": self.named,
            "named_share": round(self.named_share, 4) if self.named_share is not None else None,
            "n_matrices": self.n_matrices,
            "requantized_from": self.requantized_from,
            "warning": self.warning,
        }


def describe_shares(shares: dict[str, float]) -> str:
    """``Q4_K 71 %, Q6_K 27 %, F32 2 %``: each type's share of the weights, largest first (under 0.5 %: left
    out)."""
    ordered = sorted(shares.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{t} {100 * s:.0f} %" for t, s in ordered if s >= 0.005)


def base_type(quant: str | None) -> str | None:
    """The ggml type a file type is named after: Q4_K_M -> Q4_K, Q8_0 -> Q8_0, F16 -> F16."""
    if not quant:
        return None
    for suffix in ("_S", "_M", "_L", "_XS", "_XXS"):
        if quant.endswith(suffix) and "_K" in quant:
            return quant[: -len(suffix)]
    return quant


def tensor_mix(path: str | Path, quant: str | None = None) -> TensorMix:
    """The tensor-type mix of a GGUF (its header only); ``quant``: the type the file is named (default: as
    GGUFInfo names it, from ``general.file_type``)."""
    import gguf

    try:
        header = read_header(path)
    except (BoundedGGUFError, OSError) as exc:
        raise QuantizeError(f"{safe_text(path)}: cannot read: {safe_text(exc)}") from None
    if quant is None:
        file_type = header.fields.get("general.file_type")
        quant = quant_name(file_type if isinstance(file_type, int) else None, [])
    elements: dict[str, int] = {}
    matrices: dict[str, int] = {}
    for _name, dims, ggml_type, _offset in header.tensors:
        try:
            tname = gguf.GGMLQuantizationType(ggml_type).name
        except ValueError:
            tname = f"type {ggml_type}"
        n = 1
        for d in dims:
            n *= d
        elements[tname] = elements.get(tname, 0) + n
        if sum(1 for d in dims if d > 1) >= 2:
            matrices[tname] = matrices.get(tname, 0) + 1
    total = sum(elements.values()) or 1
    shares = dict(sorted(((t, n / total) for t, n in elements.items()), key=lambda kv: -kv[1]))
    n_matrices = sum(matrices.values())
    named = base_type(quant)
    named_share = matrices.get(named, 0) / n_matrices if named is not None and n_matrices else None
    mark = header.fields.get(REQUANT_KEY)
    quantized = sum(n for t, n in matrices.items() if t not in UNQUANTIZED)
    return TensorMix(
        shares, named, named_share, n_matrices, str(mark) if mark is not None else None, quantized
    )


@dataclass
class QuantizeResult:
    made: dict[str, Path] = field(default_factory=dict)  # quant -> file
    requantized_from: str | None = None  # what the marked files were made from


def quantize_model(
    src: Path,
    out_dir: Path,
    types: list[str],
    *,
    allow_requantize: bool = False,
    source_quant: str | None = None,
    source_sha256: Callable[[], str] | None = None,
    log: Callable[[str], None] | None = None,
) -> QuantizeResult:
    """Each of ``types`` made from ``src`` into ``out_dir`` (``<stem>-<type>.gguf``); QuantizeError when a
    type is unknown, the source is quantized and ``allow_requantize`` is not set, or llama.cpp fails."""
    unknown = [t for t in types if t.upper() not in QUANT_FTYPES]
    if unknown or not types:
        known = ", ".join(QUANT_FTYPES)
        shown = safe_text(", ".join(unknown)[:200]) or "(none)"
        raise QuantizeError(f"unknown quantization type {shown} (known: {known})")
    mix = tensor_mix(src, source_quant)
    result = QuantizeResult()
    if mix.quantized_matrices:
        if not allow_requantize:
            raise QuantizeError(
                f"{safe_text(src)} is already quantized ({source_quant or 'mixed types'}: {mix.describe()}); "
                "a quant made from it loses precision twice and its KLD measures the distance from that "
                "file; start from the F16/BF16 original, or pass --allow-requantize (the files are then "
                "marked)"
            )
        digest = source_sha256() if source_sha256 is not None else "unknown"
        result.requantized_from = f"{source_quant or 'quantized'} (sha256 {digest})"
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = src.name.removesuffix(".gguf")
    outputs = {quant: out_dir / f"{stem}-{quant.lower()}.gguf" for quant in (t.upper() for t in types)}
    for dst in outputs.values():  # every output checked before the first is made
        if dst.resolve() == src.resolve():
            raise QuantizeError(f"{safe_text(dst)} is the source itself; choose another --out")
        check_quant_output(dst)
    for quant, dst in outputs.items():
        if log is not None:
            log(f"quantizing to {quant}: {safe_text(dst)}")
        llama_quantize(src, dst, QUANT_FTYPES[quant], allow_requantize=allow_requantize)
        if result.requantized_from is not None:
            copy_with_metadata(dst, dst, {REQUANT_KEY: result.requantized_from})
        result.made[quant] = dst
    return result


# What an output may replace: an earlier GGUF (a quant made before); anything else under its name (notes, a
# database, a link, a FIFO) is refused with nothing written.
GGUF_OUTPUT = OutputKind("GGUF model", (b"GGUF",))


def check_quant_output(dst: Path) -> None:
    """QuantizeError unless ``dst`` may be written: absent, or a regular file that is a GGUF (no link)."""
    try:
        check_output(dst, GGUF_OUTPUT)
    except OSError as exc:
        raise QuantizeError(safe_text(str(exc))) from None


@contextlib.contextmanager
def _new_output(dst: Path, tag: str) -> Iterator[str]:
    """A name to write ``dst`` through, for a writer that opens by name (llama.cpp, the gguf package): a new
    file created beside ``dst`` with O_CREAT|O_EXCL|O_NOFOLLOW under a random name (nothing planted can be
    it), held open and handed over as ``/proc/self/fd/N`` where Linux has it, so the writer opens that very
    file even if its name is swapped meanwhile. When the block ends without an error the file is renamed
    over ``dst`` (checked again first: a rename replaces a link, never writes through it); otherwise it is
    removed."""
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=f".{tag}", dir=dst.parent)
    done = False
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o644 & ~mask)  # a model, like any file the user makes (mkstemp's is 0600)
        by_fd = f"/proc/self/fd/{fd}"
        yield by_fd if os.path.exists(by_fd) else tmp
        st, now = os.fstat(fd), os.lstat(tmp)
        if (st.st_dev, st.st_ino) != (now.st_dev, now.st_ino):
            raise QuantizeError(f"{safe_text(tmp)} was replaced while it was written; nothing was kept")
        check_quant_output(dst)
        os.rename(tmp, dst)
        done = True
    finally:
        os.close(fd)
        if not done:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def llama_quantize(src: Path, dst: Path, ftype: int, *, allow_requantize: bool = False) -> None:
    """llama.cpp's quantizer (``llama_model_quantize``) into ``dst`` via a new temporary file."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = 0
    params.allow_requantize = allow_requantize
    with _new_output(dst, "tmp") as tmp:
        rc = llama_cpp.llama_model_quantize(os.fsencode(src), os.fsencode(tmp), ctypes.byref(params))
        if rc != 0:
            raise QuantizeError(
                f"llama.cpp's quantizer failed on {safe_text(src.name)} (ftype {ftype}, code {rc})"
            )


def copy_with_metadata(src: Path, dst: Path, extra: dict[str, str]) -> None:
    """``src`` rewritten to ``dst`` with string metadata set (added or replaced), tensors byte for byte (the
    gguf package's writer; the data streamed from a memory map). Also used to make two files that differ
    only in one metadata string."""
    import gguf

    reader = gguf.GGUFReader(str(src))
    arch = reader.get_field(gguf.Keys.General.ARCHITECTURE)
    with _new_output(dst, "meta.tmp") as tmp:
        writer = gguf.GGUFWriter(tmp, arch=str(arch.contents()) if arch is not None else "llama")
        for fld in reader.fields.values():
            own = fld.name == gguf.Keys.General.ARCHITECTURE or fld.name.startswith("GGUF.")
            if own or fld.name in extra:
                continue
            if fld.name == gguf.Keys.General.ALIGNMENT:  # the data's padding follows it: the writer must know
                writer.add_custom_alignment(int(fld.contents()))
                continue
            vtype = fld.types[0]
            sub = fld.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(fld.name, fld.contents(), vtype, sub_type=sub)
        for key, value in extra.items():
            writer.add_key_value(key, value, gguf.GGUFValueType.STRING)
        for t in reader.tensors:
            writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for t in reader.tensors:
            writer.write_tensor_data(t.data, tensor_endianess=reader.endianess)
        writer.close()
        del reader
