"""An imported log read back from the database, judged (``log_verdict``) and its verdict stored: the samples
of a sweep of status ``imported``, the roles of the collector whose format the log has, and the spacing the
import recorded (or the one the user states).

A log is judged once: at import, and again only when the judgement changes (``log_verdict.RULE_VERSION``),
the user states another line spacing, or asks (``analyse --rejudge``). ``report``, ``analyse`` and ``status``
read the stored verdict (``log_verdict_of``, ``stored_log_verdict``): judging a night's log reads all of its
samples, reading its verdict reads one row."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.collectors import MetricRole, roles_for
from edgeprof.run_states import utcnow
from edgeprof.storage.log_verdicts import LogVerdict
from edgeprof.storage.models import Sweep
from edgeprof.storage.samples import read_thinned
from edgeprof.telemetry.log_series import MAX_VERDICT_READINGS
from edgeprof.verdicts.log_verdict import RULE_VERSION, LogInputs, judge_log, line_times, measured_spacing_s
from edgeprof.verdicts.store import stored_roles

IMPORTED_STATUS = "imported"
# The import's sample source -> the collector that reads the same format live (its roles are the log's).
SOURCE_COLLECTOR = {"tegrastats_import": "tegrastats", "jtop_import": "jtop", "nvidia_smi_import": "nvml"}


def is_imported(sweep: Sweep | None) -> bool:
    """A sweep that holds a log: imported, and its sampler says which clock spaced its lines (every log
    importer writes it). An imported llama-bench run is imported too, but holds runs, not a log."""
    return sweep is not None and sweep.status == IMPORTED_STATUS and "clock" in _sampler(sweep)


def _sampler(sweep: Sweep) -> dict[str, Any]:
    try:
        data = json.loads(sweep.sampler_json or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def log_inputs(session: Session, sweep_id: int, interval_ms: float | None = None) -> LogInputs:
    """The imported sweep's samples as a log (``_read_log``), as the judgement takes it."""
    return _read_log(session, sweep_id, interval_ms)[0]


def _read_log(session: Session, sweep_id: int, interval_ms: float | None) -> tuple[LogInputs, int, int]:
    """The imported sweep's samples as a log. Without timestamps the import spaced lines 1 s apart; a
    stated ``interval_ms`` replaces that spacing (and is then no longer "assumed")."""
    sweep = session.get(Sweep, sweep_id)
    if sweep is None:
        raise ValueError(f"no sweep {sweep_id}")
    meta = _sampler(sweep)
    # "elapsed": a board log's seconds column without a start date: real spacing, no wall clock
    timed = meta.get("clock") in ("timestamps", "elapsed")
    stated = interval_ms / 1000.0 if interval_ms else None
    scale = stated if (stated and not timed) else 1.0
    # bounded however long the log: past MAX_VERDICT_READINGS, 1 line in 2, 4, ... (as the import reads it)
    read = read_thinned(session, sweep_id, MAX_VERDICT_READINGS)
    series = {m: [(t * scale, v) for t, v in points] for m, points in read.series.items()}
    sources = {m: SOURCE_COLLECTOR.get(src, src) for m, src in read.sources.items()}
    wall_t0 = read.wall_at_zero if meta.get("clock") == "timestamps" else None
    # the roles a board-log reader declared and the import stored come first
    roles: dict[str, MetricRole] = roles_for(series, sources, stored_roles(session, sweep_id))
    # a board log states the spacing its sessions split by (an sbc-bench result is one run)
    measured = measured_spacing_s(line_times(series)) if timed else 1.0
    # the judged lines' own spacing: where 1 line in n is read, n times the log's
    base = stated or meta.get("spacing_s")
    spacing = base * read.step if base else (measured or 1.0)
    trips = {m: [(str(k), float(c)) for k, c in ts] for m, ts in (meta.get("trip_points") or {}).items()}
    phases = [(str(n), float(a), float(b)) for n, a, b in meta.get("phases") or []]
    inputs = LogInputs(
        series,
        roles,
        spacing,
        not timed and stated is None,
        wall_t0,
        power_budget_mw(series),
        trips,
        meta.get("trip_source"),
        phases,
    )
    return inputs, read.step, read.lines


def power_budget_mw(series: Mapping[str, Sequence[tuple[float, float | None]]]) -> float | None:
    """The board's power budget where the log states it (nvidia-smi's power.limit; jtop's power mode where
    its name is a wattage, ``15W``)."""
    stated = [m for m in series if m.endswith(".power_limit_mw") or m == "nvp.budget_mw"]
    limits = [v for m in stated for _, v in series[m] if v is not None]
    return max(limits) if limits else None


def judge_imported(session: Session, sweep_id: int, interval_ms: float | None = None) -> dict[str, Any]:
    """The verdict on an imported sweep's log, with the file it came from (and, where the log was read 1 line
    in n to stay in bounded memory, n and its length)."""
    sweep = session.get(Sweep, sweep_id)
    inputs, step, lines = _read_log(session, sweep_id, interval_ms)
    out = judge_log(inputs)
    if step > 1:
        out |= {"step": step, "lines_read": lines}
    meta = _sampler(sweep) if sweep is not None else {}
    return {"sweep_id": sweep_id, "file": meta.get("file"), "format": meta.get("format", "tegrastats")} | out


# -- the stored verdict ------------------------------------------------------------------------------------
def _stored_row(session: Session, sweep_id: int) -> LogVerdict | None:
    return session.scalar(select(LogVerdict).where(LogVerdict.sweep_id == sweep_id))


def _current(row: LogVerdict | None, interval_ms: float | None) -> bool:
    """Whether a stored verdict answers a read: judged by this judgement, at the spacing asked for (a read
    that states none takes the one the verdict was judged at)."""
    return (
        row is not None
        and row.rule_version == RULE_VERSION
        and (interval_ms is None or row.interval_ms == interval_ms)
    )


def stored_log_verdict(session: Session, sweep_id: int) -> dict[str, Any] | None:
    """The stored verdict on an imported sweep's log as judged, None where there is none; one of an
    older judgement is returned as it is, with ``stale`` set (a reader that cannot write, ``status``, says
    so rather than judge a night's log on every look)."""
    row = _stored_row(session, sweep_id)
    if row is None:
        return None
    out = _result_of(row)
    if row.rule_version != RULE_VERSION:
        out["stale"] = True
    return out


def _result_of(row: LogVerdict) -> dict[str, Any]:
    try:
        result = json.loads(row.result_json)
    except ValueError:
        result = {}
    return (result if isinstance(result, dict) else {}) | {
        "rule_version": row.rule_version,
        "judged_at": row.judged_at.isoformat(timespec="seconds"),
    }


def store_log_verdict(
    session: Session, sweep_id: int, result: Mapping[str, Any], interval_ms: float | None = None
) -> None:
    """Store (replace) an imported sweep's verdict as judged by this judgement; committed by the caller."""
    row = _stored_row(session, sweep_id)
    if row is None:
        row = LogVerdict(sweep_id=sweep_id)
        session.add(row)
    row.rule_version = RULE_VERSION
    row.interval_ms = interval_ms
    row.judged_at = utcnow()
    fields = {k: v for k, v in result.items() if k not in ("rule_version", "judged_at", "stale")}
    row.result_json = json.dumps(fields, allow_nan=False, default=str)
    session.flush()


def log_verdict_of(
    session: Session,
    sweep_id: int,
    interval_ms: float | None = None,
    *,
    rejudge: bool = False,
    store: bool = True,
) -> dict[str, Any]:
    """The verdict on an imported sweep's log: the stored one where it is current, else judged now (and
    stored and committed unless ``store`` is False: a read-only reader judges in memory and writes
    nothing). ``rejudge``: judge again whatever is stored."""
    row = _stored_row(session, sweep_id)
    if not rejudge and _current(row, interval_ms):
        assert row is not None
        return _result_of(row)
    stated = interval_ms if interval_ms is not None else (row.interval_ms if row is not None else None)
    result = judge_imported(session, sweep_id, stated)
    if not store:
        return result | {"rule_version": RULE_VERSION}
    store_log_verdict(session, sweep_id, result, stated)
    session.commit()
    row = _stored_row(session, sweep_id)
    assert row is not None
    return _result_of(row)
