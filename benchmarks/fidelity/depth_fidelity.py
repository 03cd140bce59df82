#!/usr/bin/env python3
"""Depth benchmark: edgeprof's tg t/s and TTFT against context depth, beside ``llama-bench -d``.

edgeprof: one plan with ``depth = [...]`` at a fixed ctx (default 8192), a ``prompt_tokens`` prompt of P
tokens after the depth fill, then ``tg`` decode steps; tg t/s is the report's steady median. llama-bench:
``-p 0 -n tg -d (depth + P)``, so both decode the same positions (llama-bench sizes its context itself:
n_ctx = d + n, padded to 256). The two tools run interleaved for N rounds, alternating which goes first; the
figures compared are paired per round and depth (llama-bench right before and right after each edgeprof run,
at that depth): the median over rounds of edgeprof / llama-bench, the same for each side's fastest rep, and
the fastest-rep ratio over the rounds whose two llama-bench runs agreed (the host stayed in one state). edgeprof runs with
``--no-telemetry`` (the measurement alone) and with its default telemetry (collectors, idle baseline), each
round. On a shared, noisy machine read the ratios, not the absolute figures.

Usage (repository root)::

    benchmarks/fidelity/build_llama_bench.sh         # once
    edgeprof models demo --size small --out DIR      # once
    python benchmarks/fidelity/depth_fidelity.py --models DIR --llama-bench PATH
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
from pathlib import Path
from typing import Any

from bracketing import bracketed
from common import OUT_DIR, REPO, log

PLAN = """\
# written by benchmarks/fidelity/depth_fidelity.py
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


def run_llama_bench(args: argparse.Namespace, model: Path, depths_in: list[int]) -> dict[int, dict[str, Any]]:
    depths = [d + args.prompt for d in depths_in]
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


def run_edgeprof(
    args: argparse.Namespace,
    model: Path,
    quant: str,
    work: Path,
    tag: str,
    depths: list[int],
    extra: list[str],
) -> dict[int, Any]:
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
            depths=", ".join(map(str, depths)),
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
        [*exe, "run", str(plan), "--db", str(db), "--new", *extra], capture_output=True, text=True,
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
    ap.add_argument("--tg", type=int, default=64, help="decode steps per rep (default: %(default)s)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--ubatch", type=int, default=512)
    ap.add_argument("--fa", default="off", choices=("off", "on"))
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--allow-ctx-beyond-train", action="store_true", help="ctx above the model's trained one")
    ap.add_argument(
        "--telemetry",
        choices=("off", "on", "both"),
        default="both",
        help="edgeprof with --no-telemetry, with its default telemetry, or both (default: %(default)s)",
    )
    ap.add_argument(
        "--stable", type=float, default=0.04, help="llama-bench before/after agreement of a stable round"
    )
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    args.depths = [int(d) for d in args.depths.split(",")]
    variants: list[tuple[str, list[str]]] = []
    if args.telemetry in ("off", "both"):
        variants.append(("no-telemetry", ["--no-telemetry"]))
    if args.telemetry in ("on", "both"):
        variants.append(("telemetry", []))
    results: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "quants": {}}
    with tempfile.TemporaryDirectory(prefix="edgeprof-depth-") as tmp:
        for quant in args.quants.split(","):
            model = Path(args.models) / f"edgeprof-demo-small-{quant}.gguf"
            # one depth at a time, llama-bench before and after each edgeprof run: on a host whose speed
            # flips between states for seconds, a run whose two llama-bench neighbours agree ran in one state
            sandwiches: dict[str, dict[int, list[tuple[dict[str, Any], dict[str, Any]]]]] = {
                n: {d: [] for d in args.depths} for n, _ in variants
            }
            ep_rounds: dict[str, dict[int, list[dict[str, Any]]]] = {
                n: {d: [] for d in args.depths} for n, _ in variants
            }
            for r in range(args.rounds):
                for di, d in enumerate(args.depths):
                    order = variants if (r + di) % 2 == 0 else variants[::-1]
                    before = run_llama_bench(args, model, [d])[d]
                    for name, extra in order:
                        got = run_edgeprof(
                            args, model, quant, Path(tmp), f"{quant}-{r}-{d}-{name}", [d], extra
                        )
                        ep_rounds[name][d].append(got[d])
                        after = run_llama_bench(args, model, [d])[d]
                        sandwiches[name][d].append((before, after))
                        before = after
                    log(
                        f"{quant} round {r + 1}/{args.rounds} depth {d}: lb {before['median_ts']:.1f} "
                        + " ".join(f"{n} {ep_rounds[n][d][-1]['tg_tps_median']:.1f}" for n, _ in variants)
                    )
            rows = []
            for name, _ in variants:
                for d in args.depths:
                    pairs, eps = sandwiches[name][d], ep_rounds[name][d]
                    br = bracketed(
                        [(b["median_ts"], max(b["samples_ts"])) for b, _ in pairs],
                        [(a["median_ts"], max(a["samples_ts"])) for _, a in pairs],
                        [e["tg_tps_median"] for e in eps],
                        [e["tg_tps_max"] for e in eps],
                        args.stable,
                    )
                    rows.append({
                        "variant": name, "depth": d,
                        "edgeprof_tg_tps": statistics.median(x["tg_tps_median"] for x in eps),
                        "llama_bench_tg_tps": statistics.median(br["llama_bench_rounds"]),
                        "paired_ratio_median": br["paired_ratio_median"],
                        "paired_fastest_ratio_median": br["paired_fastest_ratio_median"],
                        "stable_rounds": br["stable_rounds"],
                        "stable_fastest_ratio_median": br["stable_fastest_ratio_median"],
                        "paired_ratios": br["paired_ratios"], "paired_fastest_ratios": br["paired_fastest_ratios"],
                        "stable": br["stable"],
                        "edgeprof_ttft_ms_p50": statistics.median(x["ttft_ms_p50"] for x in eps),
                        "edgeprof_rounds": eps, "llama_bench_sandwiches": pairs,
                    })  # fmt: skip
            results["quants"][quant] = rows
            print(f"\n{quant}: ctx {args.ctx}, prompt {args.prompt}, tg {args.tg}, reps {args.reps}, "
                  f"rounds {args.rounds}, threads {args.threads}, fa {args.fa}")  # fmt: skip
            print(f"{'edgeprof':13s} {'depth':>6} {'edgeprof tg':>12} {'llama-bench':>12} {'paired':>7} "
                  f"{'fastest':>7} {'stable':>11} {'TTFT ms':>8}")  # fmt: skip
            for row in rows:
                st = row["stable_fastest_ratio_median"]
                st_cell = (
                    f"{st:.3f} ({row['stable_rounds']})" if st is not None else f"- ({row['stable_rounds']})"
                )
                print(f"{row['variant']:13s} {row['depth']:>6} {row['edgeprof_tg_tps']:>12.1f} "
                      f"{row['llama_bench_tg_tps']:>12.1f} {row['paired_ratio_median']:>7.3f} "
                      f"{row['paired_fastest_ratio_median']:>7.3f} {st_cell:>11} "
                      f"{row['edgeprof_ttft_ms_p50']:>8.1f}")  # fmt: skip
            print("paired: median over rounds of edgeprof / llama-bench (median reps; llama-bench = mean of the "
                  "runs before and after); fastest: the same for each side's fastest rep; stable (n): fastest "
                  f"over the n rounds whose two llama-bench runs agreed within ±{args.stable * 100:.0f} %")  # fmt: skip
    out = args.out or OUT_DIR / f"depth-fidelity-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    results["host"] = {"cpus": os.cpu_count(), "loadavg": os.getloadavg()}
    out.write_text(json.dumps(results, indent=2))
    print(f"\nwritten {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
