"""Executors: one class per way of running a config (in-process, llama-server, a foreign OpenAI-compatible
server, quality, soak), each with the hooks the sweep calls (execute, label, describe, attach_energy),
registered in ``registry``.

The sweep imports this package; nothing here imports the sweep.
"""

from edgeprof.executors.base import EnergyOver, Executor, RunContext, config_label, end_run
from edgeprof.executors.inprocess import InProcessExecutor
from edgeprof.executors.openai_server import OpenAIExecutor
from edgeprof.executors.quality import QualityExecutor, group_of, quality_of_run, reference_entry
from edgeprof.executors.registry import (
    EXECUTORS,
    executor_for,
    executor_of_run,
    executor_of_spec,
    workload_kind_of,
)
from edgeprof.executors.serving import ServingExecutor, kv_budget
from edgeprof.executors.serving_stats import counter_deltas, distribution, meets_slo, summarize_level
from edgeprof.executors.soak import (
    SoakExecutor,
    WindowSpeed,
    attach_soak_telemetry,
    speeds_from_events,
    store_soak_windows,
    stored_windows,
)
from edgeprof.executors.store import get_or_create_build, store_child

__all__ = [
    "EXECUTORS",
    "EnergyOver",
    "Executor",
    "InProcessExecutor",
    "OpenAIExecutor",
    "QualityExecutor",
    "RunContext",
    "ServingExecutor",
    "SoakExecutor",
    "WindowSpeed",
    "attach_soak_telemetry",
    "config_label",
    "counter_deltas",
    "distribution",
    "end_run",
    "executor_for",
    "executor_of_run",
    "executor_of_spec",
    "get_or_create_build",
    "group_of",
    "kv_budget",
    "meets_slo",
    "quality_of_run",
    "reference_entry",
    "speeds_from_events",
    "store_child",
    "store_soak_windows",
    "stored_windows",
    "summarize_level",
    "workload_kind_of",
]
