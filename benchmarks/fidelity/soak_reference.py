"""Is a soak's burst-to-sustained drop the device's or edgeprof's? The same decode load under llama-bench.

A soak (``kind = "soak"``) runs one request back to back for ``--duration-s`` and cuts it into windows; its
verdict compares the burst speed (median of the first 3 windows) with the sustained one (median of the last
third). A machine that does not throttle should read about 100 %. This script runs, in alternating order:

- ``edgeprof run`` of a soak plan (demo-small Q4_K_M unless ``--model``; ``--threads``, 64 prompt tokens,
  ``--n-predict`` generated per request, windows of ``--window-s``), and
- ``llama-bench -p 0 -n N -t T -r R`` on the same model, R chosen to last about as long; its reps run back
  to back in one process and are cut into windows of the same length by their cumulative time
  (``samples_ns``),

and prints each run's burst, sustained and sustained / burst, with the same definitions. When llama-bench's
ratio moves as far from 100 % as edgeprof's, the drop is the machine's (a host's turbo budget, a noisy
neighbour), not a cost edgeprof adds.

    python benchmarks/fidelity/soak_reference.py [--rounds 2] [--duration-s 300] [--window-s 10]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import OUT_DIR, log

from edgeprof.gguf import build_demo_models
from edgeprof.verdicts.series import thirds

PLAN = """
name = "soak-reference"
[matrix]
models = [{{ path = "{model}", label = "soak-ref" }}]
ctx = [512]
ngl = [0]
threads = [{threads}]

[[workload]]
name = "soak"
kind = "soak"
prompt_tokens = 64
n_predict = {n_predict}
ignore_eos = true
duration_s = {duration_s}
window_s = {window_s}
"""


def burst_sustained(tps: list[float]) -> dict[str, float | None]:
    """The soak verdict's figures: burst = median of the first 3 windows, sustained = of the last third."""
    if len(tps) < 6:
        return {"burst_tps": None, "sustained_tps": None, "ratio": None}
    burst = statistics.median(tps[:3])
    sustained = statistics.median(thirds(tps)[1])
    return {"burst_tps": burst, "sustained_tps": sustained, "ratio": sustained / burst}


def run_edgeprof(model: Path, opts: argparse.Namespace, work: Path, i: int) -> list[float]:
    plan = work / f"soak-{i}.toml"
    plan.write_text(PLAN.format(model=model, threads=opts.threads, n_predict=opts.n_predict,
                                duration_s=opts.duration_s, window_s=opts.window_s))  # fmt: skip
    db = work / f"soak-{i}.db"
    exe = Path(sys.prefix) / "bin" / "edgeprof"
    proc = subprocess.run([str(exe), "run", str(plan), "--db", str(db)], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"edgeprof run exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}")
    with sqlite3.connect(db) as con:
        rows = con.execute("select tg_tps from soak_window order by idx").fetchall()
    return [float(r[0]) for r in rows if r[0] is not None]


def run_llama_bench(model: Path, opts: argparse.Namespace, reps: int) -> list[float]:
    exe = Path(sys.prefix) / "bin" / "llama-bench"
    cmd = [str(exe), "-m", str(model), "-p", "0", "-n", str(opts.n_predict), "-t", str(opts.threads),
           "-r", str(reps), "-o", "json"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"llama-bench exited {proc.returncode}")
    (rec,) = json.loads(proc.stdout)
    # reps back to back: each one's window from where its cumulative time ends
    tokens: dict[int, float] = {}
    seconds: dict[int, float] = {}
    t = 0.0
    for ns in rec["samples_ns"]:
        t += ns / 1e9
        w = int(t // opts.window_s)
        tokens[w] = tokens.get(w, 0.0) + opts.n_predict
        seconds[w] = seconds.get(w, 0.0) + ns / 1e9
    full = [w for w in sorted(tokens) if w < int(t // opts.window_s)]  # the last, partial window left out
    return [tokens[w] / seconds[w] for w in full]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=None, help="GGUF (default: demo-small Q4_K_M)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--duration-s", type=float, default=300.0)
    ap.add_argument("--window-s", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n-predict", type=int, default=256)
    opts = ap.parse_args()
    model = opts.model or build_demo_models(OUT_DIR / "demo-small", "small")["Q4_K_M"]
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="soak-ref-") as tmp:
        work = Path(tmp)
        reps = None
        for i in range(opts.rounds):
            order = ["edgeprof", "llama-bench"] if i % 2 == 0 else ["llama-bench", "edgeprof"]
            for tool in order:
                load = os.getloadavg()[0]
                if tool == "edgeprof":
                    tps = run_edgeprof(model, opts, work, i)
                    # llama-bench's reps sized from edgeprof's speed to last about as long
                    reps = reps or max(6, int(opts.duration_s * statistics.median(tps) / opts.n_predict))
                else:
                    if reps is None:  # llama-bench first: a short probe for its speed
                        probe = run_llama_bench(
                            model, argparse.Namespace(**{**vars(opts), "window_s": 1.0}), 20
                        )
                        reps = max(6, int(opts.duration_s * statistics.median(probe) / opts.n_predict))
                    tps = run_llama_bench(model, opts, reps)
                fig = burst_sustained(tps)
                results.append({"round": i, "tool": tool, "load_before": load, "windows_tps": tps, **fig})
                ratio = fig["ratio"]
                log(f"round {i + 1} {tool}: {len(tps)} windows, sustained/burst "
                    f"{'-' if ratio is None else f'{100 * ratio:.1f} %'}")  # fmt: skip
    print(f"sustained / burst, {opts.duration_s:g} s in {opts.window_s:g}-s windows, t={opts.threads}:")
    for r in results:
        spread = min(r["windows_tps"]) / max(r["windows_tps"]) if r["windows_tps"] else None
        ratio = "-" if r["ratio"] is None else f"{100 * r['ratio']:.1f} %"
        worst = "-" if spread is None else f"{100 * spread:.0f} %"
        print(f"  round {r['round'] + 1} {r['tool']:<12} {ratio:>8}   worst/best window {worst}")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = OUT_DIR / f"soak-reference-{stamp}.json"
    out.write_text(json.dumps({"date_utc": stamp, "args": {k: str(v) for k, v in vars(opts).items()},
                               "model": str(model), "results": results}, indent=1))  # fmt: skip
    print(f"raw: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
