"""Compact sample storage on every backend (SQLite and PostgreSQL's BYTEA): a lossless round trip with
NULLs, absent metrics and wrapping counters, and selection by run, phase interval and metric that reads only
the overlapping blocks. All data here is synthetic."""

from __future__ import annotations

import itertools

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from support.synthetic_samples import reading_key, seed_sweep, synthetic_rows

from edgeprof.storage.db import open_engine
from edgeprof.storage.models import SampleBlock
from edgeprof.storage.samples import count_samples, read_samples, sample_metrics, write_batch

pytestmark = pytest.mark.timeout(120)


def test_round_trip_is_exact_with_nulls_absent_metrics_and_wrapping_counters(any_db: str) -> None:
    engine = open_engine(any_db)  # SQLite and PostgreSQL (BYTEA)
    rows = synthetic_rows(1, 500)
    with Session(engine) as s:
        seed_sweep(s)
        write_batch(s, 1, rows)
        s.commit()
        back = read_samples(s, 1)
    assert sorted(map(reading_key, back)) == sorted(map(reading_key, rows))
    nulls = [r for r in back if r.metric == "gpu.util_pct" and r.value is None]
    assert len(nulls) == len([r for r in rows if r.metric == "gpu.util_pct" and r.value is None]) > 0
    assert not any(r.value == 0 for r in nulls)
    fan = [r for r in back if r.metric == "fan.rpm"]
    assert len(fan) == 167  # ticks 0, 3, 6, ... only: absent ticks are not invented
    energy = [r.value for r in back if r.metric == "energy.package_uj"]
    assert any(b < a for a, b in itertools.pairwise(energy)), "the synthetic counter must wrap in this test"
    assert energy == [r.value for r in rows if r.metric == "energy.package_uj"]


def test_selection_by_run_phase_interval_and_metric_reads_only_overlapping_blocks(any_db: str) -> None:
    engine = open_engine(any_db)
    with Session(engine) as s:
        seed_sweep(s)
        # many small blocks, as the sampler flushes them
        all_rows = synthetic_rows(1, 400)
        for start in range(0, 400, 10):
            lo, hi = start * 0.2 + 99.99, (start + 10) * 0.2 + 99.99
            write_batch(s, 1, [r for r in all_rows if lo <= r.t_mono < hi])
        write_batch(s, 1, synthetic_rows(2, 50, t0=500.0))
        s.commit()
        phase = read_samples(s, 1, 120.0, 130.0, metrics={"temp.cpu_c"}, run_ids=[1])
        assert phase and all(120.0 <= r.t_mono <= 130.0 and r.metric == "temp.cpu_c" for r in phase)
        expected = [
            r for r in synthetic_rows(1, 400) if 120.0 <= r.t_mono <= 130.0 and r.metric == "temp.cpu_c"
        ]
        assert [r.value for r in phase] == [r.value for r in expected]
        assert [r.t_mono for r in phase] == sorted(r.t_mono for r in phase)
        run2 = read_samples(s, 1, run_ids=[2], metrics=lambda m: m.startswith("power."))
        assert len(run2) == 50 and {r.run_id for r in run2} == {2}
        no_nulls = read_samples(s, 1, run_ids=[1], metrics={"gpu.util_pct"}, with_nulls=False)
        assert no_nulls and all(r.value is not None for r in no_nulls)
        assert sample_metrics(s, 2) >= {"temp.cpu_c", "fan.rpm", "energy.package_uj"}
        assert count_samples(s, 1) == len(synthetic_rows(1, 400)) + len(synthetic_rows(2, 50, t0=500.0))
        # a phase interval of a 40-block run touches ~5 of them (the index on the span does the selection)
        n_blocks = s.scalar(
            select(func.count()).select_from(SampleBlock).where(
                SampleBlock.t_end_mono >= 120.0, SampleBlock.t_start_mono <= 130.0
            )
        )
        assert n_blocks is not None and n_blocks <= 7


