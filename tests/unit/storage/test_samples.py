"""Compact sample storage (storage/samples.py, storage/sample_codec.py): NaN kept apart from NULL, size per
reading, the in-place migration of a DB in the old one-row-per-reading format, sealing a run's blocks. (The
round trip and the selection on every backend, PostgreSQL included: test_samples_backends.py.)

All data here is synthetic (made up in the tests), labelled as such where it is stored.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.orm import Session
from support.synthetic_samples import insert_row, reading_key, seed_sweep, synthetic_rows

from edgeprof.storage.db import open_engine
from edgeprof.storage.migrations import upgrade
from edgeprof.storage.models import Sample, SampleBlock
from edgeprof.storage.sample_codec import Tick, decode_block, encode_block
from edgeprof.storage.samples import read_samples, read_thinned, seal_run, write_batch, write_ticks
from edgeprof.telemetry import SampleRow

pytestmark = pytest.mark.timeout(120)


def test_codec_keeps_nan_apart_from_null_and_huge_values_bit_exact() -> None:
    ticks = [
        Tick(1.0, 2.0, {"a": float("nan"), "b": None, "c": 1e300, "d": -0.0}),
        Tick(1.5, 2.5, {"a": 1.0, "b": 3.25, "c": -1e-300, "d": 2**60 + 1.0}),
    ]
    payload, n_values = encode_block(ticks)
    assert n_values == 8
    t_mono, t_wall, cols = decode_block(payload)
    assert t_mono.tolist() == [1.0, 1.5] and t_wall.tolist() == [2.0, 2.5]
    by = {name: (idx.tolist(), vals.tolist(), nulls.tolist()) for name, idx, vals, nulls in cols}
    assert math.isnan(by["a"][1][0]) and by["a"][2] == [False, False]
    assert by["b"][2] == [True, False] and by["b"][1][1] == 3.25
    assert by["c"][1] == [1e300, -1e-300]
    assert math.copysign(1.0, by["d"][1][0]) == -1.0 and by["d"][1][1] == 2**60 + 1.0


def test_an_overnight_mix_takes_under_16_bytes_per_reading(tmp_path: Path) -> None:
    # synthetic: 60 metrics of tegrastats-like kinds (temperatures, clocks, rails, utilisation) at 5 Hz
    rng = random.Random(3)
    path = tmp_path / "size.db"
    engine = open_engine(path)
    n_ticks = 3000
    temps = [40.0 + i for i in range(12)]
    with Session(engine) as s:
        seed_sweep(s)
        ticks = []
        for i in range(n_ticks):
            vals: dict[str, float | None] = {}
            for j in range(12):
                temps[j] = round(min(90.0, max(30.0, temps[j] + rng.choice([-0.1, 0, 0, 0.1]))), 1)
                vals[f"temp.z{j}_c"] = temps[j]
            for j in range(12):
                vals[f"cpu{j}.freq_mhz"] = float(rng.choice([729, 1420, 2201]))
            for j in range(12):
                vals[f"cpu{j}.util_pct"] = float(rng.randrange(0, 101))
            for j in range(12):
                vals[f"power.rail{j}_mw"] = float(rng.randrange(1000, 9000))
            for j in range(12):
                vals[f"mem.x{j}_mb"] = float(3000 + i // 10 + j)
            ticks.append(Tick(100.0 + i * 0.2, 1.7e9 + i * 0.2, vals))
        for start in range(0, n_ticks, 10):  # the sampler's 2-s flushes
            write_ticks(s, 1, 1, "synthetic", ticks[start : start + 10])
        s.commit()
        payload = sum(len(d) for (d,) in s.execute(select(SampleBlock.data)))
    engine.dispose()
    n_values = n_ticks * 60
    assert payload / n_values < 16
    con = create_engine(f"sqlite:///{path}")
    with con.begin() as c:
        c.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
        c.exec_driver_sql("VACUUM")
    con.dispose()
    assert path.stat().st_size / n_values < 16


def test_a_db_in_the_old_format_is_migrated_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = create_engine(f"sqlite:///{path}")
    upgrade(old, target=10)  # the schema before compact samples: frozen migrations 1..10
    rows = synthetic_rows(1, 300) + synthetic_rows(2, 40, t0=400.0)
    rows.append(SampleRow(999.0, 1.7e9, "nosweep", "temp.x_c", 50.0, None))
    with old.begin() as conn:
        seed_sweep(conn)
        for r in rows:
            insert_row(conn, "sample", {"sweep_id": None if r.run_id is None else 1, "run_id": r.run_id,
                                        "t_mono": r.t_mono, "t_wall": r.t_wall, "source": r.source,
                                        "metric": r.metric, "value": r.value})  # fmt: skip
    old.dispose()

    engine = open_engine(path)  # what every edgeprof command does on start
    with Session(engine) as s:
        assert s.scalar(select(func.count()).select_from(Sample)) == 0
        assert s.scalar(select(func.sum(SampleBlock.n_values))) == len(rows)
        back = read_samples(s, 1) + read_samples(s, None, run_ids=None, sources=["nosweep"])
    assert sorted(map(reading_key, back)) == sorted(map(reading_key, rows))
    assert upgrade(engine) == []


def test_sealing_a_run_merges_its_small_blocks_losslessly(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "seal.db")
    rows = synthetic_rows(1, 700) + synthetic_rows(2, 30, t0=900.0)
    with Session(engine) as s:
        seed_sweep(s)
        by_t = sorted({r.t_mono for r in rows if r.run_id == 1})
        for start in range(0, len(by_t), 10):  # the sampler's flushes: 10 ticks each
            chunk = set(by_t[start : start + 10])
            write_batch(s, 1, [r for r in rows if r.run_id == 1 and r.t_mono in chunk])
        write_batch(s, 1, [r for r in rows if r.run_id == 2])
        s.commit()
        before = s.scalar(select(func.count()).select_from(SampleBlock).where(SampleBlock.run_id == 1))
        size_before = s.scalar(select(func.sum(func.length(SampleBlock.data))))
        assert seal_run(s, 1, max_ticks=300) == before - 3  # 700 ticks -> blocks of 300, 300, 100
        s.commit()
        assert s.scalar(select(func.count()).select_from(SampleBlock).where(SampleBlock.run_id == 1)) == 3
        assert s.scalar(select(func.sum(func.length(SampleBlock.data)))) < size_before
        back = read_samples(s, 1)
    assert sorted(map(reading_key, back)) == sorted(map(reading_key, rows))


def test_a_sweep_past_the_bound_is_read_one_line_in_two_four_evenly(tmp_path: Path) -> None:
    """``read_thinned`` (the log verdict's read of an imported night): at most ``max_readings`` readings
    kept, 1 line in 2, 4, ... through the whole sweep across its blocks; at the bound itself, every line."""
    engine = open_engine(tmp_path / "thin.db")
    with Session(engine) as s:
        seed_sweep(s)
        ticks = [Tick(float(i), 1.7e9 + i, {"a": float(i), "b": None if i % 5 else 1.0}) for i in range(100)]
        for start in range(0, 100, 30):  # blocks that do not fall on the step
            write_ticks(s, 1, None, "synthetic", ticks[start : start + 30])
        s.commit()
        readings = 100 + 100  # a NULL is a reading too (the log's line held the field)
        whole = read_thinned(s, 1, readings)
        assert (whole.step, whole.lines, len(whole.series["a"])) == (1, 100, 100)
        assert whole.wall_at_zero == 1.7e9 and whole.sources == {"a": "synthetic", "b": "synthetic"}
        half = read_thinned(s, 1, readings - 1)
        assert half.step == 2 and [t for t, _ in half.series["a"]] == [float(i) for i in range(0, 100, 2)]
        quarter = read_thinned(s, 1, 60)
        assert quarter.step == 4
        assert [v for _, v in quarter.series["a"]] == [float(i) for i in range(0, 100, 4)]
        assert quarter.series["b"][:2] == [(0.0, 1.0), (4.0, None)]
    engine.dispose()
