"""The per-second series (storage/series.py) and the views of migration 18: a run's readings become one row
per (metric, UTC second), on UTC through the run's anchor (ended_at at t_end_mono) rather than the
ticks' own wall clock; rebuilt, never doubled; the run_context and run_verdict views give a run its context.

All data here is synthetic (made up in the tests).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session
from support.dbbuild import add_run, add_sweep

from edgeprof.storage.db import open_engine
from edgeprof.storage.models import Measurement, ModelFile, SeriesMetric, Verdict
from edgeprof.storage.sample_codec import Tick
from edgeprof.storage.samples import write_ticks
from edgeprof.storage.series import fill_series, runs_without_series, utc_offset

pytestmark = pytest.mark.timeout(120)

ENDED = datetime(2026, 3, 1, 12, 0, 10)  # the run's anchor: this UTC instant is t_end_mono = 1010.0
STEPPED = 3600.0  # the ticks' wall clock is an hour off (stepped by NTP during the run, say)


def classify(source: str, metric: str) -> tuple[str | None, str | None]:
    return ("temperature", "C") if metric.startswith("temp") else (None, None)


def _ticks() -> list[Tick]:
    # mono 1000.0 is 12:00:00 UTC by the anchor; the t_wall of each tick is deliberately off.
    values = [(1000.0, 40.0), (1000.25, 41.0), (1000.5, None), (1000.75, 43.0)]
    values += [(1001.0, 50.0), (1001.5, 52.0)]
    epoch_1000 = (datetime(2026, 3, 1, 12, 0, 0) - datetime(1970, 1, 1)).total_seconds()
    return [Tick(t, epoch_1000 + (t - 1000.0) + STEPPED, {"temp.cpu": v, "util": 1.0}) for t, v in values]


def _db(tmp_path: Path, anchored: bool = True) -> tuple[object, int]:
    engine = open_engine(tmp_path / "series.db")
    with Session(engine) as s:
        sweep = add_sweep(s)
        fields = {"ended_at": ENDED, "t_end_mono": 1010.0} if anchored else {}
        run = add_run(s, sweep, 1, **fields)
        write_ticks(s, sweep.id, run.id, "synthetic", _ticks())
        s.commit()
        return engine, run.id


def _points(engine: object, metric: str) -> list[tuple[datetime, float, int, str | None]]:
    """The metric's points as a dashboard reads them (the ``series`` view)."""
    with Session(engine) as s:  # type: ignore[call-overload]
        q = text("SELECT t, value, n, role FROM series WHERE metric = :m ORDER BY t")
        return [(_dt(r[0]), r[1], r[2], r[3]) for r in s.execute(q, {"m": metric})]


def _dt(value: object) -> datetime:
    """A view's datetime column comes back as SQLite's text (no column type to convert it by)."""
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


def test_one_row_per_second_on_utc_through_the_runs_anchor(tmp_path: Path) -> None:
    engine, run_id = _db(tmp_path)
    with engine.begin() as conn:  # type: ignore[attr-defined]
        assert runs_without_series(conn, 1) == {run_id}
        written = fill_series(conn, [run_id], classify)
        assert runs_without_series(conn, 1) == set()
    assert written == 4  # temp.cpu and util, two seconds each
    with Session(engine) as s:  # type: ignore[call-overload]
        assert s.scalar(select(func.count()).select_from(SeriesMetric)) == 2  # each metric named once
    temps = _points(engine, "temp.cpu")
    # The NULL reading is left out of both the mean and the count; the second is the anchor's, not t_wall's.
    assert temps == [
        (datetime(2026, 3, 1, 12, 0, 0), pytest.approx((40.0 + 41.0 + 43.0) / 3), 3, "temperature"),
        (datetime(2026, 3, 1, 12, 0, 1), 51.0, 2, "temperature"),
    ]
    assert [p[3] for p in _points(engine, "util")] == [None, None]


def test_rebuilding_replaces_the_rows_and_never_doubles_them(tmp_path: Path) -> None:
    engine, run_id = _db(tmp_path)
    for _ in range(2):
        with engine.begin() as conn:  # type: ignore[attr-defined]
            fill_series(conn, [run_id], classify)
    assert len(_points(engine, "temp.cpu")) == 2


def test_a_run_without_an_anchor_uses_its_ticks_wall_clock(tmp_path: Path) -> None:
    engine, run_id = _db(tmp_path, anchored=False)
    with engine.begin() as conn:  # type: ignore[attr-defined]
        fill_series(conn, [run_id], classify)
    assert [p[0] for p in _points(engine, "temp.cpu")] == [
        datetime(2026, 3, 1, 13, 0, 0),
        datetime(2026, 3, 1, 13, 0, 1),
    ]


def test_utc_offset_reads_naive_utc_and_needs_both_halves() -> None:
    assert utc_offset(datetime(1970, 1, 1, 0, 1), 10.0) == 50.0
    assert utc_offset(None, 10.0) is None and utc_offset(ENDED, None) is None


def test_views_give_a_run_its_context_and_its_latest_verdicts(tmp_path: Path) -> None:
    engine, run_id = _db(tmp_path)
    with Session(engine) as s:
        mf = ModelFile(path="/m.gguf", sha256="a" * 64, size_bytes=1, mtime_ns=1, quant_type="Q4_K_M")
        s.add(mf)
        s.flush()
        run2 = add_run(s, 1, 2, model_file_id=mf.id, runner="llama-server", n_gpu_layers=99)
        for rep, tg in enumerate((10.0, 12.0)):
            s.add(Measurement(run_id=run2.id, kind="steady", rep=rep, tg_tps=tg, temp_max_c=60.0 + rep))
        s.add(Measurement(run_id=run2.id, kind="warmup", rep=0, tg_tps=1.0))
        s.add(Verdict(run_id=run2.id, kind="throttle", value="not_throttled", evidence_json="{}"))
        s.add(Verdict(run_id=run2.id, kind="throttle", value="throttled", evidence_json="{}"))
        s.commit()
        row = s.execute(text("SELECT * FROM run_context WHERE run_id = :r"), {"r": run2.id}).mappings().one()
        assert (row["device"], row["quant"], row["ngl"], row["runner"]) == ("h", "Q4_K_M", 99, "llama-server")
        assert (row["tg_tps"], row["temp_max_c"], row["throttle"]) == (11.0, 61.0, "throttled")
        first = s.execute(text("SELECT * FROM run_context WHERE run_id = :r"), {"r": run_id}).mappings().one()
        assert first["runner"] == "llama-cpp" and first["quant"] is None and first["throttle"] is None
        verdicts = s.execute(text("SELECT run_uid, verdict_kind, verdict FROM run_verdict")).all()
        assert [v[1:] for v in verdicts] == [("throttle", "not_throttled"), ("throttle", "throttled")]
