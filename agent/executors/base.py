"""What every way of running a config provides: the ``Executor`` protocol the sweep calls, and the context a
run is executed in.

The sweep never asks which runner or workload kind a config has: it looks the executor up
(``edgeprof.executors.registry``) and calls its hooks — ``execute`` (run the config, store every row it
produced), ``label`` (the config's name on the progress line), ``describe`` (the outcome of a finished run on
that line) and ``attach_energy`` (telemetry's per-executor energy figures once the run's samples are in).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.orm import Session

from edgeprof.plan import Plan, RunSpec
from edgeprof.run_states import utcnow
from edgeprof.storage.models import Run

# Joules the device drew between two monotonic times (None where no power source measured them).
EnergyOver = Callable[[float, float], float | None]


@dataclass(frozen=True)
class RunContext:
    """What the sweep lends an executor for one run: the plan, and the callbacks a child's life reports to."""

    plan: Plan
    on_event: Callable[[dict[str, Any]], None] | None = None  # every child event (progress, telemetry)
    env: dict[str, str] | None = None  # the children's environment (None: the agent's own)
    heartbeat: Callable[[], None] | None = None  # beats the sweep's lease while a child runs
    between_reps: Callable[[dict[str, Any]], float] | None = None  # a cooldown before each steady rep
    say: Callable[[str], None] | None = None  # one line on the progress stream

    def tell(self, line: str) -> None:
        if self.say is not None:
            self.say(line)


class Executor(Protocol):
    """One way of running a config, keyed by the plan's runner name and the workload's kind."""

    runner: str  # a name of edgeprof.runners.registry.RUNNERS
    workload_kind: str  # a Workload.kind: "generation", "soak" or "quality"

    def execute(self, session: Session, run: Run, spec: RunSpec, ctx: RunContext) -> Run:
        """Run ``spec`` and store what came back on ``run``; a failed run is a stored status, never an
        exception (a stop by the user is stored ``interrupted`` and re-raised as KeyboardInterrupt)."""
        ...

    def label(self, spec: RunSpec) -> str:
        """The config's name on the progress line."""
        ...

    def describe(self, session: Session, run: Run) -> str:
        """The progress line's summary of a run that ended ``ok``."""
        ...

    def attach_energy(self, session: Session, run: Run, energy: EnergyOver) -> None:
        """Store the executor's own energy figures (telemetry's after-run step; the per-rep ones of the
        in-process measurements are telemetry's own)."""
        ...


def config_label(spec: RunSpec) -> str:
    """The knobs every config has, as the progress line names them."""
    p = spec.params
    return (
        f"{spec.model.label} ctx={p.n_ctx} ngl={p.n_gpu_layers} t={p.n_threads} b={p.n_batch} "
        f"fa={p.flash_attn}{f' depth={p.depth}' if p.depth else ''} wl={spec.workload.name}"
    )


def end_run(session: Session, run: Run) -> Run:
    """Stamp the run's end on both clocks and commit it."""
    run.ended_at, run.t_end_mono = utcnow(), time.monotonic()
    session.commit()
    return run
