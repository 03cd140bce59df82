"""Every way of running a config, one line each, looked up by the runner name and the workload kind.

Adding a runner: its child-side module under ``runners/`` and its line in ``edgeprof.runners.registry`` (the
name, what its numbers mean, whether it takes the serving axes: what plan validation reads), then one class
with the ``Executor`` hooks and one line below.
"""

from __future__ import annotations

import json

from edgeprof.executors.base import Executor
from edgeprof.executors.inprocess import InProcessExecutor
from edgeprof.executors.openai_server import OpenAIExecutor
from edgeprof.executors.quality import QualityExecutor
from edgeprof.executors.serving import ServingExecutor
from edgeprof.executors.serving_soak import OpenAISoakExecutor, ServingSoakExecutor
from edgeprof.executors.soak import SoakExecutor
from edgeprof.executors.tasks import TaskExecutor
from edgeprof.plan import RunSpec
from edgeprof.runners.registry import DEFAULT_RUNNER
from edgeprof.storage.models import Run

GENERATION = "generation"  # Workload.kind of every workload that is not a quality one

EXECUTORS: tuple[Executor, ...] = (
    InProcessExecutor(),  # llama-cpp-python in a worker child, a child per cold start
    ServingExecutor(),  # llama-server on loopback under a load generator, a server per config
    QualityExecutor(),  # KLD / same top / PPL against a reference, in quality worker children
    SoakExecutor(),  # one request back to back for a duration, in one worker child, stored per window
    OpenAIExecutor(),  # a server edgeprof did not start, at [serving] target, under the same load generator
    ServingSoakExecutor(),  # a serving level held for a soak's duration, cut into its windows
    OpenAISoakExecutor(),  # the same on a server edgeprof did not start
    TaskExecutor(),  # task accuracy (HellaSwag, Winogrande, multiple choice) in task worker children
)

_BY_KEY: dict[tuple[str, str], Executor] = {(e.runner, e.workload_kind): e for e in EXECUTORS}


def executor_for(runner: str | None, workload_kind: str | None = None) -> Executor:
    """The executor of a runner name (None: the default one) and a workload kind (None: generation)."""
    key = (runner or DEFAULT_RUNNER, workload_kind or GENERATION)
    try:
        return _BY_KEY[key]
    except KeyError:
        raise LookupError(f"no executor for runner {key[0]!r} with a {key[1]} workload") from None


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
