"""The child-process side: every run is a worker process that the agent starts, watches and classifies.

What the agent imports from here: ``run_child`` starts a worker for one job, enforces its timeout and turns
any ending (done, error, crash, hang, Ctrl-C) into a ``ChildResult``; ``RunInterrupted`` carries that result
out of a stop request; the worker protocol's names (exit codes, the test-suite fault switch, the KV cache
types a worker accepts).

The workers themselves are processes, never imported by the agent: ``python -m
edgeprof.runners.llama_worker`` (one llama.cpp model, the plan's requests) and ``python -m
edgeprof.runners.quality_worker`` (reference log-probs, or a variant scored against them). Modules that pull
numpy or httpx (``quality_math``, ``loadgen``, ``llama_server``) are imported by their own names where they
are needed, so that importing this package costs the CLI nothing heavy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from edgeprof.runners.protocol import (
    EXIT_LOAD_FAILED,
    FAULT_ARM_ENV,
    FAULT_ARM_VALUE,
    FAULT_ENV,
    KV_CACHE_TYPES,
    SLOW_FILE_ENV,
)

if TYPE_CHECKING:
    from edgeprof.runners.llama import ChildResult, RunInterrupted, run_child

# The parent's side of a run loads on first use: the plan reads the protocol's names above, and must not
# pay for the process machinery (edgeprof.lazy does this for the agent, which this package may not import).
_LAZY = {"ChildResult": "llama", "RunInterrupted": "llama", "run_child": "llama"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "EXIT_LOAD_FAILED",
    "FAULT_ARM_ENV",
    "FAULT_ARM_VALUE",
    "FAULT_ENV",
    "KV_CACHE_TYPES",
    "SLOW_FILE_ENV",
    "ChildResult",
    "RunInterrupted",
    "run_child",
]
