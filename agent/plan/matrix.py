"""The ``[matrix]`` table's llama.cpp axes: their names and aliases, defaults, value checks and expansion
order. The models, power-mode and serving axes have their own modules (model_files, power, serving)."""

from __future__ import annotations

import os
from typing import Any

from edgeprof.plan.bounds import MAX_NGL
from edgeprof.plan.checker import Checker, as_list
from edgeprof.plan.serving import SERVING_AXES
from edgeprof.runners import KV_CACHE_TYPES

# -ngl "all": the bound itself, more layers than any model has; llama.cpp offloads every layer and the output
# (llama-bench: -1)
NGL_ALL = MAX_NGL

# Axis name in the plan -> (Params field, default). Order = expansion order inside one model: the axes that
# force a model reload (ngl, mmap) vary slowest, so consecutive runs reuse the model file in the page cache.
AXES: dict[str, tuple[str, Any]] = {
    # llama-bench's defaults where the plan says nothing, so that a number compares with llama-bench's:
    # every layer offloaded (-ngl -1; "all" here, which a CPU-only build ignores), -b 2048, -ub 512, -fa auto
    # (llama.cpp resolves it per device and the worker records what it chose)
    "ngl": ("n_gpu_layers", NGL_ALL),
    "mmap": ("use_mmap", True),
    "ctx": ("n_ctx", 2048),
    "n_batch": ("n_batch", 2048),
    "n_ubatch": ("n_ubatch", None),  # None: llama.cpp's default 512, capped at n_batch (as llama.cpp does)
    "flash_attn": ("flash_attn", "auto"),
    "type_k": ("type_k", "f16"),
    "type_v": ("type_v", "f16"),
    "threads": ("n_threads", None),
    # llama.cpp parity knobs and the context depth, innermost (no reload needed between them except for a
    # new context, which every config gets anyway)
    "swa_full": ("swa_full", False),
    "kv_unified": ("kv_unified", False),
    "offload_kqv": ("offload_kqv", True),
    "op_offload": ("op_offload", True),
    "poll": ("poll", 50),
    "n_seq_max": ("n_seq_max", 1),
    "depth": ("depth", 0),
    # the CPU threadpool (llama-bench -C, --cpu-strict, --prio)
    "cpu_mask": ("cpu_mask", "0x0"),
    "cpu_strict": ("cpu_strict", False),
    "prio": ("prio", 0),
}
AXIS_ALIASES = {
    "batch": "n_batch",
    "ubatch": "n_ubatch",
    "fa": "flash_attn",
    "n_gpu_layers": "ngl",
    "n_ctx": "ctx",
    "n_threads": "threads",
    "use_mmap": "mmap",
    "n_depth": "depth",
}
MATRIX_KEYS = {"models", "power_mode", *AXES, *AXIS_ALIASES, *SERVING_AXES}
BOOLEAN_AXES = ("mmap", "swa_full", "kv_unified", "offload_kqv", "op_offload", "cpu_strict")
# ggml_sched_priority: low, normal, medium, high, realtime (llama-bench --prio)
PRIO_RANGE = (-1, 3)


def cpu_mask_ok(text: str) -> bool:
    """llama.cpp's CPU mask: hex digits, "0x" optional, at most one bit per CPU it can address (512)."""
    digits = text.lower().removeprefix("0x")
    return 0 < len(digits) <= 128 and all(c in "0123456789abcdef" for c in digits)


def default_threads() -> int:
    """Physical cores where known (llama.cpp's own default), else all logical CPUs."""
    try:
        import psutil

        physical = psutil.cpu_count(logical=False)
    except Exception:  # noqa: BLE001 - psutil missing or unable to tell
        physical = None
    return int(physical or os.cpu_count() or 1)


def parse_axes(chk: Checker, matrix: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """Every llama.cpp axis of ``[matrix]`` under its canonical name, in expansion order, defaults filled."""
    chk.unknown_keys(matrix, MATRIX_KEYS, "matrix")
    canonical: dict[str, Any] = {}
    for key, value in matrix.items():
        if key in ("models", "power_mode", *SERVING_AXES):
            continue
        axis = AXIS_ALIASES.get(key, key)
        if axis in canonical:
            chk.add(f"matrix.{key}", f"given twice (also as '{axis}')")
        canonical[axis] = value
    axes: dict[str, tuple[Any, ...]] = {}
    for axis, (_field, default) in AXES.items():
        if axis in canonical:
            axes[axis] = check_axis(chk, axis, canonical[axis])
        else:
            axes[axis] = (default_threads() if axis == "threads" else default,)
    return axes


def check_axis(chk: Checker, axis: str, raw: Any) -> tuple[Any, ...]:
    """One axis's values (a list, or one value for a list of one), each checked; duplicates refused."""
    values: list[Any] = []
    items = as_list(raw)
    if not items:
        chk.add(f"matrix.{axis}", "empty list: give at least one value")
    for i, item in enumerate(items):
        place = f"matrix.{axis}[{i}]" if isinstance(raw, list) else f"matrix.{axis}"
        value = _axis_value(chk, axis, item, place)
        if value is not None:
            values.append(value)
    if len(set(values)) != len(values):
        chk.add(f"matrix.{axis}", "duplicate values")
    return tuple(dict.fromkeys(values))


def _axis_value(chk: Checker, axis: str, item: Any, place: str) -> Any:
    """The value of one item of ``axis``, or None (with the problem added) when it is not valid there."""
    if axis == "ngl":
        if item == "all":
            return NGL_ALL
        if isinstance(item, int) and not isinstance(item, bool) and item < 0:
            chk.add(place, f'negative -ngl ({item}); use 0 for CPU only or "all" for every layer')
            return None
        return chk.integer(item, place, minimum=0)
    if axis in ("ctx", "n_batch", "n_ubatch", "n_seq_max"):
        return chk.integer(item, place, minimum=1)
    if axis == "threads":
        return default_threads() if item == "auto" else chk.integer(item, place, minimum=1)
    if axis in BOOLEAN_AXES:
        return chk.boolean(item, place)
    if axis == "poll":
        value = chk.integer(item, place, minimum=0)
        if value is not None and value > 100:
            chk.add(place, f"poll is a level 0..100 (llama-bench --poll), got {value}")
            return None
        return value
    if axis == "depth":
        return chk.integer(item, place, minimum=0)
    if axis == "cpu_mask":
        if isinstance(item, str) and cpu_mask_ok(item):
            return item.lower()
        chk.add(place, f"a CPU mask is hex, e.g. \"0x3\" for CPUs 0 and 1 (llama-bench -C), got {item!r}")
        return None
    if axis == "prio":
        value = chk.integer(item, place, minimum=PRIO_RANGE[0])
        if value is not None and value > PRIO_RANGE[1]:
            chk.add(place, f"prio is -1..3 (llama-bench --prio: low .. realtime): {value}")
            return None
        return value
    if axis == "flash_attn":
        return _flash_attn(chk, item, place)
    if axis in ("type_k", "type_v"):
        if isinstance(item, str) and item.lower() in KV_CACHE_TYPES:
            return item.lower()
        chk.add(place, f"unknown KV cache type {item!r}; one of {', '.join(KV_CACHE_TYPES)}")
    return None


def _flash_attn(chk: Checker, item: Any, place: str) -> str | None:
    if isinstance(item, bool):
        return "on" if item else "off"
    if item in ("on", "off", "auto"):
        return str(item)
    chk.add(place, f'expected true, false, "on", "off" or "auto", got {item!r}')
    return None


def check_axis_pairs(chk: Checker, axes: dict[str, tuple[Any, ...]]) -> None:
    """The combinations llama.cpp itself refuses, before anything runs."""
    for i, n_ub in enumerate(a for a in axes.get("n_ubatch", ()) if a is not None):
        if any(n_ub > nb for nb in axes.get("n_batch", ())):
            chk.add(
                f"matrix.n_ubatch[{i}]",
                f"{n_ub} is larger than an n_batch value; llama.cpp needs ubatch <= batch",
            )
    if any(v not in ("f16", "f32", "bf16") for v in axes.get("type_v", ())) and "off" in axes.get(
        "flash_attn", ()
    ):
        chk.add(
            "matrix.type_v", 'a quantized V cache needs flash_attn = "on" (llama.cpp refuses it otherwise)'
        )
