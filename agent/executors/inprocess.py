"""The in-process runner (llama-cpp-python in a worker child, ``edgeprof.runners.llama_worker``): a child per
cold start — the first runs cold + warm-up + steady reps, the others one more cold start each — and, where
the sweep interleaves rival configs, a child per later block of steady reps."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy.orm import Session

from edgeprof.executors.base import EnergyOver, RunContext, config_label, end_run
from edgeprof.executors.store import model_identity, store_child
from edgeprof.gguf import drop_page_cache
from edgeprof.plan import RunSpec
from edgeprof.runners import ChildResult, RunInterrupted, run_child
from edgeprof.stats import median
from edgeprof.storage.models import Run


class InProcessExecutor:
    runner = "llama-cpp"
    workload_kind = "generation"

    def execute(self, session: Session, run: Run, spec: RunSpec, ctx: RunContext) -> Run:
        """Run a spec's children (first: cold + warm-up + steady; then extra cold starts) and store them."""
        run.t_start_mono = time.monotonic()
        ended: list[ChildResult] = []
        for cold_rep in range(spec.repeat.cold):
            child = self.cold_start(session, run, spec, ctx, cold_rep)
            ended.append(child)
            # Stored for good before the next cold start: its heartbeats write the lease from another
            # connection, which an open write transaction here would make wait out SQLite's busy timeout.
            session.commit()
            if child.status != "ok":
                break  # a config that failed once is not hammered again; the failure is what we report
        failed = next((c for c in ended if c.status != "ok"), ended[0] if ended else None)
        if failed is None:
            run.status, run.reason, run.exit_code, run.signal_name = "error", "no child ran", None, None
            run.log_tail = None
        else:
            run.status, run.reason = failed.status, failed.reason
            run.exit_code, run.signal_name = failed.exit_code, failed.signal_name
            run.log_tail = failed.log_tail[-2000:] if failed.status != "ok" and failed.log_tail else None
        return end_run(session, run)

    def cold_start(
        self, session: Session, run: Run, spec: RunSpec, ctx: RunContext, cold_rep: int
    ) -> ChildResult:
        """One child from a cold start (the page cache dropped when the plan says so), stored on ``run``."""
        if spec.cold_cache == "drop":
            run.page_cache = "dropped" if drop_page_cache(spec.model.path) else "drop_failed"
        else:
            run.page_cache = "kept"
        job = spec.job(cold_only=cold_rep > 0, cold_rep=cold_rep)
        return self._child(session, run, spec, ctx, job, is_main=cold_rep == 0)

    def run_block(
        self, session: Session, run: Run, spec: RunSpec, ctx: RunContext, block: dict[str, int]
    ) -> ChildResult:
        """A later block of the config's steady reps in a fresh child of its own (its warm-up first, no cold
        rep), stored on ``run``; a failure is the run's status from then on."""
        child = self._child(session, run, spec, ctx, spec.job(block=block), is_main=False)
        if child.status != "ok":
            run.status, run.reason = child.status, child.reason
            run.exit_code, run.signal_name = child.exit_code, child.signal_name
            run.log_tail = child.log_tail[-2000:] if child.log_tail else None
        session.commit()
        return child

    def _child(
        self, session: Session, run: Run, spec: RunSpec, ctx: RunContext, job: dict[str, Any], is_main: bool
    ) -> ChildResult:
        job["model_identity"] = model_identity(session, run)  # the child loads the file that was hashed
        try:
            child = run_child(
                job,
                spec.timeout_s,
                on_event=ctx.on_event,
                env=ctx.env,
                heartbeat=ctx.heartbeat,
                between_reps=ctx.between_reps,
            )
        except RunInterrupted as stop:
            store_child(session, run, stop.result, is_main=is_main)
            run.status, run.reason = "interrupted", stop.result.reason
            run.log_tail = stop.result.log_tail[-2000:] or None
            end_run(session, run)
            raise
        store_child(session, run, child, is_main=is_main)
        return child

    def label(self, spec: RunSpec) -> str:
        return config_label(spec)

    def describe(self, session: Session, run: Run) -> str:
        """The steady reps' median decode and prefill speeds."""
        steady = [m for m in run.measurements if m.kind == "steady"]
        tg = median([m.tg_tps for m in steady if m.tg_tps is not None])
        pp = median([m.pp_tps for m in steady if m.pp_tps is not None])
        parts = ["ok"]
        if tg is not None:
            parts.append(f"tg {tg:.1f} t/s")
        if pp is not None:
            parts.append(f"pp {pp:.1f} t/s")
        return "  ".join(parts)

    def attach_energy(self, session: Session, run: Run, energy: EnergyOver) -> None:
        """Nothing of its own: the per-rep energy of its measurements is telemetry's (it needs the phases)."""
