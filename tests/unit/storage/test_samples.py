"""Compact sample storage (storage/samples.py): lossless round trip, NULLs, counters with wrap, selection by
run and phase, size per reading, and the in-place migration of a DB in the old one-row-per-reading format.

All data here is synthetic (made up in the tests), labelled as such where it is stored.
"""

from __future__ import annotations

import itertools
import math
import random
import uuid
from pathlib import Path

import pytest
from sqlalchemy import Connection, create_engine, func, inspect, select, text
from sqlalchemy.orm import Session

from edgeprof.storage.db import open_engine
from edgeprof.storage.migrations import upgrade
from edgeprof.storage.models import Sample, SampleBlock
from edgeprof.storage.sample_codec import Tick, decode_block, encode_block
from edgeprof.storage.samples import (
    count_samples,
    read_samples,
    sample_metrics,
    seal_run,
    write_batch,
    write_ticks,
)
from edgeprof.telemetry.sampler import SampleRow

pytestmark = pytest.mark.timeout(120)


def _insert(conn: Session | Connection, table: str, row: dict[str, object]) -> None:
    # the schema may carry issue 13's global-identity column (uid, unique): give every row its own
    if "uid" in {c["name"] for c in inspect(conn.connection() if isinstance(conn, Session) else conn)
                 .get_columns(table)}:  # fmt: skip
        row = {**row, "uid": str(uuid.uuid4())}
    names = ", ".join(row)
    marks = ", ".join(f":{k}" for k in row)
    conn.execute(text(f"INSERT INTO {table} ({names}) VALUES ({marks})"), row)


def _seed_sweep(conn: Session | Connection, sweep_id: int = 1, runs: tuple[int, ...] = (1, 2)) -> None:
    when = "2026-01-01 00:00:00"
    _insert(conn, "device", {"id": 1, "fingerprint": "fp", "hostname": "synthetic", "arch": "x86_64",
                             "facts_json": "{}", "first_seen": when})  # fmt: skip
    _insert(conn, "sweep", {"id": sweep_id, "name": "synthetic", "plan_text": "x", "plan_hash": "h",
                            "device_id": 1, "edgeprof_version": "0", "started_at": when,
                            "status": "completed", "n_specs": 1})  # fmt: skip
    for r in runs:
        _insert(conn, "run", {"id": r, "sweep_id": sweep_id, "spec_id": f"spec{r}", "seq": r,
                              "model_label": "m", "model_group": "g", "model_path": "p", "workload_name": "w",
                              "workload_hash": "h", "workload_json": "{}", "params_json": "{}",
                              "repeat_json": "{}", "n_ctx": 256, "n_gpu_layers": 0, "n_threads": 2,
                              "n_batch": 512, "n_ubatch": 512, "flash_attn": "off", "type_k": "f16",
                              "type_v": "f16", "use_mmap": True, "status": "ok",
                              "started_at": when})  # fmt: skip


def _rows(run_id: int, n_ticks: int, t0: float = 100.0) -> list[SampleRow]:
    rng = random.Random(run_id)
    rows = []
    energy = 2**32 - 50_000_000  # a RAPL-like counter about to wrap at 2^32 uJ
    for i in range(n_ticks):
        t = t0 + i * 0.2 + rng.random() * 1e-4
        tw = 1.7e9 + t + 0.123
        energy = (energy + rng.randrange(1_000_000, 3_000_000)) % (2**32)
        rows += [
            SampleRow(t, tw, "synthetic", "temp.cpu_c", round(45 + rng.random() * 5, 1), run_id),
            SampleRow(t, tw, "synthetic", "cpu0.freq_mhz", float(rng.choice([1200, 2400])), run_id),
            SampleRow(t, tw, "synthetic", "power.vdd_in_mw", float(rng.randrange(4000, 9000)), run_id),
            SampleRow(t, tw, "synthetic", "cpu.util_pct", rng.random() * 100, run_id),  # arbitrary floats
            SampleRow(t, tw, "synthetic", "energy.package_uj", float(energy), run_id),
            # unreadable every 7th tick: NULL, never 0
            SampleRow(t, tw, "synthetic", "gpu.util_pct", None if i % 7 == 0 else float(i % 100), run_id),
        ]
        if i % 3 == 0:  # a metric present in some ticks only (absent is not NULL)
            rows.append(SampleRow(t, tw, "synthetic", "fan.rpm", 1000.0 + i, run_id))
    return rows


def _key(r: object) -> tuple[object, ...]:
    return (r.t_mono, r.t_wall, r.run_id, r.source, r.metric, r.value)  # type: ignore[attr-defined]


def test_round_trip_is_exact_with_nulls_absent_metrics_and_wrapping_counters(any_db: str) -> None:
    engine = open_engine(any_db)  # SQLite and PostgreSQL (BYTEA)
    rows = _rows(1, 500)
    with Session(engine) as s:
        _seed_sweep(s)
        write_batch(s, 1, rows)
        s.commit()
        back = read_samples(s, 1)
    assert sorted(map(_key, back)) == sorted(map(_key, rows))
    nulls = [r for r in back if r.metric == "gpu.util_pct" and r.value is None]
    assert len(nulls) == len([r for r in rows if r.metric == "gpu.util_pct" and r.value is None]) > 0
    assert not any(r.value == 0 for r in nulls)
    fan = [r for r in back if r.metric == "fan.rpm"]
    assert len(fan) == 167  # ticks 0, 3, 6, ... only: absent ticks are not invented
    energy = [r.value for r in back if r.metric == "energy.package_uj"]
    assert any(b < a for a, b in itertools.pairwise(energy)), "the synthetic counter must wrap in this test"
    assert energy == [r.value for r in rows if r.metric == "energy.package_uj"]


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


def test_selection_by_run_phase_interval_and_metric_reads_only_overlapping_blocks(any_db: str) -> None:
    engine = open_engine(any_db)
    with Session(engine) as s:
        _seed_sweep(s)
        # many small blocks, as the sampler flushes them
        all_rows = _rows(1, 400)
        for start in range(0, 400, 10):
            lo, hi = start * 0.2 + 99.99, (start + 10) * 0.2 + 99.99
            write_batch(s, 1, [r for r in all_rows if lo <= r.t_mono < hi])
        write_batch(s, 1, _rows(2, 50, t0=500.0))
        s.commit()
        phase = read_samples(s, 1, 120.0, 130.0, metrics={"temp.cpu_c"}, run_ids=[1])
        assert phase and all(120.0 <= r.t_mono <= 130.0 and r.metric == "temp.cpu_c" for r in phase)
        expected = [r for r in _rows(1, 400) if 120.0 <= r.t_mono <= 130.0 and r.metric == "temp.cpu_c"]
        assert [r.value for r in phase] == [r.value for r in expected]
        assert [r.t_mono for r in phase] == sorted(r.t_mono for r in phase)
        run2 = read_samples(s, 1, run_ids=[2], metrics=lambda m: m.startswith("power."))
        assert len(run2) == 50 and {r.run_id for r in run2} == {2}
        no_nulls = read_samples(s, 1, run_ids=[1], metrics={"gpu.util_pct"}, with_nulls=False)
        assert no_nulls and all(r.value is not None for r in no_nulls)
        assert sample_metrics(s, 2) >= {"temp.cpu_c", "fan.rpm", "energy.package_uj"}
        assert count_samples(s, 1) == len(_rows(1, 400)) + len(_rows(2, 50, t0=500.0))
        # a phase interval of a 40-block run touches ~5 of them (the index on the span does the selection)
        n_blocks = s.scalar(
            select(func.count()).select_from(SampleBlock).where(
                SampleBlock.t_end_mono >= 120.0, SampleBlock.t_start_mono <= 130.0
            )
        )
        assert n_blocks is not None and n_blocks <= 7


def test_an_overnight_mix_takes_under_16_bytes_per_reading(tmp_path: Path) -> None:
    # synthetic: 60 metrics of tegrastats-like kinds (temperatures, clocks, rails, utilisation) at 5 Hz
    rng = random.Random(3)
    path = tmp_path / "size.db"
    engine = open_engine(path)
    n_ticks = 3000
    temps = [40.0 + i for i in range(12)]
    with Session(engine) as s:
        _seed_sweep(s)
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
    rows = _rows(1, 300) + _rows(2, 40, t0=400.0)
    rows.append(SampleRow(999.0, 1.7e9, "nosweep", "temp.x_c", 50.0, None))
    with old.begin() as conn:
        _seed_sweep(conn)
        for r in rows:
            _insert(conn, "sample", {"sweep_id": None if r.run_id is None else 1, "run_id": r.run_id,
                                     "t_mono": r.t_mono, "t_wall": r.t_wall, "source": r.source,
                                     "metric": r.metric, "value": r.value})  # fmt: skip
    old.dispose()

    engine = open_engine(path)  # what every edgeprof command does on start
    with Session(engine) as s:
        assert s.scalar(select(func.count()).select_from(Sample)) == 0
        assert s.scalar(select(func.sum(SampleBlock.n_values))) == len(rows)
        back = read_samples(s, 1) + read_samples(s, None, run_ids=None, sources=["nosweep"])
    assert sorted(map(_key, back)) == sorted(map(_key, rows))
    assert upgrade(engine) == []


def test_sealing_a_run_merges_its_small_blocks_losslessly(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "seal.db")
    rows = _rows(1, 700) + _rows(2, 30, t0=900.0)
    with Session(engine) as s:
        _seed_sweep(s)
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
    assert sorted(map(_key, back)) == sorted(map(_key, rows))
