"""kill -9 during a schema migration, at random moments, on SQLite and PostgreSQL: an
interrupted upgrade must leave a database that opens and upgrades again.

Each trial: a DB at schema v2 holding synthetic rows (a device, a sweep, runs and N legacy sample rows, all
labelled synthetic), so the later steps have real work (v7 backfills identities, the sample steps convert
rows); a child process runs `upgrade`; the parent SIGKILLs it a uniformly random time after the child says
it started. Then: the DB must open, be intact (SQLite integrity_check), record only whole versions, and a
second `upgrade` must reach the head with the schema equal to the models and no row lost.

    .venv/bin/python benchmarks/self/migration_kill.py --trials 25 --samples 40000 [--pg-url URL]

Without --pg-url (or $EDGEPROF_TEST_PG_URL) it starts a throwaway server with scripts/pg_test_server.sh.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

from sqlalchemy import create_engine, func, inspect, select, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from edgeprof.storage.migrations import HEAD_VERSION, MIGRATIONS, applied_versions, upgrade  # noqa: E402
from edgeprof.storage.models import Base  # noqa: E402

CHILD = (
    "import os, sys\n"
    "from sqlalchemy import create_engine\n"
    "from edgeprof.storage import migrations\n"
    "from edgeprof.storage.migrations import upgrade\n"
    "if os.environ.get('EDGEPROF_KILL_NO_TXN'):\n"
    "    migrations._sqlite_migration_engine = lambda e: e  # the driver's transactions (before)\n"
    "e = create_engine(sys.argv[1])\n"
    "print('start', flush=True)\n"
    "upgrade(e)\n"
    "print('done', flush=True)\n"
)


def seed(url: str, n_samples: int) -> dict[str, int]:
    """A v2 database with synthetic rows; returns the row counts that must survive."""
    engine = create_engine(url)
    upgrade(engine, target=2)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO device (id, fingerprint, hostname, arch, facts_json, first_seen) "
                "VALUES (1, 'synthetic-device', 'synthetic', 'aarch64', '{}', '2026-01-01 00:00:00')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO sweep (id, name, plan_text, plan_hash, device_id, edgeprof_version, started_at,"
                " status, n_specs) VALUES (1, 'synthetic', '', 'h', 1, '0', '2026-01-01 00:00:00', 'done', 4)"
            )
        )
        for run_id in range(1, 5):
            conn.execute(
                text(
                    "INSERT INTO run (id, sweep_id, spec_id, seq, model_label, model_group, model_path,"
                    " workload_name, workload_hash, workload_json, params_json, repeat_json, n_ctx,"
                    " n_gpu_layers, n_threads, n_batch, n_ubatch, flash_attn, type_k, type_v, use_mmap,"
                    " status, started_at) VALUES (:i, 1, :s, :i, 'synthetic', 'g', '/m', 'w', 'h', '{}',"
                    " '{}', '{}', 512, 0, 1, 512, 512, 'auto', 'f16', 'f16', TRUE, 'ok',"
                    " '2026-01-01 00:00:00')"
                ),
                {"i": run_id, "s": f"spec-{run_id}"},
            )
        rows = [
            {"sw": 1, "r": 1 + i % 4, "t": i * 0.05, "w": 1.7e9 + i * 0.05, "m": f"temp.{i % 8}", "v": 40.0}
            for i in range(n_samples)
        ]
        conn.execute(
            text(
                "INSERT INTO sample (sweep_id, run_id, t_mono, t_wall, source, metric, value) "
                "VALUES (:sw, :r, :t, :w, 'synthetic', :m, :v)"
            ),
            rows,
        )
    engine.dispose()
    return {"sweep": 1, "run": 4}


def check(url: str, expect: dict[str, int]) -> dict[str, Any]:
    """After the kill: opens? intact? which versions? then upgrade to the head and compare to the models."""
    out: dict[str, Any] = {}
    if url.startswith("sqlite:///"):
        con = sqlite3.connect(url.removeprefix("sqlite:///"))
        out["integrity"] = con.execute("PRAGMA integrity_check").fetchone()[0]
        con.close()
    engine = create_engine(url)
    with engine.connect() as conn:
        out["versions_after_kill"] = sorted(applied_versions(conn))
    upgrade(engine)
    with engine.connect() as conn:
        out["versions_after_upgrade"] = sorted(applied_versions(conn))
        for table, n in expect.items():
            t = Base.metadata.tables[table]
            got = conn.execute(select(func.count()).select_from(t)).scalar()
            if got != n:
                out.setdefault("lost", []).append(f"{table}: {got} != {n}")
    insp = inspect(engine)
    for table in Base.metadata.sorted_tables:
        cols = {c["name"] for c in insp.get_columns(table.name)}
        if cols != {c.name for c in table.columns}:
            out.setdefault("schema_mismatch", []).append(table.name)
    engine.dispose()
    out["ok"] = (
        out.get("integrity", "ok") == "ok"
        and out["versions_after_upgrade"] == sorted(m.version for m in MIGRATIONS)
        and "lost" not in out
        and "schema_mismatch" not in out
        # Only whole steps: what is recorded is what is there (a gap-free prefix here, since it started at 2).
        and out["versions_after_kill"]
        == sorted(v for v in out["versions_after_upgrade"] if v <= max(out["versions_after_kill"] or [0]))
    )
    return out


def run_child(url: str, kill_after_s: float | None) -> tuple[float, bool]:
    """Start the upgrade; SIGKILL it ``kill_after_s`` after it started (None: let it finish)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    t0 = time.monotonic()
    if line.strip() != "start":
        proc.wait(timeout=60)
        raise RuntimeError(f"child did not start: {proc.stderr.read() if proc.stderr else ''}")
    if kill_after_s is None:
        proc.wait(timeout=600)
        return time.monotonic() - t0, False
    time.sleep(kill_after_s)
    finished = proc.poll() is not None
    if not finished:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    return time.monotonic() - t0, not finished


def pg_server(url: str | None) -> tuple[str, str | None]:
    if url:
        return url, None
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "pg_test_server.sh"), "start"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    env = {}
    for line in out.splitlines():
        key, value = line.removeprefix("export ").split("=", 1)
        env[key] = shlex.split(value)[0]
    return env["EDGEPROF_TEST_PG_URL"], env["EDGEPROF_TEST_PG_DIR"]


def fresh_pg(server: str) -> str:
    name = f"kill_{uuid.uuid4().hex[:10]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(server).set(database=name).render_as_string(hide_password=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=25)
    ap.add_argument("--samples", type=int, default=40_000)
    ap.add_argument("--pg-url", default=os.environ.get("EDGEPROF_TEST_PG_URL"))
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--json", type=Path, help="Write every trial here.")
    ap.add_argument(
        "--without-transactions",
        action="store_true",
        help="Demonstrate the old behaviour: SQLite steps under the driver's own (auto-committing) DDL.",
    )
    args = ap.parse_args()
    rng = random.Random(args.seed)
    if args.without_transactions:
        os.environ["EDGEPROF_KILL_NO_TXN"] = "1"
    results: dict[str, Any] = {"head": HEAD_VERSION, "samples": args.samples, "label": "synthetic rows"}
    stop_dir = None
    tmp = Path(tempfile.mkdtemp(prefix="edgeprof-kill-"))
    try:
        for backend in args.backends.split(","):
            counter = iter(range(10**6))
            server = ""
            if backend == "postgresql":
                server, stop_dir = pg_server(args.pg_url)

            def new_url(backend: str = backend, server: str = server, counter: Any = counter) -> str:
                if backend == "postgresql":
                    return fresh_pg(server)
                return f"sqlite:///{tmp / f'k{next(counter)}.db'}"

            url = new_url()
            expect = seed(url, args.samples)
            full_s, _ = run_child(url, None)
            trials = []
            for i in range(args.trials):
                url = new_url()
                expect = seed(url, args.samples)
                delay = rng.uniform(0.0, full_s)
                _elapsed, killed = run_child(url, delay)
                try:
                    outcome = check(url, expect)
                except Exception as exc:  # noqa: BLE001 - any failure to open/upgrade is the finding
                    outcome = {"ok": False, "versions_after_kill": [], "error": str(exc).splitlines()[0]}
                trials.append(
                    {"trial": i, "kill_after_s": round(delay, 3), "killed_mid_run": killed, **outcome}
                )
                print(
                    f"{backend} trial {i:2d}: kill at {delay:6.3f}s of {full_s:.2f}s, "
                    f"versions {outcome['versions_after_kill'][-1:] or [0]} -> ok={outcome['ok']}",
                    flush=True,
                )
            n_ok = sum(t["ok"] for t in trials)
            n_mid = sum(t["killed_mid_run"] for t in trials)
            results[backend] = {
                "full_upgrade_s": round(full_s, 3),
                "trials": len(trials),
                "killed_mid_run": n_mid,
                "ok": n_ok,
                "detail": trials,
            }
            print(
                f"{backend}: {n_ok}/{len(trials)} opened and upgraded ({n_mid} killed mid-upgrade; "
                f"full upgrade {full_s:.2f}s)"
            )
    finally:
        if stop_dir:
            script = str(ROOT / "scripts" / "pg_test_server.sh")
            subprocess.run(["bash", script, "stop", stop_dir], check=False)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    failed = any(results[b]["ok"] != results[b]["trials"] for b in args.backends.split(",") if b in results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
