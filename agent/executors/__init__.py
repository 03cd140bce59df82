"""Executors: one class per way of running a config (in-process, llama-server, a foreign OpenAI-compatible
server, quality, soak), each with the hooks the sweep calls (execute, label, describe, attach_energy),
registered in ``registry``.

The sweep imports this package; nothing here imports the sweep.

The names below are the ones callers use; each is imported from its module on first use
(``edgeprof.lazy``), so importing the package alone costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgeprof.lazy import lazy_exports

if TYPE_CHECKING:
    from edgeprof.executors.base import EnergyOver, Executor, RunContext
    from edgeprof.executors.inprocess import InProcessExecutor
    from edgeprof.executors.quality import QualityExecutor, group_of, reference_entry
    from edgeprof.executors.registry import (
        EXECUTOR_HOMES,
        all_executors,
        executor_for,
        executor_of_run,
        executor_of_spec,
        workload_kind_of,
    )
    from edgeprof.executors.serving import ServingExecutor, kv_budget
    from edgeprof.executors.serving_stats import counter_deltas, meets_slo, summarize_level
    from edgeprof.executors.store import store_child

# module of this package -> the public names it defines, imported on first use
_HOMES: dict[str, tuple[str, ...]] = {
    "base": ("EnergyOver", "Executor", "RunContext"),
    "inprocess": ("InProcessExecutor",),
    "quality": ("QualityExecutor", "group_of", "reference_entry"),
    "registry": (
        "EXECUTOR_HOMES",
        "all_executors",
        "executor_for",
        "executor_of_run",
        "executor_of_spec",
        "workload_kind_of",
    ),
    "serving": ("ServingExecutor", "kv_budget"),
    "serving_stats": ("counter_deltas", "meets_slo", "summarize_level"),
    "store": ("store_child",),
}

__all__ = [
    "EXECUTOR_HOMES",
    "EnergyOver",
    "Executor",
    "InProcessExecutor",
    "QualityExecutor",
    "RunContext",
    "ServingExecutor",
    "all_executors",
    "counter_deltas",
    "executor_for",
    "executor_of_run",
    "executor_of_spec",
    "group_of",
    "kv_budget",
    "meets_slo",
    "reference_entry",
    "store_child",
    "summarize_level",
    "workload_kind_of",
]

__getattr__ = lazy_exports(__name__, _HOMES)
