#!/usr/bin/env python3
"""Decode-fidelity diagnostic: edgeprof's own request code against a bare llama-bench-style loop, on ONE context.

Everything runs in one process on one llama.cpp context set up exactly as edgeprof's worker sets it up
(``llama_context.load_model``: the plan's parameters, llama-bench's context values, the attached
threadpool, the log capture). Interleaved rounds, the variants' order alternating, compare tg t/s for:

* ``worker``:  ``llama_worker.Request.run``, i.e. what edgeprof measures: prefill of the prompt, greedy
  sampling, stop/EOS bookkeeping, tg from llama.cpp's ``t_eval`` counter;
* ``bare``:    prefill of the same prompt, then llama-bench's ``test_gen`` loop (decode one token,
  synchronize, a random next token), wall clock around the decodes;
* ``restore``: the same loop after restoring the prompt's KV state instead of computing it (what llama-bench
  ``-d`` does for every rep after its first): does a prefill right before decode slow the decode down?

If ``worker`` ≈ ``bare`` ≈ ``restore``, whatever separates edgeprof's figure from llama-bench's is outside
the request code (the process around it, the host), not in how edgeprof drives llama.cpp.

Usage: python benchmarks/diagnostics/diag_worker_vs_bare.py MODEL.gguf [--rounds 20] [--reps 10] [--threads 2]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import random
import statistics
import sys
import time
from pathlib import Path

from diag_context import add_arguments, worker_context


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", help="write the raw figures here")
    args = ap.parse_args()

    wc = worker_context(args)
    ll, ctx, mem, request, prompt, n_vocab = wc.ll, wc.ctx, wc.mem, wc.request, wc.prompt, wc.n_vocab
    effective = wc.effective
    ll.llama_memory_clear(mem, True)
    request.decode_tokens(prompt)
    ll.llama_synchronize(ctx)
    size = int(ll.llama_state_seq_get_size(ctx, 0))
    state = (ctypes.c_uint8 * size)()
    state_len = int(ll.llama_state_seq_get_data(ctx, state, size, 0))

    def bench_loop(restore: bool) -> float:
        ll.llama_memory_clear(mem, True)
        if restore:
            ll.llama_state_seq_set_data(ctx, state, state_len, 0)
        else:
            request.decode_tokens(prompt)
            ll.llama_synchronize(ctx)
        token = 1
        t0 = time.perf_counter_ns()
        for _ in range(args.tg):
            arr = (ll.llama_token * 1)(token)
            ll.llama_decode(ctx, ll.llama_batch_get_one(arr, 1))
            ll.llama_synchronize(ctx)
            token = random.randrange(n_vocab)
        return args.tg * 1e9 / (time.perf_counter_ns() - t0)

    def one(variant: str) -> float:
        if variant == "worker":
            return float(request.run(args.model)["tg_tps"])
        return bench_loop(restore=variant == "restore")

    variants = ["worker", "bare", "restore"]
    reps: dict[str, list[list[float]]] = {v: [] for v in variants}
    for r in range(args.rounds):
        order = variants if r % 2 == 0 else variants[::-1]
        for v in order:
            reps[v].append([one(v) for _ in range(args.reps)])
        print(f"round {r + 1}/{args.rounds}: " + " ".join(f"{v} {max(reps[v][-1]):.0f}" for v in variants),
              file=sys.stderr, flush=True)  # fmt: skip

    def paired_fastest(a: str, b: str) -> float:
        return statistics.median(max(x) / max(y) for x, y in zip(reps[a], reps[b], strict=True))

    print(f"\n{Path(args.model).name}: tg{args.tg} after a {args.pp}-token prompt, ctx {args.ctx}, threads "
          f"{args.threads}, {args.rounds} rounds x {args.reps} reps, one context ({effective['threadpool']})")  # fmt: skip
    for v in variants:
        flat = [x for rnd in reps[v] for x in rnd]
        print(f"  {v:8s} median {statistics.median(flat):8.1f} t/s   fastest {max(flat):8.1f} t/s")
    print(f"  paired fastest-rep ratio worker / bare    {paired_fastest('worker', 'bare'):.3f}")
    print(f"  paired fastest-rep ratio bare / restore   {paired_fastest('bare', 'restore'):.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "reps": reps}, indent=1))
    wc.free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
