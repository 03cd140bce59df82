"""The model and context a worker measures on: set up as llama-bench sets them up, read back as applied.

``load_model`` loads the GGUF with the plan's parameters, creates the context with llama-bench's values
for everything the plan does not set, attaches a persistent CPU threadpool, and returns the parameters in
effect: read back from llama.cpp where it can say, from its own log lines where only the log says (the KV
cache sizes, the flash-attention choice under "auto", the resolved load mode). ``install_log_capture``
routes that log through this module; a worker that does not install it (the quality worker) reports those
log-only fields as unknown.
"""

from __future__ import annotations

import ctypes
import os
import re
from typing import Any

from edgeprof.runners import threadpool
from edgeprof.runners.protocol import KV_CACHE_TYPES, check_loaded_size, check_model_file

# llama-bench's context values unless the plan says otherwise (tools/llama-bench/llama-bench.cpp,
# to_llama_cparams: swa_full = false, offload_kqv = !no_kv_offload, op_offload = !no_op_offload; n_seq_max
# and kv_unified stay llama_context_default_params()'s). llama_context_default_params() has swa_full =
# true, which made a sliding-window model's KV cache several times larger than llama.cpp's tools use.
PARITY_CPARAMS: dict[str, Any] = {
    "swa_full": False,
    "kv_unified": False,
    "offload_kqv": True,
    "op_offload": True,
    "n_seq_max": 1,
}
DEFAULT_POLL = threadpool.DEFAULT_POLL  # llama-bench's --poll default, also ggml's own threadpool default

# llama.cpp's log lines, kept while a context is created: the KV cache sizes are only reported there.
KV_LOG: list[str] = []
LOAD_MODE_SEEN: list[str] = []  # llama.cpp's "loading model tensors ... (load_mode = mmap)" line
FA_LOG: list[str] = []  # llama.cpp's "Flash Attention enabled" / "... not supported, set to disabled" lines
_LOG_CALLBACK: Any = None

_KV_LINE = re.compile(
    r"llama_kv_cache: size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)/(\d+) seqs\)"
)

_POOL: threadpool.Threadpool | None = None  # the context's CPU threadpool, freed after the context


def _set(struct: Any, name: str, value: Any) -> None:
    """Set a field of a llama.cpp params struct, refusing names the struct lacks: ctypes would silently
    accept them as plain Python attributes, and the knob would do nothing (as ``use_mmap`` once did)."""
    if name not in {f[0] for f in type(struct)._fields_}:
        raise RuntimeError(f"this llama-cpp-python has no {type(struct).__name__}.{name}; cannot apply it")
    setattr(struct, name, value)


def _has_load_mode(mparams: Any) -> bool:
    return "load_mode" in {f[0] for f in type(mparams)._fields_}  # llama.cpp replaced use_mmap with it


def _model_params(ll: Any, params: dict[str, Any]) -> Any:
    mparams = ll.llama_model_default_params()
    _set(mparams, "n_gpu_layers", int(params["n_gpu_layers"]))
    if _has_load_mode(mparams):
        load_mode = ll.LLAMA_LOAD_MODE_MMAP if params["use_mmap"] else ll.LLAMA_LOAD_MODE_NONE
        _set(mparams, "load_mode", load_mode)
    else:
        _set(mparams, "use_mmap", bool(params["use_mmap"]))
    return mparams


def _context_params(ll: Any, params: dict[str, Any]) -> Any:
    cparams = ll.llama_context_default_params()
    _set(cparams, "n_ctx", int(params["n_ctx"]))
    _set(cparams, "n_batch", int(params["n_batch"]))
    _set(cparams, "n_ubatch", int(params["n_ubatch"]))
    _set(cparams, "n_threads", int(params["n_threads"]))
    _set(cparams, "n_threads_batch", int(params["n_threads"]))
    flash = {
        "on": ll.LLAMA_FLASH_ATTN_TYPE_ENABLED,
        "off": ll.LLAMA_FLASH_ATTN_TYPE_DISABLED,
        "auto": ll.LLAMA_FLASH_ATTN_TYPE_AUTO,
    }
    _set(cparams, "flash_attn_type", flash[params["flash_attn"]])
    _set(cparams, "type_k", KV_CACHE_TYPES[params["type_k"]])
    _set(cparams, "type_v", KV_CACHE_TYPES[params["type_v"]])
    _set(cparams, "no_perf", False)  # the default turns llama.cpp's counters off; they are the measurement
    for name, default in PARITY_CPARAMS.items():
        _set(cparams, name, type(default)(params.get(name, default)))
    return cparams


def load_model(ll: Any, job: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """(model, context, the parameters in effect) for ``job``; RuntimeError with the reason when llama.cpp
    cannot load the model, create the context, or give it the threadpool a non-default ``poll`` needs.
    The caller frees the context, then ``free_threadpool()``, then the model."""
    global _POOL
    params = job["params"]
    path = job["model_path"]
    mparams = _model_params(ll, params)
    identity = job.get("model_identity")
    check_model_file(path, identity)
    model = ll.llama_model_load_from_file(path.encode(), mparams)
    if not model:
        raise RuntimeError(f"llama.cpp could not load {path} (see log tail)")
    try:  # replaced while it loaded, or not the file hashed: llama.cpp's own size of what it loaded
        check_model_file(path, identity)
        check_loaded_size(int(ll.llama_model_size(model)), identity)
    except RuntimeError:
        ll.llama_model_free(model)
        raise
    cparams = _context_params(ll, params)
    poll = int(params.get("poll", DEFAULT_POLL))
    KV_LOG.clear()
    FA_LOG.clear()
    ctx = ll.llama_init_from_model(model, cparams)
    if not ctx:
        ll.llama_model_free(model)
        raise RuntimeError(
            "llama.cpp could not create the context (out of memory, or unsupported parameters)"
        )
    # One persistent CPU threadpool per context, as llama-bench/llama-server create; without it ggml
    # builds a pool inside every llama_decode (on a build without OpenMP: n_threads-1 OS threads started
    # and joined per decoded token). See runners/threadpool.py, benchmarks/diag_decode_timeline.py.
    placement = pool_placement(params)
    _POOL, pool_why = threadpool.attach(ll, ctx, int(params["n_threads"]), poll, **placement)
    asked = [f"poll {poll}"] if poll != DEFAULT_POLL else []
    asked += [f"{k} {v}" for k, v in placement.items() if v != POOL_DEFAULTS[k]]
    if _POOL is None and asked:
        ll.llama_free(ctx)
        ll.llama_model_free(model)
        raise RuntimeError(f"{', '.join(asked)} need(s) an attached threadpool: {pool_why}")
    pool = (
        f"attached (n_threads {_POOL.n_threads}, poll {_POOL.poll})"
        if _POOL is not None
        else f"ggml default (created per graph, poll 50): {pool_why}"
    )
    return model, ctx, _effective(ll, model, ctx, mparams, cparams, params, pool)


def _effective(
    ll: Any, model: Any, ctx: Any, mparams: Any, cparams: Any, params: dict[str, Any], pool: str
) -> dict[str, Any]:
    """The parameters the run had: read back from llama.cpp where it can say, else as asked."""
    return {
        "n_ctx": int(ll.llama_n_ctx(ctx)),
        "n_batch": int(ll.llama_n_batch(ctx)),
        "n_ubatch": int(ll.llama_n_ubatch(ctx)),
        "n_threads": int(ll.llama_n_threads(ctx)),
        "n_threads_batch": int(ll.llama_n_threads_batch(ctx)),
        "n_gpu_layers": int(params["n_gpu_layers"]),
        # a CPU-only build ignores -ngl: the run measured the CPU whatever the plan asked for
        "gpu_offload_supported": bool(ll.llama_supports_gpu_offload()),
        "n_layer": int(ll.llama_model_n_layer(model)),
        "flash_attn": params["flash_attn"],
        "flash_attn_effective": flash_attn_effective(params["flash_attn"], FA_LOG),
        "type_k": params["type_k"],
        "type_v": params["type_v"],
        "use_mmap": bool(params["use_mmap"]),
        "load_mode": int(mparams.load_mode) if _has_load_mode(mparams) else None,
        "model_size_bytes": int(ll.llama_model_size(model)),
        "n_params": int(ll.llama_model_n_params(model)),
        # llama.cpp's own "<arch> <size> <file type>", which llama-bench prints as model_type
        "model_desc": model_desc(ll, model),
        # the llama-bench context values in effect, so a stored run says which KV cache it measured
        **{name: getattr(cparams, name) for name in PARITY_CPARAMS},
        "n_seq_max": int(ll.llama_n_seq_max(ctx)),
        "n_ctx_seq": int(ll.llama_n_ctx_seq(ctx)),
        "n_swa": int(ll.llama_model_n_swa(model)),
        "poll": int(params.get("poll", DEFAULT_POLL)),
        **{("cpu_strict" if k == "strict_cpu" else k): v for k, v in pool_placement(params).items()},
        "threadpool": pool,
        "depth": int(params.get("depth", 0)),
        "split_mode": int(mparams.split_mode),
        "main_gpu": int(mparams.main_gpu),
        "use_extra_bufts": bool(mparams.use_extra_bufts),
        "n_ctx_train": int(ll.llama_model_n_ctx_train(model)),
        **kv_cache_from_log(KV_LOG),
        "load_mode_effective": LOAD_MODE_SEEN[-1] if LOAD_MODE_SEEN else None,
    }


# the threadpool's placement (job params, as llama-bench's -C, --cpu-strict, --prio) and its defaults
POOL_DEFAULTS: dict[str, Any] = {"cpu_mask": threadpool.DEFAULT_CPU_MASK, "strict_cpu": False, "prio": 0}


def pool_placement(params: dict[str, Any]) -> dict[str, Any]:
    return {
        "cpu_mask": str(params.get("cpu_mask", POOL_DEFAULTS["cpu_mask"])),
        "strict_cpu": bool(params.get("cpu_strict", POOL_DEFAULTS["strict_cpu"])),
        "prio": int(params.get("prio", POOL_DEFAULTS["prio"])),
    }


def model_desc(ll: Any, model: Any) -> str | None:
    """llama_model_desc(): the size word comes from llama.cpp's table of model shapes, which only llama.cpp
    knows; None when the binding lacks it."""
    fn = getattr(ll, "llama_model_desc", None)
    if fn is None:
        return None
    buf = ctypes.create_string_buffer(256)
    fn(model, buf, ctypes.sizeof(buf))
    return buf.value.decode(errors="replace") or None


def free_threadpool() -> None:
    """Free the context's threadpool; only after ``llama_free(ctx)``, as the context uses it until then."""
    if _POOL is not None:
        _POOL.free()


def kv_cache_from_log(lines: list[str]) -> dict[str, Any]:
    """KV cache sizes as llama.cpp reports them ('llama_kv_cache: size = 36.00 MiB (2048 cells, 18 layers,
    1/1 seqs) ...'; one line per cache: a sliding-window model has a full-size and a SWA cache)."""
    caches = []
    for line in lines:
        m = _KV_LINE.search(line)
        if m:
            size_mib, cells, layers = float(m.group(1)), int(m.group(2)), int(m.group(3))
            caches.append({"size_mib": size_mib, "cells": cells, "layers": layers})
    if not caches:
        return {"kv_caches": None, "kv_cache_mib": None}
    return {"kv_caches": caches, "kv_cache_mib": round(sum(c["size_mib"] for c in caches), 2)}


def flash_attn_effective(requested: str, lines: list[str]) -> str | None:
    """ "on"/"off" as llama.cpp resolved ``requested``; None when "auto" and llama.cpp said nothing (an older
    llama.cpp that does not log its choice): not measured, so not guessed."""
    if requested in ("on", "off"):
        return requested
    for line in lines:
        if "not supported" in line or "disabled" in line:
            return "off"
        if "enabled" in line:
            return "on"
    return None


def install_log_capture(ll: Any) -> None:
    """Route llama.cpp's log through us: every line still goes to stderr (the log tail the parent keeps),
    and the KV cache lines are kept for the effective parameters."""
    global _LOG_CALLBACK

    @ll.llama_log_callback
    def _callback(level: int, text: bytes, _user: Any) -> None:
        if text:
            os.write(2, text)
            if b"llama_kv_cache" in text:
                KV_LOG.append(text.decode("utf-8", errors="replace"))
            elif b"Flash Attention" in text:  # -fa auto: llama.cpp's choice for this model and device
                FA_LOG.append(text.decode("utf-8", errors="replace"))
            elif b"(load_mode = " in text:  # what llama.cpp resolved (AUTO: mmap unless a device lacks it)
                m = re.search(rb"\(load_mode = (\w+)\)", text)
                if m:
                    LOAD_MODE_SEEN.append(m.group(1).decode())

    _LOG_CALLBACK = _callback  # ctypes callbacks must outlive their registration
    ll.llama_log_set(_callback, ctypes.c_void_p(0))
