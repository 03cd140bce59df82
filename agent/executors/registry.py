"""Every way of running a config, one line each, looked up by the runner name and the workload kind.

Each line names the module and class of its executor, imported on first use: a ``run`` imports only the
executors its plan uses (an in-process sweep never imports the serving ones, nor httpx behind them).

Adding a runner: its child-side module under ``runners/`` and its line in ``edgeprof.runners.registry`` (the
name, what its numbers mean and its kind: in process, a server edgeprof starts, or one it did not start —
what plan validation, expansion, the sweep and the report read), then one class with the ``Executor`` hooks
in a module of this package and its line below.
"""

from __future__ import annotations

import importlib
import json
from typing import TYPE_CHECKING

from edgeprof.runners.registry import DEFAULT_RUNNER
from edgeprof.storage.models import Run

if TYPE_CHECKING:
    from edgeprof.executors.base import Executor
    from edgeprof.plan import RunSpec

GENERATION = "generation"  # Workload.kind of every workload that is not a quality one

# (runner, workload kind) -> (module of this package, class)
EXECUTOR_HOMES: dict[tuple[str, str], tuple[str, str]] = {
    # llama-cpp-python in a worker child, a child per cold start
    ("llama-cpp", GENERATION): ("inprocess", "InProcessExecutor"),
    # llama-server on loopback under a load generator, a server per config
    ("llama-server", GENERATION): ("serving", "ServingExecutor"),
    # KLD / same top / PPL against a reference, in quality worker children
    ("llama-cpp", "quality"): ("quality", "QualityExecutor"),
    # one request back to back for a duration, in one worker child, stored per window
    ("llama-cpp", "soak"): ("soak", "SoakExecutor"),
    # a server edgeprof did not start, at [serving] target, under the same load generator
    ("openai", GENERATION): ("openai_server", "OpenAIExecutor"),
    # a serving level held for a soak's duration, cut into its windows
    ("llama-server", "soak"): ("serving_soak", "ServingSoakExecutor"),
    # the same on a server edgeprof did not start
    ("openai", "soak"): ("serving_soak", "OpenAISoakExecutor"),
    # task accuracy (HellaSwag, Winogrande, multiple choice) in task worker children
    ("llama-cpp", "task"): ("tasks", "TaskExecutor"),
}

_LOADED: dict[tuple[str, str], Executor] = {}


def _load(key: tuple[str, str]) -> Executor:
    if key not in _LOADED:
        module, name = EXECUTOR_HOMES[key]
        _LOADED[key] = getattr(importlib.import_module(f"{__package__}.{module}"), name)()
    return _LOADED[key]


def all_executors() -> tuple[Executor, ...]:
    """Every registered executor (imports them all: for checks and listings, never on a sweep's path)."""
    return tuple(_load(key) for key in EXECUTOR_HOMES)


def executor_for(runner: str | None, workload_kind: str | None = None) -> Executor:
    """The executor of a runner name (None: the default one) and a workload kind (None: generation)."""
    key = (runner or DEFAULT_RUNNER, workload_kind or GENERATION)
    if key not in EXECUTOR_HOMES:
        raise LookupError(f"no executor for runner {key[0]!r} with a {key[1]} workload")
    return _load(key)


def executor_of_spec(spec: RunSpec) -> Executor:
    return executor_for(spec.params.runner, spec.workload.kind)


def workload_kind_of(run: Run) -> str:
    """The kind of a stored run's workload (its ``workload_json`` names it only when it is not generation)."""
    try:
        stored = json.loads(run.workload_json or "{}")
    except ValueError:
        return GENERATION
    kind = stored.get("kind") if isinstance(stored, dict) else None
    return kind if isinstance(kind, str) else GENERATION


def executor_of_run(run: Run) -> Executor:
    return executor_for(run.runner, workload_kind_of(run))
