"""``db compact``: old raw telemetry becomes per-phase aggregates + 1 Hz series; measurements, phases and
verdicts are untouched; newer sweeps keep their raw samples; bad input is one line and exit 2.
All data here is synthetic."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from edgeprof.cli import app
from edgeprof.storage.db import open_engine
from edgeprof.storage.models import Device, Measurement, Phase, PhaseStat, Run, SampleBlock, Sweep, Verdict
from edgeprof.storage.retention import compact, gain_text, parse_duration, run_compact
from edgeprof.storage.samples import Tick, read_samples, write_ticks

pytestmark = pytest.mark.timeout(120)

NOW = dt.datetime(2026, 3, 1, 12, 0, 0)


def _sweep(s: Session, device: Device, age_days: float, t0: float) -> Run:
    when = NOW - dt.timedelta(days=age_days)
    sweep = Sweep(name=f"synthetic {age_days}d", plan_text="", plan_hash="h", device_id=device.id,
                  edgeprof_version="0", started_at=when, ended_at=when, status="completed",
                  n_specs=1)  # fmt: skip
    s.add(sweep)
    s.flush()
    run = Run(sweep_id=sweep.id, spec_id="s", seq=0, model_label="m", model_group="g", model_path="p",
              workload_name="w", workload_hash="h", workload_json="{}", params_json="{}", repeat_json="{}",
              n_ctx=256, n_gpu_layers=0, n_threads=2, n_batch=512, n_ubatch=512, flash_attn="off",
              type_k="f16", type_v="f16", use_mmap=True, status="ok", started_at=when)  # fmt: skip
    s.add(run)
    s.flush()
    s.add(Phase(run_id=run.id, name="decode", kind="steady", rep=0, t_start_mono=t0 + 2.0,
                t_end_mono=t0 + 6.0))  # fmt: skip
    s.add(Measurement(run_id=run.id, kind="steady", rep=0, tg_tps=12.5))
    s.add(Verdict(run_id=run.id, kind="throttle", value="not_throttled", evidence_json="{}"))
    ticks = []
    for i in range(50):  # 10 s at 5 Hz
        t = t0 + i * 0.2
        values: dict[str, float | None] = {
            "temp.cpu_c": 40.0 + i,  # 5 readings per second: the bucket mean is known
            "energy.package_uj": float((2**32 - 3_000_000 + i * 1_000_000) % 2**32),  # wraps
            "gpu.util_pct": None if 10 <= i < 15 else 50.0,  # second 2 all unreadable -> NULL
        }
        ticks.append(Tick(t, 1.7e9 + t, values))
    for start in range(0, 50, 10):
        write_ticks(s, sweep.id, run.id, "synthetic", ticks[start : start + 10])
    return run


def test_compact_downsamples_old_sweeps_only_and_keeps_the_rest(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "c.db")
    with Session(engine) as s:
        device = Device(fingerprint="d", hostname="synthetic", arch="x", facts_json="{}", first_seen=NOW)
        s.add(device)
        s.flush()
        old = _sweep(s, device, 10, 100.0)
        new = _sweep(s, device, 1, 1000.0)
        s.commit()
        res = compact(s, parse_duration("7d"), now=NOW)
        s.commit()
        assert res.sweeps == 1 and res.runs == 1
        assert res.readings_before == 150 and res.readings_after == 30  # 10 buckets x 3 metrics
        assert res.freed_bytes > 0
        raw_old = s.scalar(select(func.count()).select_from(SampleBlock).where(
            SampleBlock.run_id == old.id, SampleBlock.resolution_ms.is_(None)))  # fmt: skip
        assert raw_old == 0
        assert s.scalar(select(func.count()).select_from(SampleBlock).where(
            SampleBlock.run_id == new.id, SampleBlock.resolution_ms.is_(None))) == 5  # fmt: skip
        rows = read_samples(s, old.sweep_id)
        temp = [r.value for r in rows if r.metric == "temp.cpu_c"]
        assert temp == [42.0 + 5 * k for k in range(10)]  # means of 40..44, 45..49, ...
        energy = [r.value for r in rows if r.metric == "energy.package_uj"]
        assert energy[0] == float((2**32 - 3_000_000 + 4 * 1_000_000) % 2**32)  # the last reading, not a mean
        gpu = [r.value for r in rows if r.metric == "gpu.util_pct"]
        assert gpu[2] is None and gpu[1] == 50.0  # all-NULL bucket stays NULL, never 0
        phase_stats = s.scalars(select(PhaseStat).where(PhaseStat.run_id == old.id))
        stats = {(p.metric, p.stat): p.value for p in phase_stats}
        # decode phase t0+2 .. t0+6: ticks 10..30 -> temp 50..70
        assert stats[("temp.cpu_c", "cmp_max")] == 70.0 and stats[("temp.cpu_c", "cmp_min")] == 50.0
        assert stats[("gpu.util_pct", "cmp_n")] == 16.0  # 21 ticks, 5 unreadable
        # never touched
        assert s.scalar(select(func.count()).select_from(Measurement)) == 2
        assert s.scalar(select(func.count()).select_from(Verdict)) == 2
        assert s.scalar(select(func.count()).select_from(Phase)) == 2
        # running it again finds nothing more to do
        assert compact(s, parse_duration("7d"), now=NOW).sweeps == 0


def test_db_compact_cli_says_what_it_freed_and_refuses_bad_durations(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    engine = open_engine(db)
    with Session(engine) as s:
        device = Device(fingerprint="d", hostname="synthetic", arch="x", facts_json="{}", first_seen=NOW)
        s.add(device)
        s.flush()
        _sweep(s, device, 3650, 100.0)
        s.commit()
    engine.dispose()
    ok = CliRunner().invoke(app, ["db", "compact", "--db", str(db), "--keep-raw", "7d"])
    assert ok.exit_code == 0, ok.output
    assert "compacted 1 sweep(s)" in ok.stdout and "freed" in ok.stdout and "VACUUM" in ok.stdout
    bad = CliRunner().invoke(app, ["db", "compact", "--db", str(db), "--keep-raw", "seven days"])
    assert bad.exit_code == 2
    assert "Traceback" not in bad.output and "--keep-raw" in bad.output


def test_a_small_database_never_reports_a_negative_gain(tmp_path: Path) -> None:
    """A few small sweeps whose pages still sit in the write-ahead log: the main file alone grew through the
    checkpoint VACUUM needs, and the summary said "freed -0.0 MB"."""
    db = tmp_path / "small.db"
    engine = open_engine(db)
    with Session(engine) as s:
        device = Device(fingerprint="d", hostname="synthetic", arch="x", facts_json="{}", first_seen=NOW)
        s.add(device)
        s.flush()
        for i in range(5):
            _sweep(s, device, 3650, 100.0 + 100 * i)
        s.commit()
    assert db.with_name("small.db-wal").stat().st_size > 0  # the case: pages not yet in the main file
    text = run_compact(engine, parse_duration("7d"), vacuum=True)
    assert "freed -" not in text and "freed" in text, text
    sizes = re.search(r"database file ([\d.]+) MB -> ([\d.]+) MB after VACUUM \(freed [\d.]+ [kM]B\)", text)
    assert sizes is not None, text
    assert float(sizes.group(1)) >= float(sizes.group(2))  # the whole database, its log included
    assert db.stat().st_size <= float(sizes.group(1)) * 1e6 + 50_000


def test_gain_text() -> None:
    assert gain_text(3_000_000, 1_000_000, "why") == "freed 2.0 MB"
    assert gain_text(10_000, 9_300, "why") == "freed 0.7 kB"  # small: in kB, not "0.0 MB"
    assert gain_text(10_000, 10_000, "why") == "freed 0.0 MB"
    grew = gain_text(10_000, 12_500, "the series is larger")
    assert grew == "freed nothing: 2.5 kB more, the series is larger"


def test_durations() -> None:
    assert parse_duration("7d") == 7 * 86400 and parse_duration("12h") == 43200
    assert parse_duration("0") == 0 and parse_duration("90s") == 90 and parse_duration("2w") == 14 * 86400
    with pytest.raises(ValueError):
        parse_duration("-1d")
