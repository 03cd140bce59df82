#!/usr/bin/env python3
"""How often the recommendation calls one variant faster: on two files that differ in nothing that can
matter (identical tensors, one metadata byte apart, so their sha256 differ) it should (almost) never: at
most the sequential rule's nominal 5 % of sweeps; on F16 against Q4_K_M of the small demo model it should
decide every time; and deciding sequentially should take fewer reps than a fixed plan where the machine
is quiet.

Each round is a fresh sweep through ``edgeprof run`` (telemetry on, as a user runs it; the rivals of the
condition interleaved, agent/sweep/interleave.py), read back with ``edgeprof report --format json``.
A "confident pick" is a condition whose decision is ``faster``; ``no_decision`` (contended or unstable rows)
is counted apart. ``--hogs 2`` runs two CPU hogs (busy loops) beside the sweeps; ``--fixed`` turns the
sequential decision off (``[decide] sequential = false``: exactly ``--steady`` reps). Each sweep's line
carries the load average it ran at.

    nice .venv/bin/python benchmarks/self/interleave_picks.py --hogs 2 --sweeps 20 --pairs identical_tensors
    nice .venv/bin/python benchmarks/self/interleave_picks.py --hogs 2 --sweeps 10 --pairs f16_vs_q4_k_m
    nice .venv/bin/python benchmarks/self/interleave_picks.py --sweeps 3 --pairs f16_vs_q4_k_m [--fixed]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def plan_text(name: str, models: dict[str, Path], steady: int, n_predict: int, fixed: bool = False) -> str:
    entries = ", ".join(f'{{ path = "{p}", label = "{label}", group = "pair" }}' for label, p in models.items())
    return f"""name = "{name}"

[matrix]
models = [{entries}]
ctx = [256]
threads = [1]

[[workload]]
name = "gen"
prompt_tokens = 32
n_predict = {n_predict}

[repeat]
cold = 1
warmup = 1
steady = {steady}

[run]
timeout_s = 300
cold_cache = "keep"

[decide]
sequential = {"false" if fixed else "true"}
"""


def one_sweep(workdir: Path, name: str, models: dict[str, Path], args: argparse.Namespace) -> dict[str, Any]:
    plan = workdir / f"{name}.toml"
    plan.write_text(plan_text(name, models, args.steady, args.n_predict, args.fixed))
    load_before = os.getloadavg()[0]
    db = workdir / f"{name}.db"
    cli = [sys.executable, "-m", "edgeprof"]
    t0 = time.monotonic()
    ran = subprocess.run([*cli, "run", str(plan), "--db", str(db)], capture_output=True, text=True, check=False)
    if ran.returncode != 0:
        raise SystemExit(f"{name}: edgeprof run exited {ran.returncode}:\n{ran.stderr[-2000:]}")
    rows = json.loads(
        subprocess.run(
            [*cli, "report", "--db", str(db), "--format", "json"], capture_output=True, text=True, check=True
        ).stdout
    )
    by = {r["model_label"]: r for r in rows}
    best = next((label for label, r in by.items() if r["recommendation"] == "best"), None)
    # the row measured against the best (or, with no pick, against the tie's leader)
    other = next((r for r in rows if r["tg_ratio_vs_best"] not in (None, 1.0)), None)
    return {
        "decision": rows[0]["recommendation_decision"],
        "best": best,
        "tg_median": {label: r["tg_tps_median"] for label, r in by.items()},
        "ratio": [other.get(k) for k in ("tg_ratio_vs_best", "tg_ratio_vs_best_ci_low", "tg_ratio_vs_best_ci_high")]
        if other
        else None,
        "interference": {label: r["interference_verdict"] for label, r in by.items()},
        "excluded": {label: r["recommendation_excluded"] for label, r in by.items() if r["recommendation_excluded"]},
        "reps": {label: r["tg_tps_n"] for label, r in by.items()},
        "block_pairs": max((r.get("decision_block_pairs") or 0 for r in rows), default=None) or None,
        "stopped": next((r.get("decision_stopped") for r in rows if r.get("decision_stopped")), None),
        "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "seconds": round(time.monotonic() - t0, 1),
    }


def summarise(name: str, results: list[dict[str, Any]]) -> dict[str, Any]:
    decisions = [r["decision"] for r in results]
    medians: dict[str, list[float]] = {}
    for r in results:
        for label, v in r["tg_median"].items():
            if v is not None:
                medians.setdefault(label, []).append(v)
    faster = max(medians, key=lambda label: statistics.median(medians[label])) if medians else None
    return {
        "pair": name,
        "sweeps": len(results),
        "confident_picks": decisions.count("faster"),
        "picks_of": {
            label: sum(1 for r in results if r["decision"] == "faster" and r["best"] == label) for label in medians
        },
        "ties": decisions.count("tie"),
        "open_at_budget": decisions.count("open"),
        "no_decision": decisions.count("no_decision"),
        "faster_by_median_of_medians": faster,
        "median_tg": {label: round(statistics.median(v), 1) for label, v in medians.items()},
        "median_reps_per_rival": statistics.median(n for r in results for n in r["reps"].values() if n),
        "load_1min_range": [min(r["load_1min"][0] for r in results), max(r["load_1min"][1] for r in results)],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweeps", type=int, default=10, help="sweeps per pair (default 10)")
    ap.add_argument("--steady", type=int, default=5, help="steady reps per config (default 5)")
    ap.add_argument("--n-predict", type=int, default=32, help="tokens generated per request (default 32)")
    ap.add_argument("--models", type=Path, default=None, help="folder for the demo models (default: a temp dir)")
    ap.add_argument("--out", type=Path, default=None, help="write every sweep's figures here (JSON)")
    ap.add_argument("--hogs", type=int, default=0, help="CPU hogs (busy loops) to run beside (default 0)")
    ap.add_argument("--fixed", action="store_true", help="exactly --steady reps ([decide] sequential = false)")
    ap.add_argument("--pairs", default="identical_tensors,f16_vs_q4_k_m", help="comma-separated pairs to run")
    args = ap.parse_args()
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
    try:
        return run_pairs(args)
    finally:
        for hog in hogs:  # only the processes started here, by their id
            os.kill(hog.pid, signal.SIGTERM)
            hog.wait()


def run_pairs(args: argparse.Namespace) -> int:
    from edgeprof.gguf import build_demo_models, sha256_file
    from edgeprof.gguf.quantizer import copy_with_metadata

    with tempfile.TemporaryDirectory(prefix="edgeprof-picks-") as tmp:
        work = Path(tmp)
        models_dir = args.models or work / "models"
        demo = build_demo_models(models_dir, "small")
        # two copies of one file whose name differs in its last byte: identical tensors, two sha256
        alpha, beta = (models_dir / f"edgeprof-demo-small-q4_k_m-{c}.gguf" for c in "ab")
        copy_with_metadata(demo["Q4_K_M"], alpha, {"general.name": "edgeprof-demo-small-a"})
        copy_with_metadata(demo["Q4_K_M"], beta, {"general.name": "edgeprof-demo-small-b"})
        assert sha256_file(alpha) != sha256_file(beta), "the twin must be another file"
        every = {
            "identical_tensors": {"alpha": alpha, "beta": beta},
            "f16_vs_q4_k_m": {"f16": demo["F16"], "q4_k_m": demo["Q4_K_M"]},
        }
        pairs = {name: every[name] for name in args.pairs.split(",")}
        report: dict[str, Any] = {"sweeps": {}, "summary": []}
        for name, models in pairs.items():
            results = []
            for i in range(args.sweeps):
                r = one_sweep(work, f"{name}-{i}", models, args)
                results.append(r)
                print(f"{name} {i + 1}/{args.sweeps}: {r['decision']:11s} best={r['best']} ratio={r['ratio']} "
                      f"pairs={r['block_pairs']} stopped={r['stopped']} reps={r['reps']} tg={r['tg_median']} "
                      f"load={r['load_1min']} {r['seconds']} s", flush=True)  # fmt: skip
            report["sweeps"][name] = results
            report["summary"].append(summarise(name, results))
        print(json.dumps(report["summary"], indent=2))
        if args.out is not None:
            args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
