"""``edgeprof bench`` against ``llama-bench`` with the same command line, in alternating turns.

Each round runs both tools once with the same arguments (default ``-p 128 -n 32 -t 2 -r 3 -o json``), the
order alternating round by round (A B, B A, ...) so a slow phase of the host hits both tools alike. It
prints, per test (pp128, tg32, ...):

- whether both printed the same field names (the compatibility claim: llama-bench tooling reads ours);
- the median over rounds of edgeprof's ``avg_ts`` / llama-bench's ``avg_ts`` of the same round (paired
  ratio), with the min and max over rounds, and the same ratio of each round's fastest rep
  (``samples_ts``), which is less exposed to a host that slows down for seconds;
- exit status 1 when a paired median ratio is outside ``--band`` (default 5 %).

Without ``-m`` it measures a SYNTHETIC model it writes once into ``benchmarks/out/`` (the demo's small
architecture with 48 layers and a 262 144-token vocabulary, Q8_0, about 430 MB): its reps last long enough
(0.2-1 s) that a comparison measures the tools, not where this host's seconds-long fast and slow phases fell.
llama-bench is found in the venv (scripts/setup.sh puts it there), on PATH or given with ``--llama-bench``.
Every raw output is kept in ``benchmarks/out/bench-vs-llama-bench-<time>.json``.

    python benchmarks/fidelity/bench_vs_llama_bench.py [-m MODEL] [--rounds 6] [--args "-p 128 -n 32 -t 2 -r 3"]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import OUT_DIR, REPO, edgeprof_command, find_llama_bench, log

SYNTHETIC_LAYERS, SYNTHETIC_VOCAB = 48, 262_144
Q8_0_FTYPE = 7  # llama.cpp's LLAMA_FTYPE_MOSTLY_Q8_0


def _synthetic_model() -> Path:
    """The SYNTHETIC Q8_0 model, written on first use."""
    from edgeprof.gguf import quantize, write_f16_gguf

    stem = f"bench-synthetic-v{SYNTHETIC_VOCAB}-l{SYNTHETIC_LAYERS}"
    q8 = OUT_DIR / f"{stem}-q8_0.gguf"
    if not q8.exists():
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        log(f"writing the SYNTHETIC model {q8.name}")
        f16 = write_f16_gguf(
            OUT_DIR / f"{stem}-f16.gguf", "small", n_vocab=SYNTHETIC_VOCAB, n_layer=SYNTHETIC_LAYERS
        )
        quantize(f16, q8, Q8_0_FTYPE)
        f16.unlink()
    return q8


def _run(cmd: list[str], timeout_s: float) -> tuple[list[dict[str, Any]], float]:
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    wall_s = time.monotonic() - t0
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        sys.exit(f"{cmd[0]} exited {proc.returncode}: {' | '.join(tail)}")
    records = json.loads(proc.stdout)
    if not isinstance(records, list):
        sys.exit(f"{cmd[0]} printed JSON that is not a list of records")
    return records, wall_s


def _test_name(rec: dict[str, Any]) -> str:
    n_prompt, n_gen, depth = int(rec.get("n_prompt", 0)), int(rec.get("n_gen", 0)), int(rec.get("n_depth", 0))
    name = f"pp{n_prompt}" if n_gen == 0 else f"tg{n_gen}" if n_prompt == 0 else f"pp{n_prompt}+tg{n_gen}"
    extra = f" t={rec.get('n_threads')}"
    return name + (f" @ d{depth}" if depth else "") + extra


def _summary(values: list[float]) -> dict[str, float | int]:
    return {
        "n": len(values),
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "-m", "--model", default=None, help="GGUF file both tools measure (default: the synthetic one)"
    )
    ap.add_argument("--args", default="-p 128 -n 32 -t 2 -r 3", help="llama-bench arguments, without -m / -o")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--band", type=float, default=0.05, help="allowed |ratio - 1| of the paired medians")
    ap.add_argument("--llama-bench", default=None)
    ap.add_argument("--timeout-s", type=float, default=600.0)
    opts = ap.parse_args()

    extra = shlex.split(opts.args)
    if any(a in ("-m", "--model", "-o", "--output") for a in extra):
        sys.exit("--args must not name -m or -o: the script sets them")
    llama_bench = find_llama_bench(opts.llama_bench)
    if opts.model is None:
        opts.model = str(_synthetic_model())
    tools = {
        "llama-bench": [llama_bench, "-m", opts.model, *extra, "-o", "json"],
        "edgeprof": [*edgeprof_command(), "bench", "-m", opts.model, *extra, "-o", "json"],
    }
    rounds: list[dict[str, Any]] = []
    fields: dict[str, list[str]] = {}
    load_before = os.getloadavg()
    for i in range(opts.rounds):
        order = ["llama-bench", "edgeprof"] if i % 2 == 0 else ["edgeprof", "llama-bench"]
        got: dict[str, Any] = {"round": i, "order": order, "load": os.getloadavg()[0]}
        for tool in order:
            records, wall_s = _run(tools[tool], opts.timeout_s)
            fields.setdefault(tool, sorted({k for r in records for k in r}))
            got[tool] = {"wall_s": wall_s, "records": records}
        rounds.append(got)
        log(f"round {i + 1}/{opts.rounds} ({' then '.join(order)}, load {got['load']:.2f})")

    same_fields = fields["edgeprof"] == fields["llama-bench"]
    paired: dict[str, dict[str, list[float]]] = {}
    for r in rounds:
        ours = {_test_name(x): x for x in r["edgeprof"]["records"]}
        theirs = {_test_name(x): x for x in r["llama-bench"]["records"]}
        for name in sorted(set(ours) & set(theirs)):
            a, b = ours[name], theirs[name]
            entry = paired.setdefault(name, {"avg_ts": [], "best_ts": []})
            entry["avg_ts"].append(float(a["avg_ts"]) / float(b["avg_ts"]))
            entry["best_ts"].append(max(map(float, a["samples_ts"])) / max(map(float, b["samples_ts"])))

    summary = {name: {k: _summary(v) for k, v in e.items()} for name, e in paired.items()}
    print(
        f"fields: {'the same' if same_fields else 'DIFFERENT'} ({len(fields['edgeprof'])} in edgeprof's output)"
    )
    if not same_fields:
        print(f"  only edgeprof: {sorted(set(fields['edgeprof']) - set(fields['llama-bench']))}")
        print(f"  only llama-bench: {sorted(set(fields['llama-bench']) - set(fields['edgeprof']))}")
    print(f"edgeprof / llama-bench, paired per round, {opts.rounds} rounds ({opts.args}):")
    outside = []
    for name, s in summary.items():
        avg, best = s["avg_ts"], s["best_ts"]
        ok = abs(float(avg["median"]) - 1) <= opts.band
        if not ok:
            outside.append(name)
        print(
            f"  {name:<22} avg_ts {avg['median']:.3f} [{avg['min']:.3f}-{avg['max']:.3f}]"
            f"  fastest rep {best['median']:.3f} [{best['min']:.3f}-{best['max']:.3f}]  {'ok' if ok else 'OUTSIDE'}"
        )
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    out = OUT_DIR / f"bench-vs-llama-bench-{stamp}.json"
    out.write_text(
        json.dumps(
            {
                "date_utc": stamp,
                "args": vars(opts),
                "commands": tools,
                "repo": str(REPO),
                "load_before": load_before,
                "load_after": os.getloadavg(),
                "same_fields": same_fields,
                "fields": fields,
                "summary": summary,
                "rounds": rounds,
            },
            indent=1,
        )
    )
    print(f"raw: {out}")
    return 1 if outside or not same_fields else 0


if __name__ == "__main__":
    raise SystemExit(main())
