#!/usr/bin/env python3
"""Lock-step fidelity: edgeprof's pp and tg figures against llama-bench's loops, timed in lock-step across two processes.

``fidelity.py`` compares whole runs a few seconds apart, and this host flips between a fast and a slow
state for seconds at a time, so one round's ratio is ≈ 1.0, ≈ 1.3 or ≈ 0.75 depending on where the flips
fell. Here both sides stay loaded and take turns, one rep each:

* ``edgeprof``: the real worker process (``runners/llama_worker.py``, started by ``run_child``, the parent
  code ``edgeprof run`` uses), the plan ``fidelity.py`` writes, paced through the worker's own
  between-reps handshake (the one the per-rep cooldown uses). Its figures are edgeprof's ``pp_tps`` and
  ``tg_tps``, from llama.cpp's counters;
* ``probe``: ``lockstep_probe.cpp``, llama-bench's pp and tg tests (``-p 128``, ``-n 64 -d 128``: its
  context values, its threadpool with poll 50, ``llama_process`` on an extended batch, a synchronize and
  a random token per step, the wall clock), built against the llama.cpp that ``build_llama_bench.sh``
  built from the same sdist as edgeprof's wheel. By default it computes the depth before each rep, as
  edgeprof's request does (``--probe-depth restore``: llama-bench's restored state instead).

Each edgeprof rep is divided by the probe rep right before it and by the one right after it (≈ 0.1 s on
either side), so a host flip spoils at most the pairs it falls into. ``--control`` runs a second probe in
the edgeprof slot: an A/A check of the method itself. Turns are ``--gap-ms`` apart, so that the side that
just finished has its OpenMP threads asleep before the other starts: without the gap they spin into the
next turn and cost it 2–3.5 % (benchmarks/README.md). Each side's preemptions per rep are counted too.

While one side decodes the other waits on a pipe, so each rep starts with sleeping threads and an L3 that
holds the other process's weights: the same for both sides, and the reason the absolute t/s here are
below llama-bench's back-to-back figures. The ratio is the result.

Usage: python benchmarks/fidelity/lockstep.py [--quants q8_0,q5_k_m,q4_k_m] [--sessions 8] [--pairs 40] [--control]
       [--threads 2] [--gap-ms 20] [--probe-libs auto|llama-bench|wheel] [--models-dir DIR]
       [--json benchmarks/out/lockstep-<date>.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import functools
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import OUT_DIR, log
from fidelity import PLAN_TEMPLATE, ensure_models, pad256
from probe_build import build_probe

METRICS = ("tg", "pp")


class Probe:
    """One lockstep_probe process: loaded once, one rep per call."""

    def __init__(self, exe: Path, model: Path, args: argparse.Namespace) -> None:
        cmd = [str(exe), str(model), str(args.depth), str(args.tg), "1" if args.fa == "on" else "0",
               str(args.threads), str(args.batch), "1" if args.probe_depth == "prefill" else "0"]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"lockstep_probe did not start: {' '.join(cmd)}")

    def rep(self) -> dict[str, float | None]:
        """t/s of one rep: ``tg``/``pp`` by the wall clock (llama-bench's figure), ``*_counter`` by llama.cpp's
        t_eval/t_p_eval counters (edgeprof's clock); pp is None when the probe restored its depth."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        tg, tg_counter, pp, pp_counter = (float(x) for x in self.proc.stdout.readline().split())
        return {"tg": tg, "tg_counter": tg_counter, "pp": pp or None, "pp_counter": pp_counter or None}

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("quit\n")
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@functools.cache
def _sha256(model: Path) -> str:
    return hashlib.sha256(model.read_bytes()).hexdigest()  # once per model, not once per session


def edgeprof_job(model: Path, quant: str, args: argparse.Namespace) -> dict[str, Any]:
    """The worker's job for fidelity.py's plan, from the plan machinery itself, paced between reps."""
    from edgeprof.plan import expand, parse_plan

    text = PLAN_TEMPLATE.format(
        quant=quant, model=str(model), ctx=pad256(args.depth + args.tg), threads=args.threads, batch=args.batch,
        ubatch=args.batch, fa=args.fa, pp=args.depth, tg=args.tg, n_predict=args.tg + 1, reps=args.pairs,
        timeout=int(args.timeout),
    )  # fmt: skip
    (spec,) = expand(parse_plan(text, source="lockstep"), {str(model): _sha256(model)})
    return dataclasses.replace(spec, cooldown_per_rep=True).job()


def paired(side: list[float | None], probe: list[float | None]) -> list[float]:
    """side[k] ran between probe[k] and probe[k + 1]: its ratio to each of them (a pair with a value missing
    is left out). Against one neighbour at a time, not their mean: t/s is skewed towards slow reps, so the
    mean of two is lower than a single rep more often than not, which would favour the side in between."""
    out = []
    for k, s in enumerate(side):
        for neighbour in (probe[k], probe[k + 1]):
            if s and neighbour:
                out.append(s / neighbour)
    return out


def ci95(values: list[float], n_boot: int = 4000) -> tuple[float, float]:
    """Bootstrap 95 % interval of the median (percentile method, fixed seed: the same data, the same interval)."""
    rng = random.Random(12)
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(n_boot))
    return meds[int(0.025 * n_boot)], meds[int(0.975 * n_boot) - 1]


def summarize(
    name: str, side: dict[str, list[float | None]], probe_reps: list[dict[str, float | None]]
) -> dict:
    """``side``: the figures under test per rep and metric; ``probe_reps``: the probe's reps around them.
    The headline ratio is against the probe's wall clock, i.e. against the figure llama-bench reports."""
    out: dict[str, Any] = {"side": name}
    for metric in METRICS:
        probe = [r[metric] for r in probe_reps]
        ratios = paired(side[metric], probe)
        if not ratios:
            continue
        lo, hi = ci95(ratios)
        mine = [v for v in side[metric] if v]
        theirs = [v for v in probe if v]
        out[metric] = {
            "pairs": len(ratios),
            "paired_ratio_median": statistics.median(ratios),
            "paired_ratio_ci95": [lo, hi],
            "fastest_ratio": max(mine) / max(theirs),
            # the same pairs against the probe's counter: what is left when both use edgeprof's clock
            "paired_ratio_vs_probe_counter_median": statistics.median(
                paired(side[metric], [r[f"{metric}_counter"] for r in probe_reps])
            ),
            "side_median_tps": statistics.median(mine),
            "probe_median_tps": statistics.median(theirs),
            "side_tps": side[metric],
            "probe_tps": probe,
            "probe_counter_tps": [r[f"{metric}_counter"] for r in probe_reps],
        }
    return out


def preemptions(pid: int) -> int | None:
    """Involuntary context switches of all of a process's threads so far (None once it is gone). This
    kernel has no schedstats (run-queue wait), so the count of preemptions is what can be seen."""
    total = 0
    try:
        for task in os.scandir(f"/proc/{pid}/task"):
            with open(f"{task.path}/status") as fh:
                for line in fh:
                    if line.startswith("nonvoluntary_ctxt_switches:"):
                        total += int(line.split()[1])
    except OSError:
        return None
    return total


def _delta(after: int | None, before: int | None) -> int | None:
    return after - before if after is not None and before is not None else None


def run_edgeprof_side(exe: Path, model: Path, quant: str, args: argparse.Namespace) -> dict[str, Any]:
    from edgeprof.runners import run_child

    probe = Probe(exe, model, args)
    probe_reps: list[dict[str, float | None]] = []
    worker_pid: list[int] = []
    go_count: list[int | None] = [None]  # the worker's count when it was last told to go
    preempted: dict[str, list[int | None]] = {"edgeprof": [], "probe": []}

    def on_event(event: dict[str, Any]) -> None:
        if event.get("event") == "start" and isinstance(event.get("pid"), int):
            worker_pid.append(event["pid"])

    def probe_rep() -> None:
        before = preemptions(probe.proc.pid)
        probe_reps.append(probe.rep())
        preempted["probe"].append(_delta(preemptions(probe.proc.pid), before))

    def between(_event: dict[str, Any]) -> float:
        now = preemptions(worker_pid[0]) if worker_pid else None
        if go_count[0] is not None:  # the worker's rep that just ended
            preempted["edgeprof"].append(_delta(now, go_count[0]))
        time.sleep(args.gap_ms / 1000.0)
        probe_rep()
        time.sleep(args.gap_ms / 1000.0)
        go_count[0] = preemptions(worker_pid[0]) if worker_pid else None
        return 0.0

    try:
        result = run_child(
            edgeprof_job(model, quant, args), args.timeout, on_event=on_event, between_reps=between
        )
        time.sleep(args.gap_ms / 1000.0)
        probe_rep()  # the bracket after the last edgeprof rep
    finally:
        probe.close()
    if result.status != "ok":
        raise RuntimeError(
            f"edgeprof worker ended {result.status}: {result.reason}\n{result.log_tail[-2000:]}"
        )
    steady = [m for m in result.measurements if m.get("kind") == "steady"]
    if len(steady) != len(probe_reps) - 1:
        raise RuntimeError(f"{len(steady)} edgeprof reps against {len(probe_reps)} probe reps")
    side = {metric: [m.get(f"{metric}_tps") for m in steady] for metric in METRICS}
    out = summarize("edgeprof", side, probe_reps)
    out["preemptions_per_rep"] = preempted  # the worker's last rep ends with the process: not counted
    return out


def run_control_side(exe: Path, model: Path, args: argparse.Namespace) -> dict[str, Any]:
    a, b = Probe(exe, model, args), Probe(exe, model, args)
    try:
        a.rep(), b.rep()  # warm both like the edgeprof side's cold + warm-up reps
        preempted: dict[str, list[int | None]] = {"control": [], "probe": []}

        def rep(p: Probe, into: list[dict[str, float | None]], who: str) -> None:
            before = preemptions(p.proc.pid)
            into.append(p.rep())
            preempted[who].append(_delta(preemptions(p.proc.pid), before))

        probe_reps: list[dict[str, float | None]] = []
        side_reps: list[dict[str, float | None]] = []
        rep(a, probe_reps, "probe")
        for _ in range(args.pairs):
            time.sleep(args.gap_ms / 1000.0)
            rep(b, side_reps, "control")
            time.sleep(args.gap_ms / 1000.0)
            rep(a, probe_reps, "probe")
    finally:
        a.close()
        b.close()
    side = {metric: [r[metric] for r in side_reps] for metric in METRICS}
    out = summarize("control (probe vs probe)", side, probe_reps)
    out["preemptions_per_rep"] = preempted
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quants", default="q8_0,q5_k_m,q4_k_m")
    ap.add_argument("--pairs", type=int, default=40, help="edgeprof reps, each between two probe reps")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--depth", type=int, default=128, help="prompt tokens before the decode (-d)")
    ap.add_argument("--tg", type=int, default=64, help="decode steps per rep (-n)")
    ap.add_argument("--fa", choices=["on", "off"], default="off")
    ap.add_argument("--control", action="store_true", help="also run the probe-vs-probe A/A check")
    ap.add_argument("--probe-depth", choices=["prefill", "restore"], default="prefill",
                    help="the probe computes the depth before each rep (like edgeprof) or restores it (like "
                    "llama-bench -d after its first rep)")  # fmt: skip
    ap.add_argument("--gap-ms", type=float, default=20.0,
                    help="idle time between two turns, so that the side that just finished has its OpenMP "
                    "threads asleep before the other starts (0: they still spin into the next turn)")  # fmt: skip
    ap.add_argument(
        "--sessions",
        type=int,
        default=8,
        help="fresh processes this many times per side (each process has its own few-%% speed)",
    )
    ap.add_argument("--probe-libs", choices=["auto", "llama-bench", "wheel"], default="auto",
                    help="the llama.cpp libraries the probe links: llama-bench's build (auto, where there is "
                    "one) or the wheel's, the very ones edgeprof's worker loads")  # fmt: skip
    ap.add_argument("--models-dir", default=str(Path.home() / ".local/share/edgeprof/models"))
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--json", help="write everything here (default benchmarks/out/lockstep-<time>.json)")
    args = ap.parse_args()

    exe = build_probe("lockstep_probe", args.probe_libs)
    quants = [q.strip() for q in args.quants.split(",") if q.strip()]
    models = ensure_models(Path(args.models_dir), quants)
    t0 = time.monotonic()
    results: list[dict[str, Any]] = []
    for quant in quants:
        for session in range(args.sessions):
            sides = [("edgeprof", lambda q=quant: run_edgeprof_side(exe, models[q], q, args))]
            if args.control:
                sides.append(("control", lambda q=quant: run_control_side(exe, models[q], args)))
            if session % 2:
                sides.reverse()
            for name, fn in sides:
                log(f"{quant}: {name}, session {session + 1}/{args.sessions}, {args.pairs} pairs")
                res = fn()
                res["quant"], res["session"] = quant, session
                results.append(res)
                pre = {k: [x for x in v if x is not None] for k, v in res["preemptions_per_rep"].items()}
                log("  preemptions per rep (median): " + ", ".join(
                    f"{k} {statistics.median(v):g}" for k, v in pre.items() if v))  # fmt: skip
                for metric in METRICS:
                    if metric in res:
                        m = res[metric]
                        log(f"  {metric} paired median {m['paired_ratio_median']:.4f}, vs the probe's counter "
                            f"{m['paired_ratio_vs_probe_counter_median']:.4f}, medians "
                            f"{m['side_median_tps']:.0f} / {m['probe_median_tps']:.0f} t/s")  # fmt: skip

    print(f"\npp{args.depth} and tg{args.tg} @ d{args.depth}, ctx {pad256(args.depth + args.tg)}, threads "
          f"{args.threads}, fa {args.fa}, gap {args.gap_ms:g} ms; each rep / the probe reps before and after it, "
          f"pooled over {args.sessions} sessions")  # fmt: skip
    print(f"{'quant':8s} {'side':26s} {'':3s} {'pairs':>5s} {'paired median':>13s} {'95 % CI':>15s} "
          f"{'session medians':>15s} {'vs counter':>10s}")  # fmt: skip
    pooled = []
    for quant in quants:
        for name in ("edgeprof", "control (probe vs probe)"):
            for metric in METRICS:
                rs = [r[metric] for r in results if r["quant"] == quant and r["side"] == name and metric in r]
                if not rs:
                    continue
                ratios = [x for r in rs for x in paired(r["side_tps"], r["probe_tps"])]
                counter = [x for r in rs for x in paired(r["side_tps"], r["probe_counter_tps"])]
                lo, hi = ci95(ratios)
                sess = [r["paired_ratio_median"] for r in rs]
                row = {
                    "quant": quant, "side": name, "metric": metric, "pairs": len(ratios),
                    "paired_ratio_median": statistics.median(ratios), "paired_ratio_ci95": [lo, hi],
                    "session_median_min": min(sess), "session_median_max": max(sess),
                    "paired_ratio_vs_probe_counter_median": statistics.median(counter) if counter else None,
                }  # fmt: skip
                pooled.append(row)
                vs_counter = (
                    f"{row['paired_ratio_vs_probe_counter_median']:10.4f}" if counter else f"{'-':>10s}"
                )
                print(f"{quant:8s} {name:26s} {metric:3s} {len(ratios):5d} {row['paired_ratio_median']:13.4f} "
                      f"{lo:7.4f}–{hi:.4f} {min(sess):7.3f}–{max(sess):.3f} {vs_counter}")  # fmt: skip
    out = Path(args.json) if args.json else OUT_DIR / f"lockstep-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "benchmark": "edgeprof vs llama-bench's pp and tg loops, lock-step", "settings": vars(args),
        "elapsed_s": round(time.monotonic() - t0, 1), "pooled": pooled, "results": results,
    }, indent=1))  # fmt: skip
    print(f"\nwritten: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
