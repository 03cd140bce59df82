#!/usr/bin/env python3
"""Pool the rounds of several ``fidelity.py`` result files that used the same settings.

On a shared machine whose speed flips between states for seconds at a time, one run's median over 5-9
rounds is still partly a coin flip; pooling the rounds of several runs (taken at different times) gives
steadier medians.  Files whose settings differ (other than rounds) from the first one are refused.

Usage: python benchmarks/fidelity/fidelity_merge.py benchmarks/out/fidelity-A.json benchmarks/out/fidelity-B.json ...
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

KEYS = (
    "reps",
    "threads",
    "n_batch",
    "n_ubatch",
    "flash_attn",
    "pp_tokens",
    "tg_tokens",
    "tg_depth",
    "edgeprof_ctx",
)


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    docs = [json.loads(Path(p).read_text()) for p in paths]
    ref = {k: docs[0]["settings"].get(k) for k in KEYS}
    for p, d in zip(paths, docs, strict=True):
        got = {k: d["settings"].get(k) for k in KEYS}
        if got != ref:
            sys.exit(f"{p}: settings differ from {paths[0]}: {got} != {ref}")
    tol = docs[0]["settings"]["tolerance"]
    quants = [r["quant"] for r in docs[0]["summary"]]
    n_rounds = sum(d["settings"]["rounds"] for d in docs)
    print(
        f"pooled {len(docs)} runs, {n_rounds} rounds per quant; edgeprof ctx={ref['edgeprof_ctx']}, "
        f"{ref['reps']} reps per round; ratio = edgeprof / llama-bench"
    )
    print(
        f"{'quant':8s} | {'pp lb':>7s} {'pp ep':>7s} {'ratio':>6s} {'':>3s} {'paired':>6s} {'best':>6s} | "
        f"{'tg lb':>7s} {'tg ep':>7s} {'ratio':>6s} {'':>3s} {'paired':>6s} {'best':>6s}"
    )
    for q in quants:
        cells = []
        for metric in ("pp", "tg"):
            lb, ep, lb_best, ep_best = [], [], [], []
            for d in docs:
                for rec in d["rounds"][q]:
                    lbr = rec[f"llama_bench_{metric}"]
                    lb.append(lbr["median_ts"])
                    ep.append(rec["edgeprof"][f"{metric}_tps_median"])
                    lb_best.append(lbr.get("max_ts", max(lbr["samples_ts"])))
                    ep_best.append(rec["edgeprof"][f"{metric}_tps_max"])
            lbm, epm = statistics.median(lb), statistics.median(ep)
            paired = statistics.median(e / b for e, b in zip(ep, lb, strict=True))
            best = max(ep_best) / max(lb_best)
            ok = "ok" if abs(epm / lbm - 1) <= tol else "OFF"
            cells.append(f"{lbm:7.0f} {epm:7.0f} {epm / lbm:6.3f} {ok:>3s} {paired:6.3f} {best:6.3f}")
        print(f"{q:8s} | {cells[0]} | {cells[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main([a for a in sys.argv[1:] if not a.startswith("--")]))
