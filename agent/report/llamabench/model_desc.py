"""llama.cpp's description of a model (``llama_model_desc``: "<arch> <size> <file type>", e.g.
"llama 1.5B Q4_K - Medium"), the string llama-bench prints as ``model_type`` and llama.cpp's
scripts/compare-llama-bench.py pairs results by.

The worker asks llama.cpp for it when it loads the model (the run's ``model_desc``), so a record says exactly
what llama-bench would. For a run stored before that, the description is rebuilt from the GGUF: the file type
named from llama.cpp's own table (``llama_ftype_name`` in src/llama-model-loader.cpp), the size word "?B",
which is what llama.cpp prints for a shape its table does not know; a size read off the parameter count
would be a guess at llama.cpp's table (1.5B is not "2B").
"""

from __future__ import annotations

# llama_ftype value (include/llama.h; gguf's LlamaFileType) -> llama_ftype_name()
FTYPE_NAMES: dict[int, str] = {
    0: "all F32", 1: "F16", 32: "BF16", 40: "Q1_0", 2: "Q4_0", 3: "Q4_1", 8: "Q5_0", 9: "Q5_1", 7: "Q8_0",
    38: "MXFP4 MoE", 39: "NVFP4", 10: "Q2_K - Medium", 21: "Q2_K - Small", 11: "Q3_K - Small",
    12: "Q3_K - Medium", 13: "Q3_K - Large", 14: "Q4_K - Small", 15: "Q4_K - Medium", 16: "Q5_K - Small",
    17: "Q5_K - Medium", 18: "Q6_K", 36: "TQ1_0 - 1.69 bpw ternary", 37: "TQ2_0 - 2.06 bpw ternary",
    19: "IQ2_XXS - 2.0625 bpw", 20: "IQ2_XS - 2.3125 bpw", 28: "IQ2_S - 2.5 bpw", 29: "IQ2_M - 2.7 bpw",
    22: "IQ3_XS - 3.3 bpw", 23: "IQ3_XXS - 3.0625 bpw", 24: "IQ1_S - 1.5625 bpw", 31: "IQ1_M - 1.75 bpw",
    25: "IQ4_NL - 4.5 bpw", 30: "IQ4_XS - 4.25 bpw", 26: "IQ3_S - 3.4375 bpw", 27: "IQ3_S mix - 3.66 bpw",
}  # fmt: skip
# edgeprof's quant name (gguf's LlamaFileType name without MOSTLY_) -> llama_ftype value
QUANT_FTYPES: dict[str, int] = {
    "F32": 0, "F16": 1, "BF16": 32, "Q1_0": 40, "Q4_0": 2, "Q4_1": 3, "Q5_0": 8, "Q5_1": 9, "Q8_0": 7,
    "MXFP4_MOE": 38, "NVFP4": 39, "Q2_K": 10, "Q2_K_S": 21, "Q3_K_S": 11, "Q3_K_M": 12, "Q3_K_L": 13,
    "Q4_K_S": 14, "Q4_K_M": 15, "Q5_K_S": 16, "Q5_K_M": 17, "Q6_K": 18, "TQ1_0": 36, "TQ2_0": 37,
    "IQ2_XXS": 19, "IQ2_XS": 20, "IQ2_S": 28, "IQ2_M": 29, "IQ3_XS": 22, "IQ3_XXS": 23, "IQ1_S": 24,
    "IQ1_M": 31, "IQ4_NL": 25, "IQ4_XS": 30, "IQ3_S": 26, "IQ3_M": 27,
}  # fmt: skip
UNKNOWN_FTYPE = "unknown, may not work"
GUESSED_PREFIX = "(guessed) "
UNKNOWN_SIZE = "?B"


def ftype_name(file_type: int | None, quant: str | None) -> str:
    """llama_ftype_name of the file: from general.file_type when the file has it; else from the quant edgeprof
    read off the tensors, marked "(guessed)" as llama.cpp marks a type it guessed."""
    if file_type is not None:
        return FTYPE_NAMES.get(file_type, UNKNOWN_FTYPE)
    ftype = QUANT_FTYPES.get((quant or "").upper())
    return GUESSED_PREFIX + (FTYPE_NAMES[ftype] if ftype is not None else UNKNOWN_FTYPE)


def model_desc(arch: str | None, file_type: int | None, quant: str | None) -> str:
    """The description of a model whose run did not record llama.cpp's own (see the module docstring)."""
    return f"{arch or '?'} {UNKNOWN_SIZE} {ftype_name(file_type, quant)}"


def quant_of_desc(desc: str | None) -> str | None:
    """edgeprof's quant name ("Q4_K_M") of a llama.cpp description's file type ("... Q4_K - Medium"), so an
    imported llama-bench record meets an edgeprof run of the same file; None when it names none."""
    if not desc:
        return None
    by_name = {name: quant for quant, ftype in QUANT_FTYPES.items() for name in [FTYPE_NAMES[ftype]]}
    # the file type is the description's tail after "<arch> <size> " (a name may hold spaces)
    for name in sorted(by_name, key=len, reverse=True):
        if desc.endswith(" " + name):
            return by_name[name]
    return None
