"""What each telemetry collector costs the decode it watches: its CPU per sample, and decode t/s beside it.

Two measurements, per collector that is available on this machine (``edgeprof doctor`` lists them):

1. **CPU per sample**: ``sample()`` called back to back in this process (after one warm-up call), the
   thread's CPU time per call (min and median over ``--calls``), and what that is as a share of one core at
   the plan's default interval (200 ms) and at ``--interval-ms``. The tegrastats collector's own share here
   is parsing: its lines are the real AGX Orin capture in ``tests/fixtures/captures/tegrastats/`` (the
   tegrastats binary's own CPU, on the board, is not edgeprof's and is not measured here).
2. **Decode cost**: the small demo model (Q8_0, threads 1, 5 steady reps of 64 decode steps, ``--n-predict``) run by the real
   sweep with only that collector sampling, against telemetry off, interleaved round by round, the whole
   process (sampler and worker) pinned to one CPU (``--cpu``): the sampler's every wake-up then takes its
   time from the decode, the worst case. The ratio is median over rounds of on ÷ off. The sampler also
   reads its counters once at every rep's end, so short reps raise its CPU: ``--n-predict 513`` gives reps
   of seconds, as real models have.

    python benchmarks/self/collector_cost.py [--rounds 7] [--interval-ms 200] [--cpu 0]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from edgeprof.collectors.registry import build_collectors
from edgeprof.collectors.tegrastats_parse import parse_line, record_to_metrics
from edgeprof.gguf import build_demo_models
from edgeprof.plan import Collect, Cooldown, parse_plan
from edgeprof.report import build_rows
from edgeprof.storage.db import new_session, open_engine
from edgeprof.sweep import Telemetry, run_plan

REPO = Path(__file__).resolve().parents[2]
OUT_DIR = REPO / "benchmarks" / "out"
TEGRASTATS_CAPTURE = REPO / "tests" / "fixtures" / "captures" / "tegrastats"
DEFAULT_INTERVAL_MS = Collect().interval_ms
N_PREDICT = [65]  # --n-predict: the decode steps of a rep + 1 (a rep ends with one boundary reading)

PLAN = """
name = "collector-cost-{tag}"
[matrix]
models = ["{model}"]
ctx = [1024]
threads = [1]
[[workload]]
name = "w"
prompt_tokens = 128
n_predict = {n_predict}
[repeat]
warmup = 1
steady = 5
"""


def _cpu_per_call_us(fn: Any, calls: int) -> dict[str, float]:
    fn()
    per = []
    for _ in range(calls):
        t0 = time.thread_time()
        fn()
        per.append((time.thread_time() - t0) * 1e6)
    return {"min_us": min(per), "median_us": statistics.median(per)}


def _tegrastats_lines() -> list[str]:
    lines: list[str] = []
    for path in sorted(TEGRASTATS_CAPTURE.glob("*orin*")):
        lines += [ln for ln in path.read_text(errors="replace").splitlines() if "RAM " in ln]
    return lines


def cpu_costs(calls: int, interval_ms: int) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for collector in build_collectors(Path("/")):
        ok, why = collector.available()
        if not ok:
            out[collector.name] = {"available": False, "reason": why}
            continue
        out[collector.name] = {"available": True, **_cpu_per_call_us(collector.sample, calls)}
    lines = _tegrastats_lines()
    if lines:
        it = iter(lines * (calls // len(lines) + 2))
        out["tegrastats (parse)"] = {
            "available": True,
            "lines": len(lines),
            **_cpu_per_call_us(lambda: record_to_metrics(parse_line(next(it))), calls),
        }
    for entry in out.values():
        if entry.get("available"):
            entry[f"pct_core_at_{DEFAULT_INTERVAL_MS}ms"] = entry["median_us"] / (DEFAULT_INTERVAL_MS * 10)
            entry[f"pct_core_at_{interval_ms}ms"] = entry["median_us"] / (interval_ms * 10)
    return out


def decode_tps(
    model: Path, collectors: tuple[str, ...] | None, interval_ms: int, tmp: Path, tag: str
) -> tuple[float, float | None]:
    """Steady tg t/s of one sweep, and its sampler thread's CPU as % of one core (sampling and writing);
    ``collectors`` None = telemetry off."""
    engine = open_engine(tmp / f"{tag}.db")
    text = PLAN.format(model=model, tag=tag, n_predict=N_PREDICT[0])
    plan = parse_plan(text, str(tmp / f"{tag}.toml"), tmp)
    made: list[Telemetry] = []

    def factory(sweep_id: int) -> Telemetry:
        collect = Collect(interval_ms=interval_ms, idle_s=0.0, collectors=collectors)
        made.append(Telemetry(engine, sweep_id, collect, Cooldown()))
        return made[-1]

    outcome = run_plan(
        engine, plan, new_sweep=True, out=io.StringIO(), telemetry=factory if collectors is not None else None
    )
    with new_session(engine) as s:
        tps = float(build_rows(s, outcome.sweep_id)[0]["tg_tps_median"])
    engine.dispose()
    cpu = made[0].sampler.stats.summary(interval_ms / 1000.0)["cpu_pct_of_one_core"] if made else None
    return tps, cpu


def decode_costs(names: list[str], rounds: int, interval_ms: int) -> dict[str, dict[str, Any]]:
    model = build_demo_models(Path(tempfile.gettempdir()) / "edgeprof-demo", "small")["Q8_0"]
    variants: list[tuple[str, tuple[str, ...] | None]] = [
        ("off", None),
        *((n, (n,)) for n in names),
        ("all available", tuple(names)),
    ]
    tps: dict[str, list[float]] = {v: [] for v, _ in variants}
    cpu: dict[str, list[float]] = {v: [] for v, _ in variants}
    with tempfile.TemporaryDirectory() as d:
        for r in range(rounds):
            order = variants[r % len(variants) :] + variants[: r % len(variants)]
            for label, cols in order:
                got, pct = decode_tps(model, cols, interval_ms, Path(d), f"r{r}-{len(tps[label])}-{label}")
                tps[label].append(got)
                if pct is not None:
                    cpu[label].append(pct)
            line = ", ".join(f"{k} {v[-1]:.1f}" for k, v in tps.items())
            print(f"round {r + 1}/{rounds}: {line}", flush=True)
    out = {}
    for label, values in tps.items():
        ratios = [a / b for a, b in zip(values, tps["off"], strict=True)]
        out[label] = {
            "tg_tps_median": statistics.median(values),
            "ratio_to_off_median": statistics.median(ratios),
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
            "sampler_cpu_pct_of_one_core_median": statistics.median(cpu[label]) if cpu[label] else None,
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument(
        "--interval-ms", type=int, default=100, help="a second interval to express the CPU share at"
    )
    ap.add_argument("--cpu", type=int, default=0, help="the one CPU sampler and worker share")
    ap.add_argument("--n-predict", type=int, default=65, help="65: 64 decode steps a rep, ~0.2 s here")
    ap.add_argument("--skip-decode", action="store_true")
    args = ap.parse_args()
    N_PREDICT[0] = args.n_predict
    os.sched_setaffinity(0, {args.cpu})  # inherited by the worker processes the sweep starts
    cpu = cpu_costs(args.calls, args.interval_ms)
    for name, entry in cpu.items():
        if entry.get("available"):
            print(
                f"{name:<22} {entry['median_us']:8.1f} us/sample (min {entry['min_us']:.1f}), "
                f"{entry[f'pct_core_at_{DEFAULT_INTERVAL_MS}ms']:.3f} % of a core at {DEFAULT_INTERVAL_MS} ms, "
                f"{entry[f'pct_core_at_{args.interval_ms}ms']:.3f} % at {args.interval_ms} ms"
            )
        else:
            print(f"{name:<22} not available: {entry['reason']}")
    names = [n for n, e in cpu.items() if e.get("available") and "(" not in n]
    decode = {} if args.skip_decode else decode_costs(names, args.rounds, DEFAULT_INTERVAL_MS)
    for label, entry in decode.items():
        sampler = entry["sampler_cpu_pct_of_one_core_median"]
        cpu_text = "-" if sampler is None else f"{sampler:.2f} %"
        print(
            f"decode with {label:<16} {entry['tg_tps_median']:.1f} t/s, ÷ off {entry['ratio_to_off_median']:.4f} "
            f"[{entry['ratio_min']:.4f}-{entry['ratio_max']:.4f}], sampler thread {cpu_text} of a core"
        )
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / f"collector-cost-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}.json"
    path.write_text(
        json.dumps({"args": vars(args), "load": os.getloadavg(), "cpu": cpu, "decode": decode}, indent=1)
    )
    print(f"raw: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
