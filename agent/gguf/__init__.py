"""GGUF files: a bounded reader, what a file says about itself, the memory model, bandwidth, demo models.

The modules: ``bounded`` (a header reader whose every
count is checked against the file's size), ``info`` (what a model file is, hashing, page-cache eviction),
``shape`` (layers, heads, vocabulary and tensor sizes from the header), ``memory`` (will a config fit),
``bandwidth`` (bytes per token and the DRAM probe) and ``demo`` (the demo models). numpy, the ``gguf``
package and llama.cpp are imported inside the functions that need them, so importing this package stays
cheap for the CLI.

The names below are the ones callers use; each is imported from its module on first use
(``edgeprof.lazy``), so importing the package alone costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgeprof.lazy import lazy_exports

if TYPE_CHECKING:
    from edgeprof.gguf.bandwidth import (
        ProbeResult,
        achieved_gbps,
        datasheet_bandwidth,
        decode_mean_depth,
        kv_read_per_token,
        probe_bandwidth,
        weights_read_per_token,
    )
    from edgeprof.gguf.bounded import read_chat_fields, read_header
    from edgeprof.gguf.demo import CHATML_TEMPLATE, DEMO_QUANTS, build_demo_models, quantize, write_f16_gguf
    from edgeprof.gguf.info import GGUFError, GGUFInfo, drop_page_cache, read_gguf_info, sha256_file
    from edgeprof.gguf.memory import (
        MIB,
        QUALITY_ROWS_PER_BLOCK,
        RUNTIME_BASE_MIB,
        FitCheck,
        check_fit,
        fmt_mib,
        is_unified_memory,
        kv_bytes_per_cell,
        kv_cells,
        mem_available_mb,
        predict_memory,
        quality_outputs,
        quality_scoring_bytes,
    )
    from edgeprof.gguf.shape import ModelShape, TensorInfo, read_model_shape

# module of this package -> the public names it defines, imported on first use
_HOMES: dict[str, tuple[str, ...]] = {
    "bandwidth": (
        "ProbeResult",
        "achieved_gbps",
        "datasheet_bandwidth",
        "decode_mean_depth",
        "kv_read_per_token",
        "probe_bandwidth",
        "weights_read_per_token",
    ),
    "bounded": ("read_chat_fields", "read_header"),
    "demo": ("CHATML_TEMPLATE", "DEMO_QUANTS", "build_demo_models", "quantize", "write_f16_gguf"),
    "info": ("GGUFError", "GGUFInfo", "drop_page_cache", "read_gguf_info", "sha256_file"),
    "memory": (
        "MIB",
        "QUALITY_ROWS_PER_BLOCK",
        "RUNTIME_BASE_MIB",
        "FitCheck",
        "check_fit",
        "fmt_mib",
        "is_unified_memory",
        "kv_bytes_per_cell",
        "kv_cells",
        "mem_available_mb",
        "predict_memory",
        "quality_outputs",
        "quality_scoring_bytes",
    ),
    "shape": ("ModelShape", "TensorInfo", "read_model_shape"),
}

__all__ = [
    "CHATML_TEMPLATE",
    "DEMO_QUANTS",
    "MIB",
    "QUALITY_ROWS_PER_BLOCK",
    "RUNTIME_BASE_MIB",
    "FitCheck",
    "GGUFError",
    "GGUFInfo",
    "ModelShape",
    "ProbeResult",
    "TensorInfo",
    "achieved_gbps",
    "build_demo_models",
    "check_fit",
    "datasheet_bandwidth",
    "decode_mean_depth",
    "drop_page_cache",
    "fmt_mib",
    "is_unified_memory",
    "kv_bytes_per_cell",
    "kv_cells",
    "kv_read_per_token",
    "mem_available_mb",
    "predict_memory",
    "probe_bandwidth",
    "quality_outputs",
    "quality_scoring_bytes",
    "quantize",
    "read_chat_fields",
    "read_gguf_info",
    "read_header",
    "read_model_shape",
    "sha256_file",
    "weights_read_per_token",
    "write_f16_gguf",
]

__getattr__ = lazy_exports(__name__, _HOMES)
