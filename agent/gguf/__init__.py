"""GGUF files: a bounded reader, what a file says about itself, the memory model, bandwidth, demo models.

Other packages import from here, not from the modules inside: ``bounded`` (a header reader whose every
count is checked against the file's size), ``info`` (what a model file is, hashing, page-cache eviction),
``shape`` (layers, heads, vocabulary and tensor sizes from the header), ``memory`` (will a config fit),
``bandwidth`` (bytes per token and the DRAM probe) and ``demo`` (the demo models). numpy, the ``gguf``
package and llama.cpp are imported inside the functions that need them, so importing this package stays
cheap for the CLI.
"""

from edgeprof.gguf.bandwidth import (
    BoardBandwidth,
    ProbeResult,
    achieved_gbps,
    datasheet_bandwidth,
    decode_mean_depth,
    kv_read_per_token,
    probe_bandwidth,
    weights_read_per_token,
)
from edgeprof.gguf.bounded import BoundedGGUFError, ChatFields, GGUFHeader, read_chat_fields, read_header
from edgeprof.gguf.demo import (
    CHATML_TEMPLATE,
    DEMO_QUANTS,
    DEMO_SIZES,
    build_demo_models,
    demo_model_paths,
    quantize,
    write_f16_gguf,
)
from edgeprof.gguf.info import GGUFError, GGUFInfo, drop_page_cache, quant_name, read_gguf_info, sha256_file
from edgeprof.gguf.memory import (
    MIB,
    QUALITY_ROWS_PER_BLOCK,
    RUNTIME_BASE_MIB,
    VOCAB_BYTES_PER_TOKEN,
    FitCheck,
    MemoryPrediction,
    check_fit,
    fmt_mib,
    is_unified_memory,
    kv_bytes,
    kv_bytes_per_cell,
    kv_cells,
    mem_available_mb,
    predict_memory,
    quality_outputs,
    quality_scoring_bytes,
)
from edgeprof.gguf.shape import ModelShape, TensorInfo, read_model_shape

__all__ = [
    "CHATML_TEMPLATE",
    "DEMO_QUANTS",
    "DEMO_SIZES",
    "MIB",
    "QUALITY_ROWS_PER_BLOCK",
    "RUNTIME_BASE_MIB",
    "VOCAB_BYTES_PER_TOKEN",
    "BoardBandwidth",
    "BoundedGGUFError",
    "ChatFields",
    "FitCheck",
    "GGUFError",
    "GGUFHeader",
    "GGUFInfo",
    "MemoryPrediction",
    "ModelShape",
    "ProbeResult",
    "TensorInfo",
    "achieved_gbps",
    "build_demo_models",
    "check_fit",
    "datasheet_bandwidth",
    "decode_mean_depth",
    "demo_model_paths",
    "drop_page_cache",
    "fmt_mib",
    "is_unified_memory",
    "kv_bytes",
    "kv_bytes_per_cell",
    "kv_cells",
    "kv_read_per_token",
    "mem_available_mb",
    "predict_memory",
    "probe_bandwidth",
    "quality_outputs",
    "quality_scoring_bytes",
    "quant_name",
    "quantize",
    "read_chat_fields",
    "read_gguf_info",
    "read_header",
    "read_model_shape",
    "sha256_file",
    "weights_read_per_token",
    "write_f16_gguf",
]
