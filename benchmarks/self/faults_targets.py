"""Hostile serving targets against a real, long-running ``edgeprof agent`` (a sibling of faults_queue.py):
for each mode of tests/support/hostile_server.py (drips of ``/v1/models``, ``/props`` and ``/metrics``, a
gzip bomb, malformed and absurd JSON) a plan of two openai configs with ``timeout_s`` is dropped into the
agent's queue, and a good plan after it.

Counted: configs left ``running`` in the agent's database, plans that took longer than their configs'
``timeout_s`` + 10 s each, tracebacks in the agent's log, plans not handled, and whether the agent was
still alive before its SIGTERM and exited 0 on it. The hostile server is SYNTHETIC by design (no real
server misbehaves on purpose); the agent is the real one.

    .venv/bin/python benchmarks/self/faults_targets.py [--out DIR] [--timeout-s 20]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "tests"))

from faults_queue import QueueRig, good_plan  # noqa: E402 - beside this script
from support.hostile_server import MODES, hostile_server  # noqa: E402 - the tests' hostile server


def target_plan(url: str, name: str, timeout_s: int) -> str:
    return (
        f'name = "{name}"\n[matrix]\nrunner = ["openai"]\nconcurrency = [1, 2]\n'
        '[[workload]]\nname = "w"\nprompt = "Once upon a time"\nn_predict = 8\n'
        f"[run]\ntimeout_s = {timeout_s}\n"
        f'[serving]\ntarget = "{url}"\nendpoint = "chat"\nrequests = 2\nwarmup_requests = 1\n'
        "request_timeout_s = 60\n"
    )


def target_trials(out: Path, timeout_s: int, good_model: Path | None) -> dict[str, int]:
    rig = QueueRig(out / "target-trials", settle_s=0.5)
    late = missed = 0
    for mode in MODES:
        with hostile_server(mode) as url:
            name = f"{mode}.toml"
            t0 = time.monotonic()
            handled = rig.drop(name, target_plan(url, mode, timeout_s))
            took = time.monotonic() - t0
        bound_s = 2 * (timeout_s + 10)  # two configs, each within timeout_s (+ 10 s of slack)
        late += took > bound_s
        missed += not handled
        print(f"target {mode:<18} {rig.where(name):<7} in {took:5.1f} s (bound {bound_s} s)", flush=True)
        if good_model is not None:  # the next plan runs
            missed += not rig.drop(f"after-{mode}.toml", good_plan(good_model, f"after-{mode}"))
    alive = rig.proc.poll() is None
    rc = rig.stop()
    log = rig.text()
    with sqlite3.connect(out / "target-trials" / "queue.db") as conn:
        running = conn.execute("SELECT count(*) FROM run WHERE status = 'running'").fetchone()[0]
        statuses = dict(conn.execute("SELECT status, count(*) FROM run GROUP BY status").fetchall())
    print(f"targets: run statuses {statuses}; alive before SIGTERM: {alive}; exit {rc}")
    return {
        "target_plans": len(MODES),
        "target_running": int(running),
        "target_late": late,
        "target_missed": missed,
        "target_tracebacks": log.count("Traceback"),
        "target_agent_died": int(not alive or rc != 0),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--timeout-s", type=int, default=20)
    ap.add_argument("--with-model", action="store_true", help="a good tiny-model plan after each hostile one")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="edgeprof-targets-"))
    out.mkdir(parents=True, exist_ok=True)
    model = None
    if args.with_model:
        from edgeprof.gguf import build_demo_models

        model = build_demo_models(out / "models", "tiny")["Q4_K_M"]
    total = target_trials(out, args.timeout_s, model)
    print(
        f"\n{total['target_plans']} hostile targets under a real agent: {total['target_running']} runs left "
        f"running, {total['target_late']} past timeout_s + 10 s, {total['target_missed']} not handled, "
        f"{total['target_tracebacks']} tracebacks, agent died or exited non-zero: {total['target_agent_died']}"
    )
    return 1 if sum(v for k, v in total.items() if k != "target_plans") else 0


if __name__ == "__main__":
    sys.exit(main())
