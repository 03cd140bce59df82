"""``edgeprof bench`` against ``llama-bench`` with the host's noise removed instead of averaged: pinned and not.

Each **condition** fixes where the tools run and what runs beside them:

- ``pinned-quiet``: both tools on the same cores (the first ``threads`` CPUs, ``sched_setaffinity`` as
  ``taskset`` does), nothing else started;
- ``pinned-hog``: the same, with one CPU hog pinned to each remaining core (threads < cores only);
- ``unpinned-quiet``: as users run it, no affinity, nothing else started;
- ``unpinned-hog``: as users run it, beside one unpinned hog.

A hog is a Python busy loop. ``--hog-session own`` (default) starts it in a session of its own, as a build in
another terminal would be (a scheduler autogroup of its own where the kernel has them); ``same`` keeps it in
this script's session.

Within a condition every round runs ``llama-bench``, ``edgeprof bench`` with its default telemetry,
``edgeprof bench --no-telemetry`` and ``edgeprof bench`` with its per-step trace, the order rotated round by
round, all with the same arguments (default ``-p 128 -n 64 -r 5 -fa 0``, ``-t`` from the condition). The
ratios are edgeprof / llama-bench of the same round (each side's ``avg_ts``): median and range over rounds,
and from 6 rounds a distribution-free 95 % interval of the median (``--variants edgeprof --rounds 40`` makes
rounds short and many; whether that can show a ±2 % band on a given host, the A/A below says).

``--variants edgeprof,llama-bench-again`` adds the A/A: llama-bench a second time in the same round, its
ratio to the first what the host's noise alone makes of a ratio; a band narrower than the A/A's interval
cannot be shown on that host by this method (``lockstep.py`` takes turns rep by rep instead).

The traced run (``EDGEPROF_TOKEN_TRACE``: the worker times every decode step, ≈ 3 µs a step outside
``llama_decode``) splits edgeprof's decode step into the wall time in ``llama_decode``, in sampling, between
steps, and llama.cpp's own ``t_eval_ms`` for it (what edgeprof reports), beside llama-bench's time per
token (its rep's ``samples_ns`` / n): a gap then shows as where the time goes, not only as a ratio.

    python benchmarks/fidelity/pinned.py [-m MODEL] [--rounds 5] [--threads 1,2] [--conditions all]
    python benchmarks/fidelity/pinned.py --from-json benchmarks/out/pinned-<time>.json   # the tables again
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import OUT_DIR, edgeprof_command, find_llama_bench, log, median_ci

from edgeprof.stats import nearest_rank

CONDITIONS = ("pinned-quiet", "pinned-hog", "unpinned-quiet", "unpinned-hog")
VARIANTS = ("llama-bench", "edgeprof", "edgeprof-no-telemetry", "edgeprof-traced", "llama-bench-again")
DEFAULT_VARIANTS = VARIANTS[1:4]
HOG = "while True: pass"


def _demo_model() -> str:
    model = OUT_DIR / "demo" / "edgeprof-demo-small-q8_0.gguf"
    if not model.exists():
        subprocess.run(
            [*edgeprof_command(), "models", "demo", "--size", "small", "--out", str(model.parent)],
            check=True,
            capture_output=True,
        )
    return str(model)


def _start_hogs(cpus: list[list[int] | None], own_session: bool) -> list[subprocess.Popen[bytes]]:
    hogs = []
    for mask in cpus:
        proc = subprocess.Popen([sys.executable, "-c", HOG], start_new_session=own_session)
        if mask is not None:
            os.sched_setaffinity(proc.pid, mask)
        hogs.append(proc)
    time.sleep(0.5)  # the scheduler has placed them before the first measurement
    return hogs


def _stop(hogs: list[subprocess.Popen[bytes]]) -> None:
    for proc in hogs:
        proc.kill()
        proc.wait()


def _run(
    cmd: list[str], cpus: list[int] | None, env: dict[str, str], timeout_s: float
) -> list[dict[str, Any]]:
    def pin() -> None:
        if cpus is not None:
            os.sched_setaffinity(0, cpus)

    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout_s, env=env, preexec_fn=pin, check=False
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        sys.exit(f"{cmd[0]} exited {proc.returncode}: {' | '.join(tail)}")
    records: list[dict[str, Any]] = json.loads(proc.stdout)
    return records


def _test(rec: dict[str, Any]) -> str:
    return "pp" if int(rec.get("n_gen", 0)) == 0 else "tg"


def _steps(folder: Path) -> dict[str, list[float]]:
    """Every steady decode step of the traced run, per column."""
    out: dict[str, list[float]] = {}
    for path in folder.glob("tokens-*.jsonl"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row["kind"] != "steady" or not row["decode_ms"]:
                continue
            for col in ("decode_ms", "sample_ms", "gap_ms", "counter_ms"):
                out.setdefault(col, []).extend(row[col])
    return out


def _round(
    tools: dict[str, list[str]], order: list[str], cpus: list[int] | None, timeout_s: float
) -> dict[str, Any]:
    got: dict[str, Any] = {"order": order, "load": os.getloadavg()[0]}
    for name in order:
        env = dict(os.environ)
        with tempfile.TemporaryDirectory(prefix="edgeprof-trace-") as trace:
            if name == "edgeprof-traced":
                env["EDGEPROF_TOKEN_TRACE"] = trace
            records = _run(tools[name], cpus, env, timeout_s)
            got[name] = {
                _test(r): {
                    "avg_ts": r["avg_ts"],
                    "samples_ts": r["samples_ts"],
                    "samples_ns": r["samples_ns"],
                    "n_gen": r["n_gen"],
                }
                for r in records
            }
            if name == "edgeprof-traced":
                got["steps"] = _steps(Path(trace))
    return got


def _placement(
    condition: str, threads: int, n_cpus: int
) -> tuple[list[int] | None, list[list[int] | None]] | None:
    """(the tools' CPUs or None, one CPU list or None per hog); None where the condition cannot be set up."""
    tool_cpus = list(range(threads))
    if condition == "pinned-quiet":
        return tool_cpus, []
    if condition == "pinned-hog":
        rest = list(range(threads, n_cpus))
        return (tool_cpus, [[c] for c in rest]) if rest else None
    if condition == "unpinned-quiet":
        return None, []
    return None, [None]


def _median_range(values: list[float]) -> dict[str, Any]:
    """Median, range and a 95 % interval of the median (None for fewer than 6 rounds): with enough rounds
    the interval, not one round's swing, says whether the tools agree within a band."""
    return {
        "n": len(values),
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "ci95": median_ci(values),
    }


def _summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"load": _median_range([r["load"] for r in rounds])}
    for variant in (v for v in VARIANTS[1:] if v in rounds[0]):
        for test in ("pp", "tg"):
            ratios = [r[variant][test]["avg_ts"] / r["llama-bench"][test]["avg_ts"] for r in rounds]
            out[f"{variant} {test}"] = _median_range(ratios)
            fastest = [
                max(r[variant][test]["samples_ts"]) / max(r["llama-bench"][test]["samples_ts"])
                for r in rounds
            ]
            out[f"{variant} {test} fastest rep"] = _median_range(fastest)
    lb_ms = [
        ns / 1e6 / r["llama-bench"]["tg"]["n_gen"]
        for r in rounds
        for ns in r["llama-bench"]["tg"]["samples_ns"]
    ]
    out["per step ms"] = {"llama-bench (rep / n)": statistics.median(lb_ms)}
    for col in ("counter_ms", "decode_ms", "sample_ms", "gap_ms"):
        steps = [v for r in rounds for v in r.get("steps", {}).get(col, [])]
        if steps:
            out["per step ms"][f"edgeprof {col}"] = statistics.median(steps)
            out["per step ms"][f"edgeprof {col} p95"] = nearest_rank(steps, 0.95)
    return out


def _print(name: str, s: dict[str, Any]) -> None:
    load = s["load"]
    print(f"{name}  (load {load['min']:.2f}-{load['max']:.2f}, {load['n']} rounds)")
    for variant in (v for v in VARIANTS[1:] if f"{v} pp" in s):
        cells = []
        for test in ("pp", "tg"):
            r = s[f"{variant} {test}"]
            ci = r.get("ci95")
            ci_text = f" 95% CI {ci[0]:.3f}-{ci[1]:.3f}" if ci else ""
            cells.append(f"{test} {r['median']:.3f} [{r['min']:.3f}-{r['max']:.3f}]{ci_text}")
        fastest = "  ".join(f"{t} {s[f'{variant} {t} fastest rep']['median']:.3f}" for t in ("pp", "tg"))
        print(f"  {variant:<22} " + "   ".join(cells) + f"   fastest rep: {fastest}")
    steps = s["per step ms"]
    if "edgeprof counter_ms" in steps:
        ratio = steps["llama-bench (rep / n)"] / steps["edgeprof counter_ms"]
        print(f"  tg per step, llama-bench ms / edgeprof counter ms (as t/s ratio): {ratio:.3f}")
    print("  tg ms per step: " + ", ".join(f"{k} {v:.3f}" for k, v in s["per step ms"].items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=None, help="GGUF (default: the small demo model, Q8_0)")
    ap.add_argument("--args", default="-p 128 -n 64 -r 5 -fa 0", help="llama-bench arguments but -m, -t, -o")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", default=f"1,{os.cpu_count() or 1}")
    ap.add_argument("--conditions", default="all", help=f"comma list of {', '.join(CONDITIONS)}")
    ap.add_argument("--hog-session", choices=("own", "same"), default="own")
    ap.add_argument(
        "--variants",
        default=",".join(DEFAULT_VARIANTS),
        help="what runs besides llama-bench: edgeprof variants, and llama-bench-again (the A/A: what this "
        "host's noise alone makes of the ratio)",
    )
    ap.add_argument("--llama-bench", default=None)
    ap.add_argument("--timeout-s", type=float, default=600.0)
    ap.add_argument(
        "--from-json", default=None, help="print the tables of an earlier run's raw file, run nothing"
    )
    opts = ap.parse_args()
    if opts.from_json:
        for name, result in json.loads(Path(opts.from_json).read_text())["results"].items():
            _print(name, _summary(result["rounds"]))
        return 0
    extra = shlex.split(opts.args)
    if any(a in ("-m", "-t", "-o", "--model", "--threads", "--output") for a in extra):
        sys.exit("--args must not name -m, -t or -o: the script sets them")
    model = opts.model or _demo_model()
    llama_bench = find_llama_bench(opts.llama_bench)
    n_cpus = len(os.sched_getaffinity(0))
    conditions = CONDITIONS if opts.conditions == "all" else tuple(opts.conditions.split(","))
    results: dict[str, Any] = {}
    out = OUT_DIR / f"pinned-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}.json"
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for threads in (int(t) for t in opts.threads.split(",")):
        args = [*extra, "-t", str(threads), "-o", "json"]
        ep = [*edgeprof_command(), "bench", "--db", str(OUT_DIR / "pinned.db"), "-m", model, *args]
        reference = [llama_bench, "-m", model, *args]
        tools = {
            "llama-bench": reference,
            "edgeprof": ep,
            "edgeprof-no-telemetry": [*ep, "--no-telemetry"],
            "edgeprof-traced": ep,
            "llama-bench-again": reference,
        }
        variants = ["llama-bench", *opts.variants.split(",")]
        unknown = sorted(set(variants) - set(tools))
        if unknown:
            sys.exit(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS[1:])})")
        for condition in conditions:
            placed = _placement(condition, threads, n_cpus)
            if placed is None:
                continue
            cpus, hog_cpus = placed
            hogs = _start_hogs(hog_cpus, own_session=opts.hog_session == "own")
            try:
                rounds = []
                for i in range(opts.rounds):
                    order = variants[i % len(variants) :] + variants[: i % len(variants)]
                    rounds.append(_round(tools, order, cpus, opts.timeout_s))
                    log(
                        f"threads {threads} {condition}: round {i + 1}/{opts.rounds} (load {rounds[-1]['load']:.2f})"
                    )
            finally:
                _stop(hogs)
            name = f"threads {threads} {condition}"
            results[name] = {"summary": _summary(rounds), "rounds": rounds}
            _print(name, results[name]["summary"])
            # after every condition, so a run stopped early keeps what it measured
            raw = {"args": vars(opts), "model": model, "n_cpus": n_cpus, "results": results}
            out.write_text(json.dumps(raw, indent=1))
    print(f"raw: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
