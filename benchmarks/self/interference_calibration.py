"""Calibrate the interference verdict on this machine: how often it says ``contended`` when nothing else runs,
and when one or two CPU hogs compete with the benchmark.

Each scenario runs N one-config sweeps of a demo model (telemetry on, so the ``proc_stat`` collector's
counters are read) and counts each sweep's interference verdict:

- ``idle``: nothing started beside the sweep (the machine's own background still runs: say what it was);
- ``hog1`` / ``hog2``: one / two busy-loop processes for the whole sweep;
- ``hog-halfway``: one hog started when the sweep is about halfway through its steady reps.

A verdict worth trusting says ``quiet`` (or ``inconclusive``, with its reason) on ``idle`` and ``contended``
on ``hog2``. The load average before each scenario is printed, since on a shared host "idle" is only as idle
as the neighbours.

    .venv/bin/python benchmarks/self/interference_calibration.py [--sweeps 10] [--models-dir DIR]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from edgeprof.gguf import build_demo_models
from edgeprof.plan import Collect, Cooldown, parse_plan
from edgeprof.report import build_rows
from edgeprof.storage.db import new_session, open_engine
from edgeprof.sweep import Telemetry, run_plan
from edgeprof.verdicts import verdicts_by_run

OUT_DIR = Path(__file__).resolve().parents[1] / "out"  # benchmarks/out, git-ignored
SCENARIOS = ("idle", "hog1", "hog2", "hog-halfway")

PLAN = """
name = "interference-{tag}"
[matrix]
models = ["{model}"]
ctx = [512]
threads = [{threads}]
[[workload]]
name = "w"
prompt_tokens = 32
n_predict = {n_predict}
[repeat]
warmup = 1
steady = {steady}
"""

HOG = "while True:\n    pass\n"


def start_hogs(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(n)]


def stop_hogs(hogs: list[subprocess.Popen[bytes]]) -> None:
    for hog in hogs:
        hog.send_signal(signal.SIGKILL)
    for hog in hogs:
        hog.wait()


def one_sweep(
    model: Path, work: Path, tag: str, args: argparse.Namespace, halfway_s: float | None
) -> tuple[str, str]:
    """One sweep; its interference verdict (``failed: ...`` when the config did not run) and the verdict's
    first reason (what a false alarm was raised on)."""
    engine = open_engine(work / f"{tag}.db")
    text = PLAN.format(model=model, tag=tag, threads=args.threads, n_predict=args.n_predict, steady=args.steady)
    plan = parse_plan(text, str(work / f"{tag}.toml"), work)

    def factory(sweep_id: int) -> Telemetry:
        return Telemetry(engine, sweep_id, Collect(interval_ms=args.interval_ms, idle_s=0.5), Cooldown())

    late: list[subprocess.Popen[bytes]] = []
    timer = None
    if halfway_s is not None:
        timer = threading.Timer(halfway_s, lambda: late.extend(start_hogs(1)))
        timer.start()
    try:
        outcome = run_plan(engine, plan, new_sweep=True, out=io.StringIO(), telemetry=factory)
    finally:
        if timer is not None:
            timer.cancel()
        stop_hogs(late)
    with new_session(engine) as s:
        rows = [r for r in build_rows(s, outcome.sweep_id) if r["status"] == "ok"]
        found = verdicts_by_run(s, [int(r["run_id"]) for r in rows]) if rows else {}
    engine.dispose()
    if not rows:
        return f"failed: {outcome.counts}", ""
    verdict = found.get(int(rows[0]["run_id"]), {}).get("interference")
    reasons = json.loads(verdict.evidence_json).get("reasons", []) if verdict is not None else []
    return str(rows[0].get("interference_verdict")), (reasons[0] if reasons else "")


def sweep_seconds(model: Path, work: Path, args: argparse.Namespace) -> float:
    """How long one sweep takes here (for starting the halfway hog at the right moment)."""
    t0 = time.monotonic()
    one_sweep(model, work, "timing", args, None)
    return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweeps", type=int, default=10, help="sweeps per scenario")
    ap.add_argument("--models-dir", type=Path, default=None, help="demo models (built there if missing)")
    ap.add_argument("--size", default="small", choices=("tiny", "small"), help="demo model size")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n-predict", type=int, default=256, help="tokens per rep (longer reps judge better)")
    ap.add_argument("--steady", type=int, default=5)
    ap.add_argument("--interval-ms", type=int, default=100)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = ap.parse_args()
    scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        ap.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        models_dir = args.models_dir or work / "models"
        model = build_demo_models(models_dir, args.size)["Q4_K_M"]
        # The halfway hog starts after the load and warm-up, about halfway through the steady reps.
        halfway = sweep_seconds(model, work, args) * 0.6
        results: dict[str, dict[str, int]] = {}
        alarms: dict[str, list[str]] = {}
        for scenario in scenarios:
            load1 = os.getloadavg()[0]
            hogs = start_hogs({"hog1": 1, "hog2": 2}.get(scenario, 0))
            try:
                judged = [
                    one_sweep(model, work, f"{scenario}-{i}", args, halfway if scenario == "hog-halfway" else None)
                    for i in range(args.sweeps)
                ]
            finally:
                stop_hogs(hogs)
            verdicts = Counter(v for v, _ in judged)
            results[scenario] = dict(verdicts)
            alarms[scenario] = [why for v, why in judged if v == "contended"]
            print(f"{scenario:12s} load1 before {load1:4.2f}  " + "  ".join(f"{k} {v}" for k, v in sorted(verdicts.items())))
            if scenario == "idle":  # a false alarm: say what it was raised on
                for why in alarms[scenario]:
                    print(f"  contended on idle: {why}")
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    out = OUT_DIR / f"interference-calibration-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"args": vars(args) | {"models_dir": str(args.models_dir)}, "results": results, "contended_reasons": alarms}, indent=2))
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
