"""Report rows: one row per config of a sweep, every field of the JSON contract present
(``edgeprof.report.columns.REPORT_FIELDS``), ``None`` where a value was not measured.

Built as named steps: the sweep's runs (the last attempt of each spec speaks), each run's own row, the
reference and ratios, the stored verdicts, quality, fit and recommendation, the serving levels apart, and
where each row was measured.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.report.accuracy import attach_tasks
from edgeprof.report.columns import FIELD_NAMES
from edgeprof.report.fit import attach_fit
from edgeprof.report.fleet import attach_fleet
from edgeprof.report.quality import attach_quality
from edgeprof.report.reference import attach_reference
from edgeprof.report.run_row import base_row, output_tokens
from edgeprof.report.serving import is_serving, serving_rows
from edgeprof.runners.registry import DEFAULT_RUNNER
from edgeprof.storage.models import Run, Sweep
from edgeprof.verdicts import attach_verdicts


class ReportError(Exception):
    pass


def latest_sweep_id(session: Session) -> int | None:
    return session.scalar(select(Sweep.id).order_by(Sweep.id.desc()).limit(1))


@dataclass
class SweepRuns:
    """The last attempt of each spec of a sweep, in plan order, split by scenario."""

    inprocess: list[Run]
    serving: list[Run]
    attempts: dict[str, int]


def sweep_runs(session: Session, sweep_id: int | None) -> tuple[int, SweepRuns]:
    """The sweep (default: the latest) and its runs; ``ReportError`` when there is none."""
    if sweep_id is None:
        sweep_id = latest_sweep_id(session)
        if sweep_id is None:
            raise ReportError(
                "no sweep in this database yet; run `edgeprof run PLAN.toml` or `edgeprof demo`"
            )
    if session.get(Sweep, sweep_id) is None:
        raise ReportError(f"no sweep with id {sweep_id} in this database")
    latest: dict[str, Run] = {}
    attempts: dict[str, int] = {}
    for run in session.scalars(select(Run).where(Run.sweep_id == sweep_id).order_by(Run.id)):
        latest[run.spec_id] = run  # a spec redone after an interruption: the last attempt speaks
        attempts[run.spec_id] = attempts.get(run.spec_id, 0) + 1
    ordered = sorted(latest.values(), key=lambda r: r.seq)
    # serving levels are another scenario: they never enter the references or ratios of the in-process rows
    serving = [r for r in ordered if is_serving(r)]
    return sweep_id, SweepRuns([r for r in ordered if not is_serving(r)], serving, attempts)


def _inprocess_row(run: Run, attempts: dict[str, int]) -> dict[str, Any]:
    row = base_row(run, run.model_file)
    row["attempts"] = attempts[run.spec_id]
    effective = json.loads(run.effective_json) if run.effective_json else {}
    row["_gpu_offload_supported"] = effective.get("gpu_offload_supported")  # for notes, not the schema
    row["flash_attn_effective"] = effective.get("flash_attn_effective")
    row["runner"] = run.runner or DEFAULT_RUNNER  # stored before the runner axis: the in-process one
    return row


def _judge(session: Session, rows: list[dict[str, Any]]) -> None:
    """The stored verdicts, quality figures, memory and bandwidth, and the recommendation."""
    attach_verdicts(session, rows)
    attach_quality(session, rows)
    attach_tasks(session, rows)
    attach_fit(session, rows)  # after the quality fields: the recommendation weighs them


def build_rows(
    session: Session, sweep_id: int | None = None, include_serving: bool = False
) -> list[dict[str, Any]]:
    """The report rows of a sweep (default: the latest), with quality and speed relative to the reference.
    ``include_serving``: the serving runner's rows too, after the in-process ones."""
    _, runs = sweep_runs(session, sweep_id)
    rows = [_inprocess_row(run, runs.attempts) for run in runs.inprocess]
    attach_reference(rows, {run.id: output_tokens(run) for run in runs.inprocess})
    _judge(session, rows)
    if include_serving:
        rows += serving_rows(session, runs.serving, runs.attempts)
    for row in rows:
        for name in FIELD_NAMES:
            row.setdefault(name, None)  # not measured by this row's runner
    attach_fleet(session, rows)  # the device and build of every row, serving rows included
    return rows
