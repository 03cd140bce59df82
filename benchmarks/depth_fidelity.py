#!/usr/bin/env python3
"""Depth benchmark (issue 10): edgeprof's tg t/s and TTFT against context depth, beside ``llama-bench -d``.

edgeprof: one plan with ``depth = [...]`` at a fixed ctx (default 8192), a ``prompt_tokens`` prompt of P
tokens after the depth fill, then ``tg`` decode steps; tg t/s is the report's steady median. llama-bench:
``-p 0 -n tg -d (depth + P)``, so both decode the same positions (llama-bench sizes its context itself:
n_ctx = d + n, padded to 256). The two tools run interleaved for N rounds, alternating which goes first; the
figure compared is the median over rounds, and the ratio edgeprof / llama-bench per depth. On a shared, noisy
machine read the ratios, not the absolute figures.

Usage (repository root)::

    benchmarks/build_llama_bench.sh                  # once
    edgeprof models demo --size small --out DIR      # once
    python benchmarks/depth_fidelity.py --models DIR --llama-bench PATH
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

PLAN = """\
# written by benchmarks/depth_fidelity.py
name = "depth-fidelity-{quant}"

[matrix]
models = [{{ path = "{model}", label = "depth-{quant}" }}]
ctx = [{ctx}]
ngl = [0]
threads = [{threads}]
n_batch = [{batch}]
n_ubatch = [{ubatch}]
flash_attn = ["{fa}"]
depth = [{depths}]

[[workload]]
name = "depth-p{prompt}-tg{tg}"
prompt_tokens = {prompt}
n_predict = {n_predict}

[repeat]
cold = 1
warmup = 1
steady = {reps}

[run]
timeout_s = {timeout}
cold_cache = "keep"
{extra_run}
"""


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_llama_bench(args: argparse.Namespace, model: Path) -> dict[int, dict[str, Any]]:
    depths = [d + args.prompt for d in args.depths]
    cmd = [
        str(args.llama_bench), "-m", str(model), "-t", str(args.threads), "-b", str(args.batch),
        "-ub", str(args.ubatch), "-fa", "1" if args.fa == "on" else "0", "-ngl", "0", "-r", str(args.reps),
        "-p", "0", "-n", str(args.tg), "-d", ",".join(map(str, depths)), "-o", "json",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"llama-bench failed: {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    out: dict[int, dict[str, Any]] = {}
    for t in json.loads(proc.stdout):
        samples = [float(x) for x in t["samples_ts"]]
        out[int(t["n_depth"]) - args.prompt] = {
            "median_ts": statistics.median(samples),
            "samples_ts": samples,
            "n_depth": t["n_depth"],
        }
    return out


def run_edgeprof(args: argparse.Namespace, model: Path, quant: str, work: Path, tag: str) -> dict[int, Any]:
    plan = work / f"plan-{tag}.toml"
    db = work / f"db-{tag}.db"
    plan.write_text(
        PLAN.format(
            quant=quant,
            model=model,
            ctx=args.ctx,
            threads=args.threads,
            batch=args.batch,
            ubatch=args.ubatch,
            fa=args.fa,
            depths=", ".join(map(str, args.depths)),
            prompt=args.prompt,
            tg=args.tg,
            n_predict=args.tg + 1,  # the first token comes from the prefill
            reps=args.reps,
            timeout=int(args.timeout),
            extra_run="allow_ctx_beyond_train = true" if args.allow_ctx_beyond_train else "",
        )
    )
    exe = [sys.executable, "-m", "edgeprof"]
    proc = subprocess.run(
        [*exe, "run", str(plan), "--db", str(db), "--new"], capture_output=True, text=True,
        timeout=args.timeout * 3, cwd=REPO,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"edgeprof run failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    rep = subprocess.run(
        [*exe, "report", "--db", str(db), "--format", "json"], capture_output=True, text=True, timeout=120,
        cwd=REPO, check=True,
    )  # fmt: skip
    out: dict[int, Any] = {}
    for row in json.loads(rep.stdout):
        if row["status"] != "ok":
            raise RuntimeError(f"edgeprof row not ok: {row['status']}: {row['reason']}")
        keep = ("tg_tps_median", "tg_tps_min", "tg_tps_max", "tg_tps_n", "ttft_ms_p50", "kv_used_cells",
                "kv_cache_mib", "n_ctx_effective", "swa_full", "tokens_out_median")  # fmt: skip
        out[int(row["depth"])] = {k: row.get(k) for k in keep}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", required=True, help="folder with edgeprof-demo-small-*.gguf")
    ap.add_argument("--quants", default="q4_k_m")
    ap.add_argument("--llama-bench", type=Path, required=True)
    ap.add_argument("--depths", default="0,1024,4096")
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--tg", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--ubatch", type=int, default=512)
    ap.add_argument("--fa", default="off", choices=("off", "on"))
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--allow-ctx-beyond-train", action="store_true", help="ctx above the model's trained one")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    args.depths = [int(d) for d in args.depths.split(",")]
    results: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "quants": {}}
    with tempfile.TemporaryDirectory(prefix="edgeprof-depth-") as tmp:
        for quant in args.quants.split(","):
            model = Path(args.models) / f"edgeprof-demo-small-{quant}.gguf"
            lb_rounds: list[dict[int, Any]] = []
            ep_rounds: list[dict[int, Any]] = []
            for r in range(args.rounds):
                order = ("lb", "ep") if r % 2 == 0 else ("ep", "lb")
                for tool in order:
                    log(f"{quant} round {r + 1}/{args.rounds}: {tool}")
                    if tool == "lb":
                        lb_rounds.append(run_llama_bench(args, model))
                    else:
                        ep_rounds.append(run_edgeprof(args, model, quant, Path(tmp), f"{quant}-{r}"))
            rows = []
            for d in args.depths:
                lb = statistics.median(x[d]["median_ts"] for x in lb_rounds)
                ep = statistics.median(x[d]["tg_tps_median"] for x in ep_rounds)
                ttft = statistics.median(x[d]["ttft_ms_p50"] for x in ep_rounds)
                rows.append({"depth": d, "edgeprof_tg_tps": ep, "llama_bench_tg_tps": lb, "ratio": ep / lb,
                             "edgeprof_ttft_ms_p50": ttft,
                             "edgeprof_rounds": [x[d] for x in ep_rounds],
                             "llama_bench_rounds": [x[d] for x in lb_rounds]})  # fmt: skip
            results["quants"][quant] = rows
            print(f"\n{quant}: ctx {args.ctx}, prompt {args.prompt}, tg {args.tg}, reps {args.reps}, "
                  f"rounds {args.rounds}, threads {args.threads}, fa {args.fa}")  # fmt: skip
            print(f"{'depth':>6} {'edgeprof tg':>12} {'llama-bench':>12} {'ratio':>6} {'TTFT ms':>8}")
            for row in rows:
                print(f"{row['depth']:>6} {row['edgeprof_tg_tps']:>12.1f} {row['llama_bench_tg_tps']:>12.1f} "
                      f"{row['ratio']:>6.3f} {row['edgeprof_ttft_ms_p50']:>8.1f}")  # fmt: skip
    out = args.out or HERE / "out" / f"depth-fidelity-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    results["host"] = {"cpus": os.cpu_count(), "loadavg": os.getloadavg()}
    out.write_text(json.dumps(results, indent=2))
    print(f"\nwritten {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
