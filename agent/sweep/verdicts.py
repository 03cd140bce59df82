"""The verdict step of a sweep: each config's verdicts judged and stored once its last child has ended,
with telemetry or without.

Its own step, not the telemetry's: stability needs only the reps' speeds, so a ``--no-telemetry`` sweep
stores it too (throttle and interference then say what is missing: ``inconclusive``). A verdict that raises
is stored as ``error`` with its reason (``edgeprof.verdicts.store``) and said in one warning line; never
silence, and never the run's measurements.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.orm import Session

from edgeprof import verdicts
from edgeprof.storage.models import Run, Verdict
from edgeprof.verdicts.store import ERROR_VALUE, VERDICT_KINDS, error_result, store_verdicts


def judge_run(session: Session, run: Run, warn: Callable[[str], None]) -> list[Verdict]:
    """Judge ``run`` and store its verdicts (committed); one warning line through ``warn`` where any
    verdict ended in ``error``. Returns the stored rows ([] where not even the error could be stored)."""
    run_id = run.id
    try:
        rows = verdicts.analyse_run(session, run_id)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - storing failed (the database): the error is stored instead
        session.rollback()
        try:
            rows = store_verdicts(session, run_id, {k: error_result(k, exc) for k in VERDICT_KINDS})
        except Exception as again:  # noqa: BLE001 - said, and the sweep goes on with its measurements
            session.rollback()
            warn(f"warning: the verdicts of run {run_id} failed and could not be stored: {again}")
            return []
    failed = [v for v in rows if v.value == ERROR_VALUE]
    if failed:
        reasons = sorted({verdicts.summary_line(v).removeprefix(f"{ERROR_VALUE}: ") for v in failed})
        kinds = ", ".join(v.kind for v in failed)
        warn(f"warning: run {run_id}: verdict(s) {kinds} stored as error: {'; '.join(reasons)}")
    return rows
