"""The fleet's job queue at scale: B simulated boards claim J jobs from one PostgreSQL through the real
queue code (agent/fleet/queue.py: register, claim under a lease, heartbeat, finish), with a stand-in
executor instead of llama.cpp: a job "runs" for a random 20-120 ms while its board heartbeats. Every row is
SYNTHETIC (boards ``sim-NNN``, plans ``synthetic-queue``).

    .venv/bin/python benchmarks/self/fleet_queue.py --boards 200 --jobs 2000 [--kill-fraction 0.1] [--pg-url URL]

Boards are threads in P worker processes, each process one pool of ``--pool`` connections (10 x 16 by
default: the test server allows 200 connections, so 200 boards cannot each hold one; a claim's latency
includes the wait for a pooled connection). The jobs are 10 % ``--each`` (one per board) and 90 % ``--any``
over four selectors. With ``--kill-fraction`` that share of the boards dies mid-job once half the jobs are
done (no more heartbeats, no finish: a kill -9) and comes back two leases later, as a rebooted board does:
its ``--any`` jobs were re-queued after the lease and ran elsewhere, its ``--each`` jobs waited for it.

Checked, not only timed: no job is claimed by two boards while its lease holds (the claims log), every job
ends ``done`` exactly once (a result row per job, under a unique key), none is lost. Reported: claim
latency p50/p99 (nearest rank) of claims that got a job and of claims that found none, and the database's
load over the run (transactions, rows touched, buffer reads, CPU seconds of the postgres processes).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import random
import shlex
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[2]

from edgeprof.fleet.jobfiles import SubmittedPlan  # noqa: E402
from edgeprof.fleet.queue import claim, finish, heartbeat, register_board, release_own, submit  # noqa: E402
from edgeprof.storage.migrations import upgrade  # noqa: E402

BOARD_KINDS = (
    ("orin-nano", "6.1", 7620),
    ("agx-orin", "6.1", 62800),
    ("orin-nx", "6.0", 15600),
    ("rk3588", None, 16000),
)
SELECTORS = ("ram_mb>=7000", "board=orin-nano", "jetpack>=6.1", "label:rack=1")


def nearest_rank(values: list[float], q: float) -> float | None:
    s = sorted(values)
    return s[max(0, math.ceil(q * len(s)) - 1)] if s else None


def board_facts(i: int) -> tuple[dict[str, Any], dict[str, str]]:
    board, jetpack, ram = BOARD_KINDS[i % len(BOARD_KINDS)]
    facts = {
        "name": f"sim-{i:03d}",
        "board": board,
        "jetpack": jetpack,
        "ram_mb": ram,
        "cores": 6,
        "fingerprint": f"synthetic-{i}",
    }
    return facts, {"rack": str(i % 3)}


def board_loop(url: str, board_id: int, lease_s: float, stop_at: dict[str, Any], log: list[Any]) -> None:
    """One simulated board: claim, "run" with heartbeats, finish; dies (walks away) when told to."""
    engine = stop_at["engine"]
    rng = random.Random(board_id)
    idle_s = 0.05
    while not stop_at["all_done"].is_set():
        t0 = time.perf_counter()
        job = claim(engine, board_id, lease_s)
        log.append(("claim", board_id, job.id if job else None, time.perf_counter() - t0, time.time()))
        if job is None:
            stop_at["all_done"].wait(idle_s)
            continue
        end = time.monotonic() + rng.uniform(0.02, 0.12)
        while time.monotonic() < end:
            if board_id in stop_at["doomed"] and stop_at["kill"].is_set():
                # kill -9: no heartbeat, no finish; the board comes back after two leases (a reboot) and
                # puts back what it held, as a restarted agent does (its --each jobs wait for it)
                log.append(("died", board_id, job.id, 0.0, time.time()))
                stop_at["doomed"].discard(board_id)
                time.sleep(2 * lease_s)
                release_own(engine, board_id, "the board restarted mid-job")
                break
            time.sleep(min(lease_s / 3, max(0.0, end - time.monotonic())))
            heartbeat(engine, board_id, lease_s, job)
        else:
            finish_job(engine, job, board_id, log)


def finish_job(engine: Any, job: Any, board_id: int, log: list[Any]) -> None:
    def record(conn: Any, job_id: int = job.id) -> str:
        # the stand-in for push: a result row per job, unique, in the transaction that marks the job done
        conn.execute(
            text("INSERT INTO bench_result (job_id, board_id) VALUES (:j, :b)"), {"j": job_id, "b": board_id}
        )
        return f"synthetic-{job_id}"

    ok = finish(engine, job, record)
    log.append(("finish" if ok else "lost", board_id, job.id, 0.0, time.time()))


def worker(
    url: str,
    board_ids: list[int],
    lease_s: float,
    pool: int,
    doomed: list[int],
    q: Any,
    kill_evt: Any,
    done_evt: Any,
) -> None:
    engine = create_engine(url, pool_size=pool, max_overflow=0)
    log: list[Any] = []
    stop_at = {"engine": engine, "doomed": set(doomed), "kill": kill_evt, "all_done": done_evt}
    threads = [threading.Thread(target=board_loop, args=(url, b, lease_s, stop_at, log)) for b in board_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    q.put(log)
    engine.dispose()


def pg_load(engine: Any) -> dict[str, float]:
    with engine.connect() as conn:
        row = conn.execute(
            text("""
            SELECT xact_commit + xact_rollback AS xacts, tup_returned + tup_fetched AS rows_read,
                   tup_inserted + tup_updated + tup_deleted AS rows_written, blks_hit + blks_read AS blocks,
                   pg_backend_pid() AS pid
            FROM pg_stat_database WHERE datname = current_database()""")
        ).one()
    return {
        "xacts": row.xacts,
        "rows_read": row.rows_read,
        "rows_written": row.rows_written,
        "blocks": row.blocks,
        "cpu_s": server_cpu_s(row.pid),
    }


def server_cpu_s(backend_pid: int) -> float:
    """CPU seconds of this database's server: its postmaster (the parent of our backend), its live
    processes, and those that already exited (a closed connection's backend is gone; its CPU is in the
    postmaster's cutime/cstime). Other servers on the machine are not counted."""
    try:
        postmaster = psutil.Process(psutil.Process(backend_pid).ppid())
        t = postmaster.cpu_times()
        cpu = t.user + t.system + t.children_user + t.children_system
        for child in postmaster.children(recursive=True):
            c = child.cpu_times()
            cpu += c.user + c.system
    except psutil.Error:
        return float("nan")
    return cpu


def setup(url: str, boards: int, jobs: int) -> list[int]:
    engine = create_engine(url)
    upgrade(engine)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE bench_result (job_id BIGINT PRIMARY KEY, board_id BIGINT NOT NULL)"))
    ids = [register_board(engine, f"sim-{i:03d}", *board_facts(i), 1.0) for i in range(boards)]
    plan = SubmittedPlan("synthetic-queue", "# synthetic\n", "0" * 64, [])
    n_each_rounds = max(1, (jobs // 10) // boards)
    for _ in range(n_each_rounds):
        submit(engine, plan, "cores>=1", "each", None)
    n_any = jobs - n_each_rounds * boards
    for k in range(n_any):
        submit(engine, plan, SELECTORS[k % len(SELECTORS)], "any", None)
    engine.dispose()
    return ids


def run(url: str, args: argparse.Namespace) -> dict[str, Any]:
    ids = setup(url, args.boards, args.jobs)
    rng = random.Random(7)
    doomed = set(rng.sample(ids, int(len(ids) * args.kill_fraction)))
    ctx = mp.get_context("fork")
    q, kill_evt, done_evt = ctx.Queue(), ctx.Event(), ctx.Event()
    chunks = [ids[i :: args.procs] for i in range(args.procs)]
    probe = create_engine(url)
    before = pg_load(probe)
    t0 = time.perf_counter()
    procs = [
        ctx.Process(
            target=worker,
            args=(url, c, args.lease_s, args.pool, [b for b in c if b in doomed], q, kill_evt, done_evt),
        )
        for c in chunks
    ]
    for p in procs:
        p.start()
    while True:
        with probe.connect() as conn:
            counts = dict(conn.execute(text("SELECT state, count(*) FROM fleet_job GROUP BY state")).all())
        ended = counts.get("done", 0) + counts.get("failed", 0)
        if doomed and not kill_evt.is_set() and ended >= args.jobs // 2:
            kill_evt.set()
        if ended >= args.jobs:
            break
        time.sleep(0.2)
    done_evt.set()
    logs = [e for _ in procs for e in q.get()]
    for p in procs:
        p.join()
    wall = time.perf_counter() - t0
    after = pg_load(probe)
    return check(probe, logs, wall, before, after, args, len(doomed))


def check(
    probe: Any,
    logs: list[Any],
    wall: float,
    before: dict[str, float],
    after: dict[str, float],
    args: argparse.Namespace,
    n_doomed: int,
) -> dict[str, Any]:
    with probe.connect() as conn:
        jobs = conn.execute(text("SELECT id, state, attempts FROM fleet_job")).all()
        results = conn.execute(text("SELECT count(*), count(DISTINCT job_id) FROM bench_result")).one()
    got = [e[3] for e in logs if e[0] == "claim" and e[2] is not None]
    empty = [e[3] for e in logs if e[0] == "claim" and e[2] is None]
    claims_per_job: dict[int, int] = {}
    for e in logs:
        if e[0] == "claim" and e[2] is not None:
            claims_per_job[e[2]] = claims_per_job.get(e[2], 0) + 1
    died_jobs = {e[2] for e in logs if e[0] == "died"}
    twice = [j for j, n in claims_per_job.items() if n > 1 and j not in died_jobs]
    load = {k: after[k] - before[k] for k in before}
    return {
        "label": "synthetic boards and jobs",
        "boards": args.boards,
        "jobs": len(jobs),
        "killed_boards": n_doomed,
        "jobs_of_killed_boards": len(died_jobs),
        "wall_s": round(wall, 2),
        "states": {s: sum(1 for j in jobs if j.state == s) for s in {j.state for j in jobs}},
        "claimed_twice_without_a_death": len(twice),
        "result_rows": results[0],
        "distinct_results": results[1],
        "lost_finishes": sum(1 for e in logs if e[0] == "lost"),
        "claims_with_job": len(got),
        "claim_ms_p50": round(1000 * (nearest_rank(got, 0.5) or 0), 2),
        "claim_ms_p99": round(1000 * (nearest_rank(got, 0.99) or 0), 2),
        "empty_claims": len(empty),
        "empty_claim_ms_p50": round(1000 * (nearest_rank(empty, 0.5) or 0), 2),
        "empty_claim_ms_p99": round(1000 * (nearest_rank(empty, 0.99) or 0), 2),
        "db_load": {
            **{k: int(v) for k, v in load.items() if k != "cpu_s"},
            "cpu_s": round(load["cpu_s"], 1),
            "xacts_per_s": round(load["xacts"] / wall),
            "cpu_share": round(load["cpu_s"] / wall, 2),
        },
        "ok": results[0] == results[1] == len(jobs) and not twice and all(j.state == "done" for j in jobs),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--boards", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--kill-fraction", type=float, default=0.0)
    ap.add_argument("--lease-s", type=float, default=2.0)
    ap.add_argument("--procs", type=int, default=10)
    ap.add_argument("--pool", type=int, default=16, help="connections per worker process")
    ap.add_argument("--pg-url", default=os.environ.get("EDGEPROF_TEST_PG_URL"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    server, stop_dir = args.pg_url, None
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
    name = f"queue_{uuid.uuid4().hex[:8]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(server).set(database=name).render_as_string(hide_password=False)
    try:
        result = run(url, args)
        result["loadavg_1m_after"] = os.getloadavg()[0]
        print(json.dumps(result, indent=2))
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
        if stop_dir:
            subprocess.run(
                ["bash", str(ROOT / "scripts" / "pg_test_server.sh"), "stop", stop_dir], check=False
            )
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
