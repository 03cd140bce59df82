"""A long unattended sweep through the real agent: does it stay up, keep every row, and not grow?

Starts ``edgeprof agent --queue`` on a fresh queue and DB, keeps the queue fed with demo plans (Q8_0, Q5_K_M,
Q4_K_M x two ctx sizes, with a cooldown delay and an idle baseline before each config, collectors at 5 Hz)
plus, now and then, a plan with a missing model, and samples the agent's RSS every 10 s. After
``--minutes`` it sends SIGTERM and prints a summary: runs by status, samples stored, DB size, the agent's RSS
over time, the integrity check.

    .venv/bin/python benchmarks/self/soak.py --minutes 30 [--out benchmarks/out]
"""

from __future__ import annotations

import argparse
import json
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from edgeprof.gguf import build_demo_models

OUT_DIR = Path(__file__).resolve().parents[1] / "out"  # benchmarks/out, git-ignored

PLAN = """
name = "soak-{n}"
[matrix]
models = [
  {{ path = "{q8}", label = "q8_0" }},
  {{ path = "{q5}", label = "q5_k_m" }},
  {{ path = "{q4}", label = "q4_k_m" }},
]
ctx = [512, 1024]
threads = [2]
[[workload]]
name = "soak"
prompt_tokens = 128
n_predict = 128
[repeat]
warmup = 1
steady = 3
[cooldown]
delay_s = 2
[collect]
interval_ms = 200
idle_s = 2
"""


def stored_samples(con: sqlite3.Connection) -> int:
    """Telemetry readings in the DB: the values inside the sample blocks live telemetry writes, plus any rows
    of the one-row-per-reading ``sample`` table of older schemas."""
    tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    n = 0
    if "sample_block" in tables:
        n += con.execute("SELECT coalesce(sum(n_values), 0) FROM sample_block").fetchone()[0]
    if "sample" in tables:
        n += con.execute("SELECT count(*) FROM sample").fetchone()[0]
    return int(n)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--out", type=Path, default=OUT_DIR)
    ap.add_argument("--models-dir", type=Path, default=Path(tempfile.gettempdir()) / "edgeprof-demo")
    args = ap.parse_args()
    paths = build_demo_models(args.models_dir, "small")
    work = Path(tempfile.mkdtemp(prefix="edgeprof-soak-"))
    queue, db = work / "queue", work / "soak.db"
    queue.mkdir()
    agent = subprocess.Popen(
        [sys.executable, "-m", "edgeprof", "agent", "--queue", str(queue), "--db", str(db), "--poll-s", "2"],
        stdout=(work / "agent.out").open("w"),
        stderr=(work / "agent.err").open("w"),
    )
    proc = psutil.Process(agent.pid)
    rss: list[tuple[float, float]] = []
    t0 = time.monotonic()
    n = 0
    try:
        while time.monotonic() - t0 < args.minutes * 60:
            if agent.poll() is not None:
                print(f"agent exited early with {agent.returncode}", file=sys.stderr)
                break
            if not list(queue.glob("*.toml")):
                n += 1
                text = PLAN.format(n=n, q8=paths["Q8_0"], q5=paths["Q5_K_M"], q4=paths["Q4_K_M"])
                if n % 4 == 0:  # a plan that must fail validation and end in failed/
                    text = text.replace(str(paths["Q5_K_M"]), "/nonexistent/model.gguf")
                (queue / f"{n:04d}.toml").write_text(text)
            rss.append((time.monotonic() - t0, proc.memory_info().rss / 2**20))
            time.sleep(10)
    finally:
        if agent.poll() is None:
            agent.send_signal(signal.SIGTERM)
            agent.wait(timeout=300)
    con = sqlite3.connect(db)
    runs = dict(con.execute("SELECT status, count(*) FROM run GROUP BY status").fetchall())
    summary = {
        "minutes": round((time.monotonic() - t0) / 60, 1),
        "agent_exit_code": agent.returncode,
        "plans_queued": n,
        "plans_done": len(list((queue / "done").glob("*.toml"))) if (queue / "done").exists() else 0,
        "plans_failed": len(list((queue / "failed").glob("*.toml"))) if (queue / "failed").exists() else 0,
        "sweeps": con.execute("SELECT count(*) FROM sweep").fetchone()[0],
        "runs_by_status": runs,
        "measurements": con.execute("SELECT count(*) FROM measurement").fetchone()[0],
        "samples": stored_samples(con),
        "db_mb": round(sum(p.stat().st_size for p in work.glob("soak.db*")) / 2**20, 1),
        "integrity_check": con.execute("PRAGMA integrity_check").fetchone()[0],
        "agent_rss_mb": {
            "first": round(rss[0][1], 1) if rss else None,
            "after_5_min": next((round(v, 1) for t, v in rss if t >= 300), None),
            "max": round(max(v for _t, v in rss), 1) if rss else None,
            "last": round(rss[-1][1], 1) if rss else None,
            "series_every_10s": [round(v, 1) for _t, v in rss],
        },
        "tracebacks_in_log": (work / "agent.err").read_text().count("Traceback"),
        "work_dir": str(work),
    }
    con.close()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"soak-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(summary, indent=2))
    short = {k: v for k, v in summary.items() if k != "agent_rss_mb"}
    short["agent_rss_mb"] = {k: v for k, v in summary["agent_rss_mb"].items() if k != "series_every_10s"}
    print(json.dumps(short, indent=2))
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
