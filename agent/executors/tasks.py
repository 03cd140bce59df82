"""Task runs: a variant's accuracy on HellaSwag, Winogrande or a multiple-choice set, as llama-perplexity
scores it, in its own child (``edgeprof.runners.tasks.worker``), so a crash or timeout is a stored row.

Every finished batch of tasks is kept in a checkpoint beside the quality caches (``$EDGEPROF_CACHE_DIR`` or
the XDG cache) keyed by the model file, the task file, the subset and the llama.cpp parameters: a run killed
half-way and run again (the sweep resumes it) scores only the tasks left. When the run ends, every task's
outcome goes into ``task_item`` and the summary into ``task_result``; the pairing with the reference on the
same tasks is the report's (agent/report/accuracy/).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any, cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.executors.base import EnergyOver, RunContext, config_label, end_run
from edgeprof.executors.quality import cache_dir, reference_entry
from edgeprof.executors.store import model_identity, store_child
from edgeprof.gguf import sha256_file
from edgeprof.plan import RunSpec
from edgeprof.runners import ChildResult, RunInterrupted, run_child
from edgeprof.runners.tasks import checkpoint
from edgeprof.runners.tasks.intervals import wilson
from edgeprof.storage.models import Measurement, ModelFile, Phase, Run
from edgeprof.storage.task_models import TaskItem, TaskResult


def worker_command() -> list[str]:
    return [sys.executable, "-m", "edgeprof.runners.tasks.worker"]


def checkpoint_key(model_sha256: str, spec: RunSpec) -> dict[str, Any]:
    """What the per-task outcomes depend on: the model file, the task set and its subset, the params."""
    task = spec.workload.task
    assert task is not None
    return {"model_sha256": model_sha256, "task": task.to_json(), "params": spec.params.to_json()}


def checkpoint_path(key: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return cache_dir() / "tasks" / f"tasks-{digest}.jsonl"


def _sha256_of(session: Session, path: str) -> str:
    known = session.scalars(
        select(ModelFile.sha256)
        .where(ModelFile.path == str(Path(path).resolve()))
        .order_by(ModelFile.id.desc())
    ).first()
    return known or sha256_file(path)


def prefill_rate(session: Session, run: Run) -> float | None:
    """The median steady prefill rate (t/s) this model file has shown in this database, None without one:
    what a task run's time is predicted from (its work is prefill: every ending evaluated, none generated)."""
    if run.model_file_id is None:
        return None
    rates = sorted(
        float(r)
        for r in session.scalars(
            select(Measurement.pp_tps)
            .join(Run, Run.id == Measurement.run_id)
            .where(Run.model_file_id == run.model_file_id, Measurement.kind == "steady")
        )
        if r is not None and r > 0
    )
    return rates[(len(rates) - 1) // 2] if rates else None


class TaskRun:
    def __init__(self, session: Session, run: Run, spec: RunSpec, ctx: RunContext) -> None:
        task = spec.workload.task
        assert task is not None
        self.session, self.run, self.spec, self.ctx, self.task = session, run, spec, ctx, task
        self.ref = reference_entry(ctx.plan, spec.model, cast(Any, task))
        self.key = checkpoint_key(spec.model_sha256, spec)
        self.path = checkpoint_path(self.key)
        self.events: dict[str, dict[str, Any]] = {}
        self.pp_tps = prefill_rate(session, run)

    def measure(self) -> Run:
        child = self.child_run()
        store_child(self.session, self.run, child, is_main=True)
        if child.status != "ok" or "tasks" not in self.events:
            self.run.status, self.run.reason = child.status, child.reason or "failed"
            self.run.exit_code, self.run.signal_name = child.exit_code, child.signal_name
            self.run.log_tail = child.log_tail[-2000:] or None
            if child.status == "ok":
                self.run.status = "error"
            return end_run(self.session, self.run)
        items = checkpoint.read(self.path, self.key)
        if len(items) != self.task.n_selected:
            self.run.status = "error"
            self.run.reason = f"{len(items)} of {self.task.n_selected} tasks in the checkpoint {self.path}"
            return end_run(self.session, self.run)
        self.store(items)
        self.run.status, self.run.reason = "ok", None
        end_run(self.session, self.run)
        self.path.unlink(missing_ok=True)  # stored now: the checkpoint has done its work
        return self.run

    def store(self, items: list[dict[str, Any]]) -> None:
        t, done = self.task, self.events["tasks"]
        n = len(items)
        n_correct = sum(1 for it in items if it["correct"])
        low, high = wilson(n_correct, n)
        margins = [float(it["margin"]) for it in items if it.get("margin") is not None]
        for it in items:
            self.session.add(
                TaskItem(
                    run_id=self.run.id,
                    position=int(it["i"]),
                    task_index=int(it["index"]),
                    pred=int(it["pred"]),
                    correct=bool(it["correct"]),
                    margin=it.get("margin"),
                    scores_json=json.dumps(it.get("scores")),
                )
            )
        self.session.add(
            TaskResult(
                run_id=self.run.id,
                task=t.task,
                file_path=t.file,
                file_sha256=t.file_sha256,
                seed=t.seed,
                tasks_asked=t.tasks,
                n_available=t.n_available,
                ctx=t.ctx,
                reference_label=self.ref.label,
                reference_sha256=_sha256_of(self.session, self.ref.path),
                is_reference=self.ref.label == self.spec.model.label,
                n_tasks=n,
                n_correct=n_correct,
                accuracy_pct=100.0 * n_correct / n,
                accuracy_low_pct=100.0 * low,
                accuracy_high_pct=100.0 * high,
                chance_pct=100.0 * t.chance,
                n_resumed=int(done.get("n_resumed", 0)),
                n_tokens=done.get("n_tokens"),
                min_margin=min(margins) if margins else None,
                # the tasks this run scored itself (not those resumed from a killed one): what its energy paid
                n_correct_measured=sum(1 for it in items[int(done.get("n_resumed", 0)) :] if it["correct"]),
            )
        )

    def relay(self, event: dict[str, Any]) -> None:
        kind = str(event.get("event"))
        if kind in ("task_plan", "tasks"):
            self.events[kind] = event
        if kind == "task_plan":
            resumed = f", {event['n_done']} kept from a run that stopped" if event["n_done"] else ""
            n_tokens = int(event["n_tokens"])
            eta = (
                f", ~{n_tokens / self.pp_tps:.0f} s at this model's prefill rate ({self.pp_tps:.0f} t/s)"
                if self.pp_tps
                else " (no prefill rate of this model measured yet: no time predicted)"
            )
            self.ctx.tell(
                f"{self.task.task}: {event['n_tasks']} tasks{resumed}; {n_tokens} tokens to evaluate{eta}"
            )
        if self.ctx.on_event is not None:
            self.ctx.on_event(event)

    def child_run(self) -> ChildResult:
        job: dict[str, Any] = {
            "mode": "tasks",
            "model_path": self.spec.model.path,
            "params": self.spec.params.to_json(),
            "task": self.task.to_json(),
            "checkpoint": str(self.path),
            "checkpoint_key": self.key,
            "model_identity": model_identity(self.session, self.run),
        }
        self.session.commit()  # no write transaction open while the child runs (the lease heartbeat writes)
        try:
            return run_child(
                job,
                self.spec.timeout_s,
                on_event=self.relay,
                env=self.ctx.env,
                heartbeat=self.ctx.heartbeat,
                command=worker_command(),
            )
        except RunInterrupted as stop:
            store_child(self.session, self.run, stop.result, is_main=True)
            self.run.status, self.run.reason = "interrupted", stop.result.reason
            end_run(self.session, self.run)
            raise


class TaskExecutor:
    runner = "llama-cpp"  # its children are llama-cpp-python workers (edgeprof.runners.tasks.worker)
    workload_kind = "task"

    def execute(self, session: Session, run: Run, spec: RunSpec, ctx: RunContext) -> Run:
        run.t_start_mono = time.monotonic()
        return TaskRun(session, run, spec, ctx).measure()

    def label(self, spec: RunSpec) -> str:
        return config_label(spec)

    def describe(self, session: Session, run: Run) -> str:
        tr = task_of_run(session, run.id)
        if tr is None:
            return "ok"
        return (
            f"ok  {tr.task} {tr.accuracy_pct:.2f}% "
            f"(95 % CI {tr.accuracy_low_pct:.1f}-{tr.accuracy_high_pct:.1f}, "
            f"chance {tr.chance_pct:.0f}%)  n={tr.n_tasks}"
        )

    def attach_energy(self, session: Session, run: Run, energy: EnergyOver) -> None:
        """Correct answers per kJ over the scoring this run did (its ``task_score`` phases; a resumed run's
        earlier tasks were paid for by the run that scored them, and are not counted)."""
        tr = task_of_run(session, run.id)
        if tr is None:
            return
        phases = session.scalars(
            select(Phase).where(Phase.run_id == run.id, Phase.name == "task_score")
        ).all()
        if not phases:
            return
        # one span from the first batch to the last: the scoring's own time, tokenizing between included
        total = energy(min(p.t_start_mono for p in phases), max(p.t_end_mono for p in phases))
        if total is None:
            return
        tr.energy_j = total
        if total > 0 and tr.n_correct_measured is not None:
            tr.correct_per_kj = tr.n_correct_measured / (total / 1000.0)


def task_of_run(session: Session, run_id: int) -> TaskResult | None:
    return session.scalars(
        select(TaskResult).where(TaskResult.run_id == run_id).order_by(TaskResult.id.desc())
    ).first()
