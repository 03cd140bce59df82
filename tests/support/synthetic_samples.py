"""Synthetic telemetry for the sample-store tests (storage/samples.py): a device, a sweep and runs inserted
by plain SQL (so they work on any schema version, the old one-row-per-reading one included), and reading
rows with NULLs, a metric absent from some ticks and a RAPL-like counter that wraps. All made up."""

from __future__ import annotations

import random
import uuid

from sqlalchemy import Connection, inspect, text
from sqlalchemy.orm import Session

from edgeprof.telemetry import SampleRow


def insert_row(conn: Session | Connection, table: str, row: dict[str, object]) -> None:
    # the schema may carry the global-identity column (uid, unique; what push/export/import match rows
    # by): give every row its own
    if "uid" in {c["name"] for c in inspect(conn.connection() if isinstance(conn, Session) else conn)
                 .get_columns(table)}:  # fmt: skip
        row = {**row, "uid": str(uuid.uuid4())}
    names = ", ".join(row)
    marks = ", ".join(f":{k}" for k in row)
    conn.execute(text(f"INSERT INTO {table} ({names}) VALUES ({marks})"), row)


def seed_sweep(conn: Session | Connection, sweep_id: int = 1, runs: tuple[int, ...] = (1, 2)) -> None:
    when = "2026-01-01 00:00:00"
    insert_row(conn, "device", {"id": 1, "fingerprint": "fp", "hostname": "synthetic", "arch": "x86_64",
                                "facts_json": "{}", "first_seen": when})  # fmt: skip
    insert_row(conn, "sweep", {"id": sweep_id, "name": "synthetic", "plan_text": "x", "plan_hash": "h",
                               "device_id": 1, "edgeprof_version": "0", "started_at": when,
                               "status": "completed", "n_specs": 1})  # fmt: skip
    for r in runs:
        insert_row(conn, "run", {"id": r, "sweep_id": sweep_id, "spec_id": f"spec{r}", "seq": r,
                                 "model_label": "m", "model_group": "g", "model_path": "p",
                                 "workload_name": "w", "workload_hash": "h", "workload_json": "{}",
                                 "params_json": "{}",
                                 "repeat_json": "{}", "n_ctx": 256, "n_gpu_layers": 0, "n_threads": 2,
                                 "n_batch": 512, "n_ubatch": 512, "flash_attn": "off", "type_k": "f16",
                                 "type_v": "f16", "use_mmap": True, "status": "ok",
                                 "started_at": when})  # fmt: skip


def synthetic_rows(run_id: int, n_ticks: int, t0: float = 100.0) -> list[SampleRow]:
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


def reading_key(r: object) -> tuple[object, ...]:
    return (r.t_mono, r.t_wall, r.run_id, r.source, r.metric, r.value)  # type: ignore[attr-defined]
