"""A persistent CPU threadpool for a llama.cpp context, as llama-bench, llama-cli and llama-server use.

llama.cpp's own tools create one pool per context with ``ggml_threadpool_new`` and attach it with
``llama_attach_threadpool`` (polling level 50 by default: workers spin briefly for the next graph before
sleeping). Without one, ggml's CPU backend builds a *disposable* pool inside every graph computation, i.e.
once per decoded token. What that costs depends on the build:

* without OpenMP (``GGML_OPENMP=OFF``), the disposable pool starts and joins ``n_threads - 1`` OS threads
  per graph: a fixed cost per token that prefill (one graph per prompt) never sees;
* with OpenMP (llama.cpp's default where the compiler has it, as in the x86-64 wheel built here), the
  worker threads are OpenMP's own persistent team, and the disposable pool is only a small allocation; the
  ``poll`` level then has no effect either (ggml waits in OpenMP's barrier).

edgeprof attaches a pool in every case, so its decode loop is set up exactly as llama-bench's is, whatever
the build. (benchmarks/diag_decode_timeline.py measures the variants side by side.)

llama-cpp-python 0.3.x does not bind these functions, so they are called through ctypes on the libraries it
ships (``llama_cpp/lib``). Anything missing (another build layout, an older llama.cpp) means no pool:
the worker then reports ``threadpool`` as ggml's default with the reason, and measures as before.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Any

# ggml.h: GGML_MAX_N_THREADS and struct ggml_threadpool_params (layout of the vendored llama.cpp)
GGML_MAX_N_THREADS = 512
# llama-bench's and common's default --poll, -C (no affinity)
DEFAULT_POLL = 50
DEFAULT_CPU_MASK = "0x0"


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


def cpu_mask_bits(text: str) -> list[int]:
    """The CPUs of a hex mask as llama.cpp's parse_cpu_mask reads it (bit i = CPU i; "0x" optional)."""
    value = int(text.lower().removeprefix("0x") or "0", 16)
    return [i for i in range(GGML_MAX_N_THREADS) if value >> i & 1]


def attach(
    ll: Any,
    ctx: Any,
    n_threads: int,
    poll: int = DEFAULT_POLL,
    cpu_mask: str = DEFAULT_CPU_MASK,
    strict_cpu: bool = False,
    prio: int = 0,
) -> tuple[Threadpool | None, str]:
    """Create a pool of ``n_threads`` and attach it to ``ctx`` (decode and batch alike, as llama-bench), on
    the CPUs of ``cpu_mask`` (none: no affinity), one thread per CPU when ``strict_cpu``, at scheduling
    priority ``prio`` (ggml_sched_priority).

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
    for cpu_index in cpu_mask_bits(cpu_mask):
        params.cpumask[cpu_index] = True
    params.strict_cpu = bool(strict_cpu)
    params.prio = int(prio)
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
