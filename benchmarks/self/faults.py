"""Fault injection against the real CLI, for the unattended night's promise (nothing lost, nothing left
`running`): kill -9 of `edgeprof run` at random moments, and two concurrent writers of one plan, each
followed by a resume; then the four counters that must stay at zero.

    .venv/bin/python benchmarks/self/faults.py [--kills 20] [--pairs 10] [--seed 1] [--out DIR] [--queue-only]

Bounded: the tiny demo models (built once into DIR), 4 configs per plan, no telemetry; about 5 minutes on a
2-core VM. Prints one line per trial and the totals:

- runs left `running` after resume          (must be 0)
- configs measured twice                    (0: a spec with two `ok` runs in one sweep)
- finished configs lost                     (0: an `ok` run present before the resume, gone or changed after)
- integrity_check failures                  (0)

and, beside them, how many workers outlived a killed `run` and how often the second writer was refused.

Then the queue cases under a real agent (benchmarks/self/faults_queue.py: half-written, unarchivable and
hostile plans), with three more counters that must stay at zero: plans lost, spins, tracebacks.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLAN = """
name = "faults"
[matrix]
models = [{{ path = "{a}", label = "q8" }}, {{ path = "{b}", label = "q4" }}]
ctx = [256, 512]
threads = [1]
[[workload]]
name = "w"
prompt_tokens = 32
n_predict = 16
[repeat]
cold = 1
warmup = 1
steady = 2
[run]
timeout_s = 120
cold_cache = "keep"
"""


def edgeprof_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "edgeprof", *args]


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("EDGEPROF_TEST_FAULT")}
    e.pop("NOTIFY_SOCKET", None)
    return e


def snapshot(db: Path) -> dict[int, tuple[str, str, int]]:
    """ok runs: id -> (sweep spec, status, number of measurements)."""
    if not db.exists():
        return {}
    with sqlite3.connect(db, timeout=30) as conn:
        try:
            rows = conn.execute(
                "SELECT r.id, r.sweep_id || ':' || r.spec_id, r.status, "
                "(SELECT count(*) FROM measurement m WHERE m.run_id = r.id) FROM run r WHERE r.status = 'ok'"
            ).fetchall()
        except sqlite3.OperationalError:
            return {}
    return {int(i): (str(s), str(st), int(n)) for i, s, st, n in rows}


def counters(db: Path, before: dict[int, tuple[str, str, int]]) -> dict[str, int]:
    with sqlite3.connect(db, timeout=30) as conn:
        running = conn.execute("SELECT count(*) FROM run WHERE status = 'running'").fetchone()[0]
        running += conn.execute("SELECT count(*) FROM sweep WHERE status = 'running'").fetchone()[0]
        twice = conn.execute(
            "SELECT count(*) FROM (SELECT sweep_id, spec_id FROM run WHERE status = 'ok' "
            "GROUP BY sweep_id, spec_id HAVING count(*) > 1)"
        ).fetchone()[0]
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        reconciled = conn.execute("SELECT count(*) FROM run WHERE status = 'interrupted'").fetchone()[0]
    after = snapshot(db)
    lost = sum(1 for run_id, row in before.items() if after.get(run_id) != row)
    return {
        "running": running,
        "twice": twice,
        "lost": lost,
        "integrity": int(integrity != "ok"),
        "reconciled": reconciled,
    }


def workers_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
                if f"EDGEPROF_PARENT_PID={pid}".encode() in environ:
                    found.append(int(entry))
            except OSError:
                pass
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def resume(plan: Path, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        edgeprof_cmd("run", str(plan), "--db", str(db), "--no-telemetry"),
        capture_output=True, text=True, env=env(), timeout=600,
    )


def kill_trial(i: int, plan: Path, db: Path, rng: random.Random, max_delay_s: float) -> dict[str, int]:
    proc = subprocess.Popen(
        edgeprof_cmd("run", str(plan), "--db", str(db), "--no-telemetry"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env(),
    )
    delay = rng.uniform(0.2, max_delay_s)
    time.sleep(delay)
    workers = workers_of(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    end = time.monotonic() + 10
    while time.monotonic() < end and any(alive(w) for w in workers):
        time.sleep(0.1)
    orphans = sum(1 for w in workers if alive(w))
    for w in workers:  # never leave one behind, even if the mechanism failed
        if alive(w):
            os.kill(w, signal.SIGKILL)
    before = snapshot(db)
    done = resume(plan, db)
    c = counters(db, before) if db.exists() else {"running": 0, "twice": 0, "lost": 0, "integrity": 0}
    c["mid_run"] = int(c.get("reconciled", 0) > 0)
    c["orphans"] = orphans
    c["resume_rc"] = int(done.returncode != 0)
    print(
        f"kill {i:2d}: after {delay:4.1f} s, {len(before)} ok runs before resume, "
        f"resume rc {done.returncode}; "
        f"running {c['running']} twice {c['twice']} lost {c['lost']} integrity {c['integrity']} "
        f"orphans {orphans} reconciled {c['reconciled']}",
        flush=True,
    )
    return c


def pair_trial(i: int, plan: Path, db: Path) -> dict[str, int]:
    a = subprocess.Popen(
        edgeprof_cmd("run", str(plan), "--db", str(db), "--no-telemetry"),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env(),
    )
    b = subprocess.Popen(
        edgeprof_cmd("run", str(plan), "--db", str(db), "--no-telemetry"),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env(),
    )
    _, err_a = a.communicate(timeout=600)
    _, err_b = b.communicate(timeout=600)
    refused = sum(1 for rc in (a.returncode, b.returncode) if rc == 2)
    tracebacks = sum("Traceback" in e for e in (err_a, err_b))
    before = snapshot(db)
    done = resume(plan, db)  # whatever the two left undone; must measure nothing twice
    c = counters(db, before)
    c["refused"] = refused
    c["tracebacks"] = tracebacks
    c["resume_rc"] = int(done.returncode != 0)
    print(
        f"pair {i:2d}: rc {a.returncode}/{b.returncode} (refused {refused}), resume rc {done.returncode}; "
        f"running {c['running']} twice {c['twice']} lost {c['lost']} integrity {c['integrity']}",
        flush=True,
    )
    return c


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-delay-s", type=float, default=8.0, help="kill moments are uniform in [0.2, this]")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--queue-only", action="store_true", help="only the queue cases (no kills, no pairs)")
    ap.add_argument("--no-queue", action="store_true", help="no queue cases")
    args = ap.parse_args()
    if args.queue_only:
        args.kills = args.pairs = 0
    out = args.out or Path(tempfile.mkdtemp(prefix="edgeprof-faults-"))
    out.mkdir(parents=True, exist_ok=True)
    from edgeprof.gguf import build_demo_models

    models = build_demo_models(out / "models", "tiny")
    plan = out / "plan.toml"
    plan.write_text(PLAN.format(a=models["Q8_0"], b=models["Q4_K_M"]))
    rng = random.Random(args.seed)
    total: dict[str, int] = {}
    t0 = time.monotonic()
    for i in range(args.kills):
        db = out / f"kill-{i}.db"
        for k, v in kill_trial(i, plan, db, rng, args.max_delay_s).items():
            total[k] = total.get(k, 0) + v
    for i in range(args.pairs):
        db = out / f"pair-{i}.db"
        for k, v in pair_trial(i, plan, db).items():
            total[k] = total.get(k, 0) + v
    if not args.no_queue:
        from faults_queue import queue_trials  # beside this script

        for k, v in queue_trials(out, models).items():
            total[k] = total.get(k, 0) + v
    elapsed = time.monotonic() - t0
    if not args.no_queue:
        print(f"\nqueue: {total['queue_plans']} plans dropped under a real agent: {total['queue_lost']} lost, "
              f"{total['queue_spins']} spins, {total['queue_tracebacks']} tracebacks, {total['queue_missed']} "
              f"not handled, agent died or exited non-zero: {total['queue_agent_died']}")
    print(f"\n{args.kills} kill -9 trials, {args.pairs} concurrent-writer pairs, {elapsed:.0f} s")
    print(f"runs left running after resume: {total.get('running', 0)}  (runs and sweeps)")
    print(f"configs measured twice:         {total.get('twice', 0)}")
    print(f"finished configs lost:          {total.get('lost', 0)}")
    print(f"integrity_check failures:       {total.get('integrity', 0)}")
    mid = total.get("mid_run", 0)
    print(f"(kills that hit a config mid-run, its run reconciled to interrupted: {mid} of "
          f"{args.kills}; workers outliving a killed run: {total.get('orphans', 0)}; second writer refused: "
          f"{total.get('refused', 0)} of {args.pairs}; tracebacks: {total.get('tracebacks', 0)}; "
          f"failed resumes: {total.get('resume_rc', 0)})")
    zero = ("running", "twice", "lost", "integrity", "queue_lost", "queue_spins", "queue_tracebacks")
    bad = sum(total.get(k, 0) for k in (*zero, "queue_missed", "queue_agent_died"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
