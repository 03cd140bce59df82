"""Scale of a central PostgreSQL DB that every device pushes to: fill it with SYNTHETIC rows for D devices x
S sweeps, each sweep R runs (cold + steady measurements) and N telemetry samples (stored as compressed sample
blocks, as live telemetry is, so N readings per sweep are what a real sweep of that length would store), then
time what a fleet user runs: ``sweeps``, ``sweeps --device``, ``report --sweep``, ``compare`` (two devices) and
``status --device``.

Every row is labelled synthetic (hostnames ``synthetic-NN``, sweep names ``synthetic-scale``). The sample
payload is one real encoded block (random-walk temperatures and powers) reused for every run.

    .venv/bin/python benchmarks/self/fleet_scale.py --devices 50 --sweeps 100 --samples 100000 [--pg-url URL]

Timings are wall clock of the CLI as a user runs it (`python -m edgeprof ...`, Python start included) and,
separately, of the query function inside one process; min/median/max of --repeat runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[2]

from edgeprof.storage.migrations import upgrade  # noqa: E402
from edgeprof.storage.sample_codec import CODEC, encode_arrays  # noqa: E402

RUN_COLS = (
    "uid, sweep_id, spec_id, seq, model_file_id, build_id, model_label, model_group, model_path, "
    "workload_name, workload_hash, workload_json, params_json, repeat_json, n_ctx, n_gpu_layers, n_threads, "
    "n_batch, n_ubatch, flash_attn, type_k, type_v, use_mmap, status, started_at, ended_at, peak_rss_mb"
)


def payload(n_ticks: int, n_metrics: int) -> tuple[bytes, int]:
    """One encoded block of synthetic readings (random walks, 0.1 C / 1 mW resolution like real sensors)."""
    rng = np.random.default_rng(13)
    t = np.arange(n_ticks, dtype=np.float64) * 0.2 + 1000.0
    cols = []
    for m in range(n_metrics):
        walk = (
            np.round(40.0 + np.cumsum(rng.normal(0, 0.05, n_ticks)), 1)
            if m % 2
            else np.round(5000 + np.cumsum(rng.normal(0, 20, n_ticks)))
        )
        cols.append((f"synthetic.metric{m}", np.zeros(n_ticks, dtype=np.uint8), walk))
    return encode_arrays(t, t + 1.7e9, cols)


def fill(url: str, devices: int, sweeps: int, runs: int, samples: int) -> dict[str, Any]:
    engine = create_engine(url)
    upgrade(engine)
    n_metrics = 10
    ticks_per_run = max(1, samples // (runs * n_metrics))
    data, n_values = payload(ticks_per_run, n_metrics)
    t0 = time.perf_counter()
    raw = engine.raw_connection()
    cur = raw.cursor()
    base = datetime(2026, 1, 1)
    cur.execute(
        "INSERT INTO build (uid, fingerprint, llama_cpp_python_version, backend, gpu_offload, system_info,"
        " first_seen) VALUES (%s, 'synthetic-build', '0.3.36', 'cuda', true, 'synthetic', %s) RETURNING id",
        (str(uuid.uuid4()), base),
    )
    build_id = cur.fetchone()[0]
    model_ids = []
    for q in ("Q4_K_M", "Q8_0"):
        cur.execute(
            "INSERT INTO model_file (uid, path, sha256, size_bytes, mtime_ns, quant_type) "
            "VALUES (%s, %s, %s, 5000000000, 1764547200123456789, %s) RETURNING id",
            (str(uuid.uuid4()), f"/models/synthetic-{q}.gguf", q.ljust(64, "0")[:64], q),
        )
        model_ids.append(cur.fetchone()[0])
    run_id = 0
    sweep_id = 0
    with cur.copy(
        "COPY device (uid, fingerprint, hostname, arch, board_model, l4t_release, facts_json, "
        "first_seen) FROM STDIN"
    ) as copy:
        for d in range(devices):
            board = "NVIDIA Jetson Orin Nano" if d % 2 else "NVIDIA Jetson AGX Orin"
            copy.write_row(
                (
                    str(uuid.uuid4()),
                    f"synthetic-fp-{d}",
                    f"synthetic-{d:02d}",
                    "aarch64",
                    board,
                    "R36.4.4",
                    "{}",
                    base,
                )
            )
    cur.execute("SELECT id FROM device ORDER BY id")
    device_ids = [r[0] for r in cur.fetchall()]
    cur.execute("SELECT COALESCE(MAX(id), 0) FROM sweep")
    sweep_id = cur.fetchone()[0]
    cur.execute("SELECT COALESCE(MAX(id), 0) FROM run")
    run_id = cur.fetchone()[0]
    sweep_rows, run_rows, meas_rows, block_rows = [], [], [], []
    for di, dev in enumerate(device_ids):
        for s in range(sweeps):
            sweep_id += 1
            started = base + timedelta(hours=di * sweeps + s)
            sweep_rows.append(
                (
                    sweep_id,
                    str(uuid.uuid4()),
                    "synthetic-scale",
                    "synthetic",
                    "synthetic-plan",
                    dev,
                    "0.1.0",
                    started,
                    started + timedelta(minutes=30),
                    "completed",
                    runs,
                )
            )
            for r in range(runs):
                run_id += 1
                ctx = 512 * (1 + r // 2)
                run_rows.append(
                    (
                        str(uuid.uuid4()),
                        sweep_id,
                        f"spec-{r}",
                        r,
                        model_ids[r % 2],
                        build_id,
                        f"synthetic-{r % 2}",
                        "synthetic",
                        "/models/x.gguf",
                        "w",
                        "h",
                        "{}",
                        "{}",
                        "{}",
                        ctx,
                        99,
                        4,
                        512,
                        512,
                        "auto",
                        "f16",
                        "f16",
                        True,
                        "ok",
                        started,
                        started + timedelta(minutes=5),
                        800.0,
                    )
                )
                for rep in range(6):
                    kind = "cold" if rep == 0 else "steady"
                    tg = 20.0 + (di % 2) * 15 + rep * 0.1
                    meas_rows.append(
                        (str(uuid.uuid4()), run_id, kind, rep, 128, 40.0, 3200.0, 35.0, 63, 3000.0, tg)
                    )
                block_rows.append(
                    (
                        sweep_id,
                        run_id,
                        "synthetic",
                        1000.0,
                        1000.0 + ticks_per_run * 0.2,
                        ticks_per_run,
                        n_values,
                        CODEC,
                        data,
                    )
                )
    with cur.copy(
        "COPY sweep (id, uid, name, plan_text, plan_hash, device_id, edgeprof_version, started_at, "
        "ended_at, status, n_specs) FROM STDIN"
    ) as copy:
        for row in sweep_rows:
            copy.write_row(row)
    with cur.copy(f"COPY run ({RUN_COLS}) FROM STDIN") as copy:
        for row in run_rows:
            copy.write_row(row)
    with cur.copy(
        "COPY measurement (uid, run_id, kind, rep, n_prompt, prefill_ms, pp_tps, ttft_ms, n_gen, "
        "decode_ms, tg_tps) FROM STDIN"
    ) as copy:
        for row in meas_rows:
            copy.write_row(row)
    with cur.copy(
        "COPY sample_block (sweep_id, run_id, source, t_start_mono, t_end_mono, n_ticks, n_values, "
        "codec, data) FROM STDIN"
    ) as copy:
        for row in block_rows:
            copy.write_row(row)
    # Keep the identity sequences ahead of the explicit ids written above.
    for table in ("sweep", "run"):
        cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT MAX(id) FROM {table}))")
    raw.commit()
    cur.execute("ANALYZE")
    raw.commit()
    cur.execute("SELECT pg_database_size(current_database())")
    size = cur.fetchone()[0]
    raw.close()
    engine.dispose()
    return {
        "fill_s": round(time.perf_counter() - t0, 1),
        "devices": devices,
        "sweeps": devices * sweeps,
        "runs": len(run_rows),
        "measurements": len(meas_rows),
        "sample_blocks": len(block_rows),
        "samples": len(block_rows) * n_values,
        "block_bytes": len(data),
        "db_bytes": size,
        "last_sweep_id": sweep_id,
    }


def cli_time(args: list[str], repeat: int) -> dict[str, Any]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "edgeprof", *args], capture_output=True, text=True, timeout=600
        )
        times.append(time.perf_counter() - t0)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])}: {done.stderr.strip()}")
    return {
        "min_s": round(min(times), 3),
        "median_s": round(statistics.median(times), 3),
        "max_s": round(max(times), 3),
    }


def in_process(url: str, a: int, b: int, dev: str, repeat: int) -> dict[str, Any]:
    """The same questions answered by the library inside one process (no Python start, engine reused)."""
    from edgeprof.daemon import gather_status
    from edgeprof.fleet import list_sweeps
    from edgeprof.report import build_rows, compare_sweeps
    from edgeprof.storage.db import new_session, open_engine

    engine = open_engine(url, read_only=True)
    calls = {
        "in-process list_sweeps(limit=50)": lambda s: list_sweeps(s, limit=50),
        f"in-process list_sweeps(device={dev})": lambda s: list_sweeps(s, device=dev),
        "in-process list_sweeps(all)": lambda s: list_sweeps(s),
        "in-process build_rows(A)": lambda s: build_rows(s, a),
        "in-process compare_sweeps(B, A)": lambda s: compare_sweeps(s, b, a),
        f"in-process gather_status(device={dev})": lambda s: gather_status(s, device=dev),
    }
    out = {}
    for what, call in calls.items():
        times = []
        for _ in range(repeat):
            with new_session(engine) as session:
                t0 = time.perf_counter()
                call(session)
                times.append(time.perf_counter() - t0)
        out[what] = {
            "min_s": round(min(times), 3),
            "median_s": round(statistics.median(times), 3),
            "max_s": round(max(times), 3),
        }
    engine.dispose()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devices", type=int, default=50)
    ap.add_argument("--sweeps", type=int, default=100, help="per device")
    ap.add_argument("--runs", type=int, default=4, help="per sweep")
    ap.add_argument("--samples", type=int, default=100_000, help="telemetry readings per sweep")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pg-url", default=os.environ.get("EDGEPROF_TEST_PG_URL"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    stop_dir = None
    server = args.pg_url
    if not server:
        out = subprocess.run(
            ["bash", str(ROOT / "scripts" / "pg_test_server.sh"), "start"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        env = {
            line.removeprefix("export ").split("=", 1)[0]: shlex.split(line.split("=", 1)[1])[0]
            for line in out.splitlines()
        }
        server, stop_dir = env["EDGEPROF_TEST_PG_URL"], env["EDGEPROF_TEST_PG_DIR"]
    name = f"scale_{uuid.uuid4().hex[:8]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(server).set(database=name).render_as_string(hide_password=False)
    try:
        filled = fill(url, args.devices, args.sweeps, args.runs, args.samples)
        print(json.dumps(filled), flush=True)
        a = filled["last_sweep_id"]
        b = a - args.sweeps  # the previous device's last sweep: same plan, another board
        dev = f"synthetic-{min(7, args.devices - 1):02d}"
        timings = {
            "sweeps --limit 50": cli_time(["sweeps", "--db", url, "--limit", "50"], args.repeat),
            f"sweeps --device {dev} --json": cli_time(
                ["sweeps", "--db", url, "--device", dev, "--json"], args.repeat
            ),
            "sweeps (all, --json)": cli_time(["sweeps", "--db", url, "--json"], args.repeat),
            "report --sweep A --format json": cli_time(
                ["report", "--db", url, "--sweep", str(a), "--format", "json"], args.repeat
            ),
            "compare A B": cli_time(["compare", str(b), str(a), "--db", url], args.repeat),
            f"status --device {dev}": cli_time(["status", "--db", url, "--device", dev], args.repeat),
            "python -m edgeprof --version (startup)": cli_time(["--version"], args.repeat),
        }
        timings.update(in_process(url, a, b, dev, args.repeat))
        for what, t in timings.items():
            print(f"{what:42s} min {t['min_s']:6.2f}s  median {t['median_s']:6.2f}s  max {t['max_s']:6.2f}s")
        if args.json:
            args.json.write_text(
                json.dumps({"label": "synthetic rows", **filled, "timings": timings}, indent=2)
            )
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
        if stop_dir:
            subprocess.run(
                ["bash", str(ROOT / "scripts" / "pg_test_server.sh"), "stop", stop_dir], check=False
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
