"""Observer effect of edgeprof's own telemetry, measured interleaved on the demo models.

For each round and quant, the same config runs twice in random order: once with every available collector
sampling at 10 Hz, once with telemetry off. Reported:
  * decode t/s with collectors ÷ without (median of per-round ratios; target >= 0.99),
  * the sampler thread's CPU as % of one core (target <= 2 %),
  * the achieved sampling interval p99 vs the 100 ms target (target within 20 %).

    .venv/bin/python benchmarks/self/observer.py [--rounds 5] [--models-dir /tmp/edgeprof-demo]
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from edgeprof.gguf import build_demo_models
from edgeprof.plan import Collect, Cooldown, parse_plan
from edgeprof.report import build_rows
from edgeprof.stats import median
from edgeprof.storage.db import new_session, open_engine
from edgeprof.sweep import Telemetry, run_plan

OUT_DIR = Path(__file__).resolve().parents[1] / "out"  # benchmarks/out, git-ignored

PLAN = """
name = "observer-{tag}"
[matrix]
models = ["{model}"]
ctx = [512]
threads = [2]
[[workload]]
name = "w"
prompt_tokens = 128
n_predict = 129
[repeat]
warmup = 1
steady = 5
"""


def one(model: Path, with_telemetry: bool, tmp: Path, tag: str) -> tuple[float | None, dict | None]:
    engine = open_engine(tmp / f"{tag}.db")
    plan = parse_plan(PLAN.format(model=model, tag=tag), str(tmp / f"{tag}.toml"), tmp)
    holder: dict[str, Telemetry] = {}

    def factory(sweep_id: int) -> Telemetry:
        holder["t"] = Telemetry(engine, sweep_id, Collect(interval_ms=100, idle_s=0.0), Cooldown())
        return holder["t"]

    outcome = run_plan(
        engine, plan, new_sweep=True, out=io.StringIO(), telemetry=factory if with_telemetry else None
    )
    with new_session(engine) as s:
        row = build_rows(s, outcome.sweep_id)[0]
    stats = None
    if with_telemetry:
        stats = holder["t"].sampler.stats.summary(0.1)
        stats["collectors"] = [st["name"] for st in holder["t"].sampler.states_summary() if st["ok"]]
    engine.dispose()
    return row["tg_tps_median"], stats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--models-dir", type=Path, default=Path(tempfile.gettempdir()) / "edgeprof-demo")
    args = ap.parse_args()
    paths = build_demo_models(args.models_dir, "small")
    quants = ["Q8_0", "Q5_K_M", "Q4_K_M"]
    rng = random.Random(1)
    ratios: dict[str, list[float]] = {q: [] for q in quants}
    cpu: list[float] = []
    p99: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for r in range(args.rounds):
            for q in quants:
                order = [True, False]
                rng.shuffle(order)
                got: dict[bool, float | None] = {}
                for on in order:
                    tg, stats = one(paths[q], on, tmp, f"r{r}-{q}-{'on' if on else 'off'}")
                    got[on] = tg
                    if stats:
                        if stats["cpu_pct_of_one_core"] is not None:
                            cpu.append(stats["cpu_pct_of_one_core"])
                        if stats["interval_p99_ms"] is not None:
                            p99.append(stats["interval_p99_ms"])
                        collectors = stats["collectors"]
                if got[True] and got[False]:
                    ratios[q].append(got[True] / got[False])
                print(f"round {r + 1} {q}: tg on {got[True]:.1f}  off {got[False]:.1f} t/s", flush=True)
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "rounds": args.rounds,
        "collectors": collectors,
        "tg_ratio_on_off_median": {q: median(v) for q, v in ratios.items()},
        "tg_ratio_on_off_all": ratios,
        "sampler_cpu_pct_of_one_core_median": median(cpu),
        "sampler_cpu_pct_of_one_core_max": max(cpu) if cpu else None,
        "interval_p99_ms_median": median(p99),
        "interval_p99_ms_max": max(p99) if p99 else None,
        "target_interval_ms": 100.0,
    }
    out = OUT_DIR
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"observer-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "tg_ratio_on_off_all"}, indent=2))
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
