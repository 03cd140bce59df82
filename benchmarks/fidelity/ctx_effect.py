#!/usr/bin/env python3
"""Does decode speed at a fixed depth depend on n_ctx?  (It does with flash-attn off.)

Compiles ``ctx_probe.cpp`` against the llama.cpp that ``build_llama_bench.sh`` built (the same source as
edgeprof's llama-cpp-python) and measures tg64 at depth 128 for n_ctx in {256, 512, 2048} x flash-attn
{off, on}, all variants shuffled within each round, and reports each variant's median and its paired ratio
to n_ctx=256 of the same flash-attn setting.

Why it matters for the fidelity benchmark: llama-bench sizes its context to exactly p + n + d (padded by
llama.cpp to a multiple of 256), so ``llama-bench -n 64 -d 128`` runs at n_ctx 256. With flash-attn off,
llama.cpp stores V transposed and the attention reads V rows with a stride of n_ctx elements, so the same
work at a larger n_ctx is slower; a plan with ctx = 512 is then not comparable with llama-bench.

Usage: python benchmarks/fidelity/ctx_effect.py [MODEL] [--rounds 8]
"""

from __future__ import annotations

import argparse
import collections
import random
import statistics
import subprocess
import sys
from pathlib import Path

from probe_build import build_probe


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", default="/tmp/demo/edgeprof-demo-small-q4_k_m.gguf")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--ctx", default="256,512,2048")
    args = ap.parse_args()

    exe = build_probe("ctx_probe")

    ctxs = [c.strip() for c in args.ctx.split(",")]
    variants = [(c, fa) for fa in ("0", "1") for c in ctxs]
    res: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    for r in range(args.rounds):
        order = variants[:]
        random.shuffle(order)
        for c, fa in order:
            out = subprocess.run([str(exe), args.model, c, fa], capture_output=True, text=True, check=True)
            res[(c, fa)].append(float(out.stdout))
        print(f"round {r + 1}/{args.rounds}", file=sys.stderr, flush=True)
    print(f"tg64 @ d128, {Path(args.model).name}, median of {args.rounds} shuffled rounds")
    for fa in ("0", "1"):
        base = res[(ctxs[0], fa)]
        for c in ctxs:
            v = res[(c, fa)]
            paired = statistics.median(a / b for a, b in zip(v, base, strict=True))
            print(
                f"  flash-attn {'on ' if fa == '1' else 'off'}  n_ctx {c:>5s}: "
                f"{statistics.median(v):8.1f} t/s"
                f"   paired ratio vs n_ctx {ctxs[0]}: {paired:.3f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
