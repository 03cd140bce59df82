"""A persistent CPU threadpool for a llama.cpp context, as llama-bench, llama-cli and llama-server use.

Without one, ggml's CPU backend builds a *disposable* threadpool inside every graph computation: each
``llama_decode`` of one token starts and joins ``n_threads - 1`` OS threads. For prefill (one graph for the
whole prompt) that cost is invisible; for decode it is paid once per token, a fixed ~0.1-1 ms on a loaded
2-core VM, and it is why edgeprof's tg_tps sat a few percent under llama-bench's (benchmarks/README.md,
"Decode fidelity"). llama.cpp's own tools create one pool per context with ``ggml_threadpool_new`` and
``llama_attach_threadpool``; their default polling level is 50 (workers spin briefly for the next graph
before sleeping), so edgeprof uses the same default to measure what those tools deliver.

llama-cpp-python 0.3.x does not bind these functions, so they are called through ctypes on the libraries it
ships (``llama_cpp/lib``). Anything missing (another build layout, an older llama.cpp) means no pool:
the worker then reports ``threadpool = None`` with the reason, and measures as before.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Any

# ggml.h: GGML_MAX_N_THREADS and struct ggml_threadpool_params (layout of the vendored llama.cpp)
GGML_MAX_N_THREADS = 512
# llama-bench's and common's default --poll
DEFAULT_POLL = 50


class ThreadpoolParams(ctypes.Structure):
    _fields_ = [
        ("cpumask", ctypes.c_bool * GGML_MAX_N_THREADS),
        ("n_threads", ctypes.c_int),
        ("prio", ctypes.c_int),
        ("poll", ctypes.c_uint32),
        ("strict_cpu", ctypes.c_bool),
        ("paused", ctypes.c_bool),
    ]


@dataclass
class Threadpool:
    handle: int
    n_threads: int
    poll: int
    _free: Any

    def free(self) -> None:
        if self.handle:
            self._free(ctypes.c_void_p(self.handle))
            self.handle = 0

    def describe(self) -> dict[str, Any]:
        return {"n_threads": self.n_threads, "poll": self.poll}


def _lib(name: str) -> ctypes.CDLL:
    import llama_cpp

    path = os.path.join(os.path.dirname(llama_cpp.__file__), "lib", name)
    # RTLD_GLOBAL like llama-cpp-python's own loader; the same path returns the already-loaded library
    return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


def attach(ll: Any, ctx: Any, n_threads: int, poll: int = DEFAULT_POLL) -> tuple[Threadpool | None, str]:
    """Create a pool of ``n_threads`` and attach it to ``ctx`` (decode and batch alike, as llama-bench).

    Returns (pool, "") or (None, why not). The caller frees the pool after ``llama_free(ctx)``.
    """
    try:
        base = _lib("libggml-base.so")
        cpu = _lib("libggml-cpu.so")
        init = base.ggml_threadpool_params_init
        new = cpu.ggml_threadpool_new
        free = cpu.ggml_threadpool_free
        attach_fn = ll.llama_cpp._lib.llama_attach_threadpool
    except (OSError, AttributeError) as exc:
        return None, f"no threadpool API in this llama-cpp-python build: {exc}"
    init.argtypes = [ctypes.POINTER(ThreadpoolParams), ctypes.c_int]
    init.restype = None
    new.argtypes = [ctypes.POINTER(ThreadpoolParams)]
    new.restype = ctypes.c_void_p
    free.argtypes = [ctypes.c_void_p]
    free.restype = None
    attach_fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    attach_fn.restype = None
    params = ThreadpoolParams()
    init(ctypes.byref(params), int(n_threads))
    params.poll = int(poll)
    handle = new(ctypes.byref(params))
    if not handle:
        return None, f"ggml_threadpool_new failed for {n_threads} threads"
    ctx_ptr = ctypes.cast(ctx, ctypes.c_void_p)
    attach_fn(ctx_ptr, ctypes.c_void_p(handle), ctypes.c_void_p(0))
    return Threadpool(int(handle), int(n_threads), int(poll), free), ""


def detach(ll: Any, ctx: Any) -> None:
    try:
        fn = ll.llama_cpp._lib.llama_detach_threadpool
    except AttributeError:
        return
    fn.argtypes = [ctypes.c_void_p]
    fn.restype = None
    fn(ctypes.cast(ctx, ctypes.c_void_p))
