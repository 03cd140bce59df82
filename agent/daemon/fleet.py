"""The agent's fleet mode (``edgeprof agent --fleet URL``): jobs come from the central PostgreSQL queue
(agent/fleet/queue.py) instead of a spool folder.

At start the board registers what it is (device facts, labels), releases what its previous agent left
running (an ``--each`` job is taken again at once and its sweep resumes), and runs its health plan. Then:
claim a job under a lease, find its models by sha256, run its sweep into the local database while a thread
heartbeats the lease with the sweep's progress, push the sweep and mark the job done under the job's row
lock. A failed attempt goes back to the queue (or fails the job after its attempts) and is followed by a
health check. A board whose health check fails claims nothing until a later check passes.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import logging
import threading
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from edgeprof.daemon.agent import Agent, AgentConfig
from edgeprof.device import collect_device_facts
from edgeprof.fleet import push_sweeps, with_connect_timeout
from edgeprof.fleet.boards import (
    health_due,
    health_history,
    health_plan_for,
    record_health,
    set_unchecked,
)
from edgeprof.fleet.health import HISTORY_WINDOW, judge
from edgeprof.fleet.jobfiles import JobFileError, ModelFinder, board_plan_text
from edgeprof.fleet.queue import (
    FleetConfig,
    Job,
    claim,
    fail_attempt,
    finish,
    heartbeat,
    register_board,
    release_own,
    set_activity,
)
from edgeprof.fleet.selector import selector_facts
from edgeprof.gguf import probe_bandwidth
from edgeprof.plan import PlanError, parse_plan
from edgeprof.run_states import FINISHED_STATUSES
from edgeprof.stats import median
from edgeprof.storage.db import open_engine
from edgeprof.storage.models import Measurement, Run, Sweep

log = logging.getLogger("edgeprof.agent")

# A failed health check is tried again after this long at most (its plan's schedule when shorter).
HEALTH_RETRY_S = 600.0


def board_facts(root: Path) -> dict[str, Any]:
    """The device facts a selector names: the fingerprint's facts, the module (the device tree's first
    ``compatible`` string) and the llama.cpp build (llama-cpp-python's version)."""
    facts = collect_device_facts(root)
    try:
        compatible = (root / "proc/device-tree/compatible").read_bytes().split(b"\0")[0].decode()
    except OSError:
        compatible = ""
    facts["module"] = compatible or None
    try:
        build: str | None = importlib.metadata.version("llama_cpp_python")
    except importlib.metadata.PackageNotFoundError:
        build = None
    return selector_facts(facts, facts["hostname"], build)


class FleetAgent(Agent):
    def __init__(self, engine: Engine, db_path: Path | None, config: AgentConfig) -> None:
        super().__init__(engine, db_path, config)
        assert config.fleet is not None
        self.fleet: FleetConfig = config.fleet
        self.central = open_engine(with_connect_timeout(self.fleet.url))
        models_dir = self.fleet.models_dir or (db_path.parent if db_path else Path.cwd()) / "fleet-models"
        self.finder = ModelFinder(models_dir)
        self.board_id = 0
        self.board_name = ""
        self._job: Job | None = None
        self._job_lost = threading.Event()
        self._plan_hash: str | None = None
        self._attempt_start: tuple[float, int] | None = None  # (monotonic, configs done) at claim

    # -- joining ----------------------------------------------------------------------------------------
    def _join(self) -> None:
        facts = board_facts(self.fleet.device_root)
        self.board_name = facts["name"]
        self.board_id = register_board(
            self.central, self.board_name, facts, self.fleet.labels, self.fleet.lease_s / 3
        )
        n = release_own(self.central, self.board_id, "its agent restarted mid-job")
        log.info(
            "fleet: board %r registered (%s)%s",
            self.board_name,
            ", ".join(f"{k}={v}" for k, v in facts.items() if v is not None and k != "fingerprint"),
            f"; {n} job(s) it was running put back" if n else "",
        )
        threading.Thread(target=self._heartbeat_loop, name="edgeprof-fleet-beat", daemon=True).start()
        self._check_health("registered")

    def _heartbeat_loop(self) -> None:
        period = max(0.2, self.fleet.lease_s / 3)
        while not self.stop_requested.wait(period):
            job = self._job
            try:
                progress = self._progress() if job is not None else None
                held = heartbeat(self.central, self.board_id, self.fleet.lease_s, job, progress)
            except Exception as exc:  # noqa: BLE001 - a central DB that blips: the lease says how long it may
                log.warning("fleet heartbeat failed: %s", str(exc).splitlines()[0] if str(exc) else exc)
                continue
            if job is not None and not held and self._job is job:
                log.warning(
                    "fleet job %d was cancelled or lost its lease; stopping after this config", job.id
                )
                self._job_lost.set()

    def _progress(self) -> dict[str, Any] | None:
        """The current job's sweep: its uid, configs finished of all, and the ETA at this attempt's pace."""
        if self._plan_hash is None:
            return None
        with Session(self.engine) as session:
            sweep = session.scalars(
                select(Sweep).where(Sweep.plan_hash == self._plan_hash).order_by(Sweep.id.desc())
            ).first()
            if sweep is None:
                return None
            done = int(
                session.scalar(
                    select(func.count())
                    .select_from(Run)
                    .where(Run.sweep_id == sweep.id, Run.status.in_(FINISHED_STATUSES))
                )
                or 0
            )
            total, uid = sweep.n_specs, sweep.uid
        if self._attempt_start is None:
            self._attempt_start = (time.monotonic(), done)
        started, done_at_start = self._attempt_start
        eta = None
        if done > done_at_start and total:
            eta = (time.monotonic() - started) / (done - done_at_start) * max(total - done, 0)
        return {"done": done, "total": total, "eta_s": eta, "sweep_uid": uid}

    def should_start(self) -> str | None:
        if self._job_lost.is_set():
            return "fleet job cancelled or its lease lost"
        return super().should_start()

    # -- the loop ---------------------------------------------------------------------------------------
    def _loop(self) -> int:
        self._join()
        while not self.stop_requested.is_set():
            self.beat()
            reason = self.should_start()
            if reason and reason.startswith("time window"):
                self.set_state("stopped", reason)
                return 0
            if reason:
                self.set_state("paused", reason)
                self._idle()
                continue
            try:
                if not self._step():
                    return self.exit_code
            except SQLAlchemyError as exc:  # the central DB went away: one line, then try again
                # a job whose result could not be recorded is let go: its lease runs out and it is reaped
                # (an --each job comes back here, its finished sweep pushed then)
                self._job, self._plan_hash, self._attempt_start = None, None, None
                self._job_lost.clear()
                self.set_state("waiting", f"central database: {str(exc).strip().splitlines()[0][:200]}")
                self._idle()
        return self.exit_code

    def _step(self) -> bool:
        """A health check when one is due, else one claimed job; False when ``--once`` finds nothing to do."""
        if health_due(self.central, self.board_id):
            self._check_health("scheduled")
            return True
        job = claim(self.central, self.board_id, self.fleet.lease_s)
        if job is None:
            if self.config.once:
                self.set_state("stopped", "no fleet job for this board")
                return False
            self.set_state("idle", "no fleet job for this board")
            self._idle()
            return True
        self._run_job(job)
        return True

    def _run_job(self, job: Job) -> None:
        self._job, self._plan_hash, self._attempt_start = job, None, None
        self._job_lost.clear()
        self.set_state("running", f"fleet job {job.id}: plan {job.plan_name!r}, attempt {job.attempts}")
        try:
            plan = self._board_plan(
                job.plan_text,
                job.models,
                job.model_source,
                f"edgeprof fleet job {job.id}: {job.plan_name} (plan sha256 {job.plan_sha256[:12]})",
            )
        except (JobFileError, PlanError) as exc:  # the same on every try: failed now, with where it looked
            why = "; ".join(exc.problems) if isinstance(exc, PlanError) else str(exc)
            log.error("fleet job %d failed on this board: %s", job.id, why)
            fail_attempt(self.central, job, self.board_name, why, final=True)
            self._drop_job()
            return
        self._plan_hash = plan.hash
        try:
            outcome = self._sweep_plan(plan)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            log.exception("fleet job %d: the sweep failed", job.id)
            self._attempt_failed(job, f"{type(exc).__name__}: {exc}")
            return
        self._after_sweep(job, outcome)

    def _after_sweep(self, job: Job, outcome: Any) -> None:
        if outcome.interrupted:
            raise KeyboardInterrupt
        if self._job_lost.is_set():
            self._drop_job()
            return
        if outcome.paused:  # the time window closed or the disk is full: back to the queue, said why
            self._attempt_failed(job, f"paused: {outcome.paused}", health=False)
            return
        done = finish(self.central, job, lambda _conn: self._push(outcome.sweep_id))
        summary = ", ".join(f"{n} {s}" for s, n in sorted(outcome.counts.items())) or "nothing new"
        log.info(
            "fleet job %d %s: sweep %d, %s",
            job.id,
            "done" if done else "lost its lease",
            outcome.sweep_id,
            summary,
        )
        self.set_state("idle", f"fleet job {job.id} finished: {summary}")
        self._drop_job()

    def _attempt_failed(self, job: Job, why: str, health: bool = True) -> None:
        state = fail_attempt(self.central, job, self.board_name, why)
        log.warning("fleet job %d attempt %d failed (%s): %s", job.id, job.attempts, state or "not ours", why)
        self._drop_job()
        if health:
            self._check_health("after a failed job")

    def _drop_job(self) -> None:
        self._job, self._plan_hash, self._attempt_start = None, None, None
        self._job_lost.clear()
        set_activity(self.central, self.board_id, "idle")

    def _push(self, sweep_id: int) -> str:
        push_sweeps(self.engine, self.central, [sweep_id])
        with Session(self.engine) as session:
            sweep = session.get(Sweep, sweep_id)
            assert sweep is not None
            return sweep.uid

    def _board_plan(self, text: str, models: list[dict[str, Any]], source: str | None, header: str) -> Any:
        local = {m["given"]: self.finder.find(m, source) for m in models}
        board_text = board_plan_text(text, header, local)
        return parse_plan(board_text, source=f"{header.split(':')[0]}.toml", base=self.finder.models_dir)

    def _sweep_plan(self, plan: Any, new_sweep: bool = False) -> Any:
        from edgeprof.sweep import run_plan

        return run_plan(
            self.engine,
            plan,
            telemetry=self._telemetry_factory(plan),
            heartbeat=self.beat,
            should_start=self.should_start,
            device_root=self.fleet.device_root,
            bandwidth_probe=probe_bandwidth,
            new_sweep=new_sweep,
        )

    # -- health -----------------------------------------------------------------------------------------
    def _check_health(self, why: str) -> None:
        hp = health_plan_for(self.central, self.board_id)
        if hp is None:
            set_unchecked(self.central, self.board_id)
            return
        set_activity(self.central, self.board_id, "health")
        self.set_state("running", f"fleet health check ({why}): plan {hp.plan_name!r}")
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        tg: float | None = None
        errors: list[str] = []
        sweep_uid: str | None = None
        try:
            plan = self._board_plan(
                hp.plan_text,
                hp.models,
                hp.model_source,
                f"edgeprof fleet health check {stamp}: {hp.plan_name}",
            )
            outcome = self._sweep_plan(plan, new_sweep=True)
            if outcome.interrupted:
                raise KeyboardInterrupt
            tg, errors, sweep_uid = self._health_result(outcome.sweep_id)
        except (JobFileError, PlanError) as exc:
            errors = ["; ".join(exc.problems) if isinstance(exc, PlanError) else str(exc)]
        history = health_history(self.central, self.board_id, hp.plan_sha256, HISTORY_WINDOW)
        verdict = judge(tg, errors, history)
        retry = hp.every_s if verdict.passed else min(hp.every_s, HEALTH_RETRY_S)
        record_health(
            self.central, self.board_id, hp.plan_sha256, verdict.passed, tg, verdict.reason, retry, sweep_uid
        )
        log.log(
            logging.INFO if verdict.passed else logging.WARNING,
            "fleet health check (%s) %s: %s",
            why,
            "passed" if verdict.passed else "FAILED",
            verdict.reason,
        )
        set_activity(self.central, self.board_id, "idle")

    def _health_result(self, sweep_id: int) -> tuple[float | None, list[str], str]:
        """(median steady tg_tps of the health sweep, one line per run not ok, the sweep's uid)."""
        with Session(self.engine) as session:
            sweep = session.get(Sweep, sweep_id)
            assert sweep is not None
            runs = session.scalars(select(Run).where(Run.sweep_id == sweep_id)).all()
            errors = [
                f"{r.model_label} ctx {r.n_ctx}: {r.status}{' (' + r.reason + ')' if r.reason else ''}"
                for r in runs
                if r.status != "ok"
            ]
            tgs = session.scalars(
                select(Measurement.tg_tps)
                .join(Run, Run.id == Measurement.run_id)
                .where(
                    Run.sweep_id == sweep_id,
                    Run.status == "ok",
                    Measurement.kind == "steady",
                    Measurement.tg_tps.is_not(None),
                )
            ).all()
            return median([float(t) for t in tgs if t is not None]), errors, sweep.uid

    def _finish_state(self) -> None:
        super()._finish_state()
        if self.board_id:
            try:  # a job stopped by SIGTERM goes back now, not after its lease (an --each one waits for us)
                release_own(self.central, self.board_id, "its agent was stopped mid-job")
                set_activity(self.central, self.board_id, "stopped", stopped=True)
            except Exception as exc:  # noqa: BLE001 - shutting down; the heartbeat's age says the rest
                log.warning("could not record the board's stop centrally: %s", exc)
        self.central.dispose()
