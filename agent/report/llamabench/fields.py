"""llama-bench's output fields, in its order, with its types: the one list every llama-bench printer and the
importer read.

Taken from ``test::get_fields()`` and ``test::get_field_type()`` of tools/llama-bench/llama-bench.cpp in the
llama.cpp that llama-cpp-python vendors (the same source scripts/setup.sh builds llama-bench from), so that
llama.cpp's scripts/compare-llama-bench.py and other llama-bench tooling read edgeprof's output as their own.
The json and jsonl printers add ``samples_ns`` and ``samples_ts`` after these, as llama-bench does.
"""

from __future__ import annotations

from typing import Literal

FieldType = Literal["string", "bool", "int", "float"]

_S: FieldType = "string"
_B: FieldType = "bool"
_I: FieldType = "int"
_F: FieldType = "float"

FIELDS: tuple[tuple[str, FieldType], ...] = (
    ("build_commit", _S), ("build_number", _I), ("cpu_info", _S), ("gpu_info", _S), ("backends", _S),
    ("model_filename", _S), ("model_type", _S), ("model_size", _I), ("model_n_params", _I), ("n_batch", _I),
    ("n_ubatch", _I), ("n_threads", _I), ("cpu_mask", _S), ("cpu_strict", _B), ("poll", _I),
    ("type_k", _S), ("type_v", _S), ("n_gpu_layers", _I), ("n_cpu_moe", _I), ("split_mode", _S),
    ("main_gpu", _I), ("no_kv_offload", _B), ("flash_attn", _I), ("devices", _S), ("tensor_split", _S),
    ("tensor_buft_overrides", _S), ("load_mode", _S), ("lazy_mode", _S),
    ("embeddings", _B),
    ("no_op_offload", _I), ("no_host", _B), ("repack", _B), ("fit_target", _I), ("fit_min_ctx", _I),
    ("n_prompt", _I), ("n_gen", _I), ("n_depth", _I),
    ("test_time", _S), ("avg_ns", _I), ("stddev_ns", _I), ("avg_ts", _F), ("stddev_ts", _F),
)  # fmt: skip
FIELD_NAMES: tuple[str, ...] = tuple(name for name, _ in FIELDS)
FIELD_TYPES: dict[str, FieldType] = dict(FIELDS)
# After the fields, in the json and jsonl outputs only: every repetition's time and its tokens per second
SAMPLE_FIELDS: tuple[str, ...] = ("samples_ns", "samples_ts")

# What llama-bench prints for the knobs edgeprof does not vary: its own defaults (cmd_params_defaults), so
# that a row from edgeprof reads like a row from llama-bench run with the same flags.
LLAMA_BENCH_DEFAULTS: dict[str, object] = {
    "cpu_mask": "0x0",
    "cpu_strict": False,
    "n_cpu_moe": 0,
    "split_mode": "layer",
    "main_gpu": 0,
    "devices": "auto",
    "tensor_split": "0.00",
    "tensor_buft_overrides": "none",
    "load_mode": "auto",
    "lazy_mode": "auto",
    "embeddings": False,
    "no_host": False,
    "repack": True,
    "fit_target": 0,
    "fit_min_ctx": 0,
}

# llama-bench's -fa values as it prints them (llama_flash_attn_type: auto -1, disabled 0, enabled 1)
FLASH_ATTN_CODES: dict[str, int] = {"auto": -1, "off": 0, "on": 1}
