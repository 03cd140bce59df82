#!/usr/bin/env python3
"""Fidelity benchmark: edgeprof's steady-state pp_tps / tg_tps against llama.cpp's own ``llama-bench``.

Both sides run the same llama.cpp (llama-bench is built from the source vendored in the installed
llama-cpp-python's sdist, see ``build_llama_bench.sh``) with the same threads, batch, ubatch, flash-attn and
depth:

* pp: 128 prompt tokens at depth 0 in one batch (llama-bench ``-p 128 -n 0``; edgeprof: the prefill of a
  128-token prompt).
* tg: 64 single-token decode steps at depth 128..191 (llama-bench ``-p 0 -n 64 -d 128``; edgeprof: the 64
  decode steps after a 128-token prompt, ``n_predict = 65`` since the first token comes from the prefill).

edgeprof's context is sized like llama-bench's (which sets n_ctx = p + n + d, padded by llama.cpp to a
multiple of 256): with flash-attn off, decode at a fixed depth gets slower as n_ctx grows, so comparing
edgeprof at ctx 512 with llama-bench (effectively ctx 256) would measure that, not edgeprof (``--ctx 512``
shows it).

For each quant and round, llama-bench runs before and after each edgeprof run (edgeprof with
``--no-telemetry``, the measurement alone, and with its default telemetry, the variants' order alternating);
each edgeprof run is compared with the mean of its two llama-bench neighbours. Figures: the median over rounds
of that paired ratio for each side's median rep and for each side's fastest rep, and the fastest-rep ratio
over the *stable* rounds only (the two neighbours agree within ``--stable``: the host, which flips between a
fast and a slow state for seconds at a time, stayed in one state around the edgeprof run).

Usage (from the repository root, with the venv active)::

    benchmarks/fidelity/build_llama_bench.sh   # once; prints the llama-bench path
    python benchmarks/fidelity/fidelity.py     # ~3 min on 2 cores with the defaults (5 rounds x 10 reps)

Results are printed as a table and written to ``benchmarks/out/fidelity-<date>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bracketing import bracketed
from common import OUT_DIR, REPO, built_tool, log

QUANTS = ("q8_0", "q5_k_m", "q4_k_m")


# --------------------------------------------------------------------------------------------- helpers


def pad256(n: int) -> int:
    """llama.cpp rounds n_ctx up to a multiple of 256."""
    return (n + 255) // 256 * 256


def median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def find_llama_bench(explicit: str | None) -> Path:
    if explicit:
        path = Path(explicit)
        if not os.access(path, os.X_OK):
            sys.exit(f"llama-bench not executable: {path}")
        return path
    found = built_tool("llama-bench")
    if found:
        return found
    on_path = shutil.which("llama-bench")
    if on_path:
        log(f"WARNING: using llama-bench from PATH ({on_path}); it may not be the llama.cpp edgeprof runs")
        return Path(on_path)
    sys.exit(
        "llama-bench not found: run benchmarks/fidelity/build_llama_bench.sh first (or pass --llama-bench)"
    )


def edgeprof_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("edgeprof")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("edgeprof")
    if found:
        return [found]
    return [sys.executable, "-m", "edgeprof"]


def ensure_models(models_dir: Path, quants: list[str]) -> dict[str, Path]:
    paths = {q: models_dir / f"edgeprof-demo-small-{q}.gguf" for q in quants}
    missing = [q for q, p in paths.items() if not p.exists()]
    if missing:
        log(f"building demo models into {models_dir} (missing: {', '.join(missing)})")
        subprocess.run(
            [*edgeprof_cmd(), "models", "demo", "--size", "small", "--out", str(models_dir)],
            check=True,
            cwd=REPO,
        )
    for p in paths.values():
        if not p.exists():
            sys.exit(f"demo model missing after build: {p}")
    return paths


def fa_value(llama_bench: Path, fa: str) -> str:
    """``-fa`` takes on/off/auto in newer llama-bench, 0/1 in older ones."""
    try:
        helptext = subprocess.run(
            [str(llama_bench), "--help"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        helptext = ""
    if "on|off|auto" in helptext:
        return fa
    return {"off": "0", "on": "1"}.get(fa, fa)


# ---------------------------------------------------------------------------------------- llama-bench


def run_llama_bench(llama_bench: Path, model: Path, args: argparse.Namespace, kind: str, fa: str) -> dict:
    common = [
        "-m", str(model),
        "-t", str(args.threads),
        "-b", str(args.batch),
        "-ub", str(args.ubatch),
        "-fa", fa,
        "-ngl", "0",
        "-r", str(args.reps),
        "-o", "json",
    ]  # fmt: skip
    if kind == "pp":
        cmd = [str(llama_bench), *common, "-p", str(args.pp), "-n", "0"]
    else:
        cmd = [str(llama_bench), *common, "-p", "0", "-n", str(args.tg), "-d", str(args.depth)]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"llama-bench failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    tests = json.loads(proc.stdout)
    if len(tests) != 1:
        raise RuntimeError(f"expected one llama-bench test, got {len(tests)}")
    t = tests[0]
    samples = [float(x) for x in t["samples_ts"]]
    return {
        "cmd": cmd,
        "samples_ts": samples,
        "median_ts": statistics.median(samples),
        "max_ts": max(samples),
        "avg_ts": float(t["avg_ts"]),
        "n_prompt": t.get("n_prompt"),
        "n_gen": t.get("n_gen"),
        "n_depth": t.get("n_depth"),
        "build_commit": t.get("build_commit"),
        "build_number": t.get("build_number"),
        "cpu_info": t.get("cpu_info"),
        "model_type": t.get("model_type"),
        "n_ctx_note": "llama-bench sets n_ctx = n_prompt + n_gen + n_depth",
        "wall_s": wall,
    }


# ------------------------------------------------------------------------------------------- edgeprof

PLAN_TEMPLATE = """\
# written by benchmarks/fidelity/fidelity.py
name = "fidelity-{quant}"

[matrix]
models = [{{ path = "{model}", label = "fidelity-{quant}" }}]
ctx = [{ctx}]
ngl = [0]
threads = [{threads}]
n_batch = [{batch}]
n_ubatch = [{ubatch}]
flash_attn = ["{fa}"]

[[workload]]
name = "fidelity-pp{pp}-tg{tg}"
prompt_tokens = {pp}
n_predict = {n_predict}

[repeat]
cold = 1
warmup = 1
steady = {reps}

[run]
timeout_s = {timeout}
cold_cache = "keep"
"""


def run_edgeprof(
    model: Path, quant: str, args: argparse.Namespace, workdir: Path, tag: str, extra: list[str]
) -> dict:
    plan = workdir / f"plan-{tag}.toml"
    db = workdir / f"edgeprof-{tag}.db"
    plan.write_text(
        PLAN_TEMPLATE.format(
            quant=quant,
            model=str(model),
            ctx=args.ctx,
            threads=args.threads,
            batch=args.batch,
            ubatch=args.ubatch,
            fa=args.fa,
            pp=args.pp,
            tg=args.tg,
            n_predict=args.tg + 1,  # the first token comes from the prefill; then tg decode steps
            reps=args.reps,
            timeout=int(args.timeout),
        )
    )
    t0 = time.monotonic()
    proc = subprocess.run(
        [*edgeprof_cmd(), "run", str(plan), "--db", str(db), "--new", *extra, *args.edgeprof_arg],
        capture_output=True,
        text=True,
        timeout=args.timeout * 2,
        cwd=REPO,
    )
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(
            f"edgeprof run failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
    rep = subprocess.run(
        [*edgeprof_cmd(), "report", "--db", str(db), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=True,
    )
    rows = json.loads(rep.stdout)
    if len(rows) != 1 or rows[0]["status"] != "ok":
        raise RuntimeError(f"edgeprof report: unexpected rows {rows}")
    row = rows[0]
    if row["n_prompt"] != args.pp:
        raise RuntimeError(f"edgeprof prompt is {row['n_prompt']} tokens, expected {args.pp}")
    keep = (
        "pp_tps_median", "pp_tps_min", "pp_tps_max", "pp_tps_n",
        "tg_tps_median", "tg_tps_min", "tg_tps_max", "tg_tps_n",
        "n_prompt", "n_predict", "ctx", "threads", "n_batch", "n_ubatch", "flash_attn", "quant",
    )  # fmt: skip
    out = {k: row.get(k) for k in keep}
    out["wall_s"] = wall
    if not args.keep_db:
        for suffix in ("", "-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
    return out


# ----------------------------------------------------------------------------------------------- main


def _cpu_times() -> tuple[int, int]:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields), idle


def busy_share(window_s: float = 0.5) -> float | None:
    """Share of all CPUs busy over a short window (other tenants, other sessions); None off Linux."""
    try:
        t0, i0 = _cpu_times()
        time.sleep(window_s)
        t1, i1 = _cpu_times()
    except (OSError, ValueError, IndexError):
        return None
    return 1.0 - (i1 - i0) / (t1 - t0) if t1 > t0 else None


def wait_quiet(max_busy: float, max_wait_s: float) -> tuple[float | None, float]:
    """Wait until the machine is idle enough (busy share <= max_busy) or max_wait_s passed."""
    t0 = time.monotonic()
    busy = busy_share()
    while busy is not None and busy > max_busy and time.monotonic() - t0 < max_wait_s:
        time.sleep(2.0)
        busy = busy_share()
    return busy, time.monotonic() - t0


def machine_facts() -> dict[str, Any]:
    facts: dict[str, Any] = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                facts["cpu_model"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import llama_cpp

        facts["llama_cpp_python"] = getattr(llama_cpp, "__version__", None)
    except Exception:  # noqa: BLE001 - informational only
        pass
    return facts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--llama-bench", help="path of llama-bench (default: benchmarks/out/llama-bench/build-*/bin)"
    )
    ap.add_argument(
        "--models-dir", default="/tmp/demo", help="where the small demo GGUFs are (built if missing)"
    )
    ap.add_argument("--quants", default=",".join(QUANTS), help="comma-separated (default: %(default)s)")
    ap.add_argument(
        "--rounds", type=int, default=5, help="interleaved rounds per quant (default: %(default)s)"
    )
    ap.add_argument(
        "--reps",
        type=int,
        default=10,
        help="llama-bench -r and edgeprof steady reps per round (default: %(default)s; a pp128 rep is "
        "~50 ms, so on a shared machine 3 reps leave single bursts of interference in the median)",
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--ubatch", type=int, default=512)
    ap.add_argument("--fa", default="off", choices=("off", "on", "auto"))
    ap.add_argument("--pp", type=int, default=128, help="prompt tokens (pp test; also tg depth base)")
    ap.add_argument("--tg", type=int, default=64, help="decode steps (tg test)")
    ap.add_argument("--depth", type=int, default=None, help="llama-bench -d for tg (default: --pp)")
    ap.add_argument(
        "--ctx",
        default="auto",
        help="edgeprof ctx; 'auto' (default) matches llama-bench's effective context: llama-bench sizes "
        "n_ctx to p+n+d and llama.cpp pads it to a multiple of 256, and with flash-attn off decode speed at "
        "a fixed depth depends on n_ctx (V is stored transposed with row stride n_ctx)",
    )
    ap.add_argument("--tolerance", type=float, default=0.02, help="pass if |ratio-1| <= this (default: 0.02)")
    ap.add_argument("--timeout", type=float, default=300.0, help="per-command timeout, s")
    ap.add_argument("--out", help="JSON output path (default: benchmarks/out/fidelity-<date>.json)")
    ap.add_argument(
        "--max-busy",
        type=float,
        default=0.15,
        help="before each pair, wait until the CPUs are at most this busy (default: %(default)s)",
    )
    ap.add_argument("--max-wait", type=float, default=20.0, help="longest wait for a quiet machine, s")
    ap.add_argument(
        "--edgeprof-arg",
        action="append",
        default=[],
        help="extra argument for `edgeprof run` (repeatable), e.g. --edgeprof-arg=--no-telemetry",
    )
    ap.add_argument(
        "--telemetry",
        choices=("off", "on", "both"),
        default="both",
        help="edgeprof with --no-telemetry (the measurement alone), with its default telemetry (collectors, "
        "idle baseline, cooldown: what a sweep does), or both in every round (default: %(default)s)",
    )
    ap.add_argument(
        "--stable",
        type=float,
        default=0.04,
        help="a round is stable when the llama-bench runs before and after an edgeprof run agree within "
        "this (fastest reps; default: %(default)s)",
    )
    ap.add_argument("--keep-db", action="store_true", help="keep the temporary edgeprof databases")
    args = ap.parse_args(argv)
    if args.depth is None:
        args.depth = args.pp
    lb_ctx = {"pp": pad256(args.pp), "tg": pad256(args.depth + args.tg)}
    need = args.pp + args.tg + 1
    if args.ctx == "auto":
        args.ctx = pad256(need)
    else:
        args.ctx = int(args.ctx)
    if args.ctx < need:
        sys.exit(f"--ctx {args.ctx} is too small for a {args.pp}-token prompt + {args.tg + 1} tokens")
    if pad256(args.ctx) != lb_ctx["tg"] or pad256(args.ctx) != lb_ctx["pp"]:
        log(
            f"NOTE: edgeprof ctx {pad256(args.ctx)} differs from llama-bench's effective ctx {lb_ctx}; "
            "with flash-attn off this alone shifts tg"
        )
    quants = [q.strip() for q in args.quants.split(",") if q.strip()]

    llama_bench = find_llama_bench(args.llama_bench)
    fa = fa_value(llama_bench, args.fa)
    models = ensure_models(Path(args.models_dir), quants)
    build_info_file = llama_bench.parent.parent / "BUILD_INFO"
    build_info = build_info_file.read_text() if build_info_file.exists() else None
    log(f"llama-bench: {llama_bench}")
    log(f"edgeprof:    {' '.join(edgeprof_cmd())}")

    variants: list[tuple[str, list[str]]] = []
    if args.telemetry in ("off", "both"):
        variants.append(("no-telemetry", ["--no-telemetry"]))
    if args.telemetry in ("on", "both"):
        variants.append(("telemetry", []))

    started = dt.datetime.now()
    t_start = time.monotonic()
    rounds: dict[str, list[dict[str, Any]]] = {q: [] for q in quants}
    workdir = Path(tempfile.mkdtemp(prefix="edgeprof-fidelity-"))
    try:
        for r in range(args.rounds):
            for qi, quant in enumerate(quants):
                model = models[quant]
                # llama-bench brackets every edgeprof run (lb, ep, lb, ep, lb): this host flips between a fast
                # and a slow state for seconds at a time, and a run whose two llama-bench neighbours agree
                # ran in one state; the variants' order alternates per round and quant
                flip = (r + qi) % 2 == 1
                order = variants[::-1] if flip else variants
                rec: dict[str, Any] = {
                    "round": r,
                    "order": " > ".join(n for n, _ in order),
                    "edgeprof_variants": {},
                    "sandwich": {},
                }
                busy, waited = wait_quiet(args.max_busy, args.max_wait)
                rec["busy_before"], rec["waited_s"] = busy, round(waited, 1)
                load0 = os.getloadavg()[0]

                def bench() -> dict[str, Any]:
                    return {
                        "pp": run_llama_bench(llama_bench, model, args, "pp", fa),  # noqa: B023
                        "tg": run_llama_bench(llama_bench, model, args, "tg", fa),  # noqa: B023
                    }

                before = bench()
                rec["llama_bench_pp"], rec["llama_bench_tg"] = before["pp"], before["tg"]
                for name, extra in order:
                    rec["edgeprof_variants"][name] = run_edgeprof(
                        model, quant, args, workdir, f"{quant}-r{r}-{name}", extra
                    )
                    after = bench()
                    rec["sandwich"][name] = {"before": before, "after": after}
                    before = after
                # the first variant under its old key, so fidelity_merge.py reads old and new files alike
                rec["edgeprof"] = rec["edgeprof_variants"][variants[0][0]]
                rec["loadavg_1m_before"] = load0
                rounds[quant].append(rec)
                lb_pp, lb_tg = rec["llama_bench_pp"]["median_ts"], rec["llama_bench_tg"]["median_ts"]
                eps = " ".join(
                    f"{n}: pp {v['pp_tps_median']:.0f} tg {v['tg_tps_median']:.0f}"
                    for n, v in rec["edgeprof_variants"].items()
                )
                log(
                    f"round {r + 1}/{args.rounds} {quant:7s} ({rec['order']}): "
                    f"lb pp {lb_pp:.0f} tg {lb_tg:.0f} | {eps} | busy before "
                    f"{busy if busy is None else round(busy, 2)}"
                )
    finally:
        if not args.keep_db:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"edgeprof databases kept in {workdir}")

    summary = []
    for quant in quants:
        recs = rounds[quant]
        for name, _extra in variants:
            row: dict[str, Any] = {"quant": quant, "variant": name, "model": str(models[quant])}
            for metric in ("pp", "tg"):
                row[metric] = _compare(
                    [x["sandwich"][name] for x in recs],
                    [x["edgeprof_variants"][name] for x in recs],
                    metric,
                    args,
                )
            summary.append(row)

    elapsed = time.monotonic() - t_start
    result = {
        "benchmark": "edgeprof fidelity vs llama-bench",
        "started_at": started.isoformat(timespec="seconds"),
        "elapsed_s": round(elapsed, 1),
        "machine": machine_facts(),
        "llama_bench": {"path": str(llama_bench), "build_info": build_info, "fa_flag": fa},
        "settings": {
            "rounds": args.rounds,
            "reps": args.reps,
            "threads": args.threads,
            "n_batch": args.batch,
            "n_ubatch": args.ubatch,
            "flash_attn": args.fa,
            "pp_tokens": args.pp,
            "tg_tokens": args.tg,
            "tg_depth": args.depth,
            "edgeprof_ctx": args.ctx,
            "llama_bench_effective_ctx": lb_ctx,
            "edgeprof_n_predict": args.tg + 1,
            "tolerance": args.tolerance,
            "max_busy": args.max_busy,
            "edgeprof_args": args.edgeprof_arg,
            "edgeprof_variants": {name: extra for name, extra in variants},
        },
        "summary": summary,
        "rounds": rounds,
    }
    out = Path(args.out) if args.out else OUT_DIR / f"fidelity-{started:%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))

    tol = f"±{args.tolerance * 100:.0f}%"
    print(
        f"\nedgeprof vs llama-bench: pp{args.pp} @ d0, tg{args.tg} @ d{args.depth}; threads={args.threads} "
        f"b={args.batch} ub={args.ubatch} fa={args.fa}; edgeprof ctx={args.ctx} (llama-bench effective "
        f"{lb_ctx['tg']}); {args.rounds} interleaved rounds x {args.reps} reps; tolerance {tol}"
    )
    header = (
        f"{'quant':8s} {'edgeprof':13s} | {'pp lb':>6s} {'pp ep':>6s} {'paired':>7s} {'fastest':>7s} "
        f"{'stable':>11s} | {'tg lb':>6s} {'tg ep':>6s} {'paired':>7s} {'fastest':>7s} {'stable':>11s}"
    )
    print(header)
    print("-" * len(header))
    verdicts: dict[str, dict[str, bool]] = {}
    for row in summary:
        cells = []
        for metric in ("pp", "tg"):
            c = row[metric]
            cells.append(
                f"{c['llama_bench_median']:6.0f} {c['edgeprof_median']:6.0f} "
                f"{_mark(c['paired_ratio_median'], args.tolerance)} "
                f"{_mark(c['paired_fastest_ratio_median'], args.tolerance)} "
                f"{_mark(c['stable_fastest_ratio_median'], args.tolerance)} ({c['stable_rounds']}) "
            )
            v = verdicts.setdefault(row["variant"], {"paired": True, "fastest": True, "stable": True})
            v["paired"] &= _within(c["paired_ratio_median"], args.tolerance)
            v["fastest"] &= _within(c["paired_fastest_ratio_median"], args.tolerance)
            v["stable"] &= _within(c["stable_fastest_ratio_median"], args.tolerance)
        print(f"{row['quant']:8s} {row['variant']:13s} | {cells[0]}| {cells[1]}")
    print(
        "paired = median over rounds of edgeprof / llama-bench (each side's median rep of that round); "
        "fastest = the same for each side's fastest rep of the round (interference only slows a rep down, "
        "so on a shared host this estimates the undisturbed speed); stable (n) = fastest over the n rounds "
        f"whose llama-bench runs before and after agreed within ±{args.stable * 100:.0f} %; "
        "llama-bench = mean of the runs before and after; * = outside the tolerance"
    )
    for name, v in verdicts.items():
        how = (
            "paired medians"
            if v["paired"]
            else "fastest reps"
            if v["fastest"]
            else "fastest reps of stable rounds"
            if v["stable"]
            else None
        )
        print(f"{name}: {'all within ' + tol + ' by the ' + how if how else 'NOT all within ' + tol}")
    print(f"took {elapsed:.0f} s; results: {out}")
    first = verdicts[variants[0][0]]
    return 0 if first["paired"] or first["fastest"] or first["stable"] else 1


def _within(ratio: float | None, tol: float) -> bool:
    return ratio is not None and abs(ratio - 1.0) <= tol


def _mark(ratio: float | None, tol: float) -> str:
    if ratio is None:
        return "     -"
    return f"{ratio:6.3f}" + (" " if _within(ratio, tol) else "*")


def _compare(
    sandwiches: list[dict[str, Any]], eps: list[dict], metric: str, args: argparse.Namespace
) -> dict[str, Any]:
    """llama-bench against one edgeprof variant over the rounds of one quant, for ``pp`` or ``tg``.

    Each round's llama-bench figure is the mean of the runs right before and right after the edgeprof run.
    A round is *stable* when those two agree within ``--stable`` (their fastest reps): the host stayed in
    one state around the edgeprof run.
    """
    before = [s["before"][metric] for s in sandwiches]
    after = [s["after"][metric] for s in sandwiches]
    ep_vals = [x[f"{metric}_tps_median"] for x in eps]
    ep_fast = [x[f"{metric}_tps_max"] for x in eps]
    b = bracketed(
        [(x["median_ts"], x["max_ts"]) for x in before],
        [(x["median_ts"], x["max_ts"]) for x in after],
        ep_vals,
        ep_fast,
        args.stable,
    )
    lb_vals, paired = b["llama_bench_rounds"], b["paired_ratios"]
    lb_med, ep_med = median(lb_vals), median(ep_vals)
    ratio = ep_med / lb_med if lb_med and ep_med else None
    lb_best = max(max(x["max_ts"], y["max_ts"]) for x, y in zip(before, after, strict=True))
    ep_best = max(v for v in ep_fast if v is not None)
    return {
        "llama_bench_median": lb_med,
        "edgeprof_median": ep_med,
        "ratio": ratio,
        "within_tolerance": _within(ratio, args.tolerance),
        "llama_bench_rounds": lb_vals,
        "edgeprof_rounds": ep_vals,
        "llama_bench_best": lb_best,
        "edgeprof_best": ep_best,
        "best_ratio": ep_best / lb_best if lb_best and ep_best else None,
        # per-round paired ratios show whether a gap is systematic or noise
        "paired_ratio_median": b["paired_ratio_median"],
        "paired_ratio_min": min(paired) if paired else None,
        "paired_ratio_max": max(paired) if paired else None,
        **{
            k: b[k]
            for k in (
                "paired_fastest_ratios",
                "paired_fastest_ratio_median",
                "stable_rounds",
                "stable_paired_ratio_median",
                "stable_fastest_ratios",
                "stable_fastest_ratio_median",
            )
        },
    }


if __name__ == "__main__":
    sys.exit(main())
