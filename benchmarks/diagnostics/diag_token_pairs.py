#!/usr/bin/env python3
"""Decode-fidelity diagnostic: does what edgeprof does between two decodes slow the next decode down?

One process, one context set up by the worker's own ``llama_context.load_model``. Every rep decodes 64
tokens after a 128-token prompt; between two decodes the loop does either llama-bench's work (a random next
token) or the work under test, alternating token by token. Each decode after the work under test is
divided by the mean of its two neighbours, which followed llama-bench's work. Neighbouring decodes are
about a millisecond apart, so the host's fast/slow flips (seconds long) cancel out of every ratio, and
the per-token positions are balanced (which parity gets which work swaps from rep to rep).

Work under test (``--work``):

* ``greedy``: ``llama_sampler_sample`` with the greedy sampler edgeprof uses for temperature 0 (reads the
  logits, builds the candidate array, argmax);
* ``worker``: what ``Request.run`` does between decodes: greedy sampling, the EOS check, the output list;
* ``spin50``: 50 µs of busy Python, a gap of the size that lets OpenMP workers start to idle.

Each decode is timed by the wall clock around ``llama_decode`` + ``llama_synchronize``; the same calls on
both sides of every ratio, so the ctypes cost cancels too. The time the work itself takes is printed
beside it: it lies outside llama.cpp's ``t_eval`` counter, which edgeprof reports.

Usage: python benchmarks/diagnostics/diag_token_pairs.py MODEL.gguf [--rounds 6] [--reps 10] [--threads 2]
       [--work greedy,worker,spin50]
"""

from __future__ import annotations

import argparse
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
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--work", default="greedy,worker,spin50")
    ap.add_argument("--json", help="write the per-token ratios here")
    args = ap.parse_args()

    wc = worker_context(args)
    ll, ctx, vocab, mem, request, prompt, n_vocab = (
        wc.ll, wc.ctx, wc.vocab, wc.mem, wc.request, wc.prompt, wc.n_vocab
    )  # fmt: skip
    sampler = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
    ll.llama_sampler_chain_add(sampler, ll.llama_sampler_init_greedy())
    clock = time.perf_counter_ns
    decode, sync, batch_one = ll.llama_decode, ll.llama_synchronize, ll.llama_batch_get_one
    out: list[int] = []

    def work(kind: str) -> int:
        if kind == "rand":  # llama-bench's test_gen
            return random.randrange(n_vocab)
        if kind == "greedy":
            return int(ll.llama_sampler_sample(sampler, ctx, -1))
        if kind == "worker":
            token = int(ll.llama_sampler_sample(sampler, ctx, -1))
            out.append(token)
            ll.llama_vocab_is_eog(vocab, token)
            return token
        if kind == "spin50":
            end = clock() + 50_000
            while clock() < end:
                pass
            return random.randrange(n_vocab)
        raise SystemExit(f"unknown --work {kind!r}")

    def rep(kinds: tuple[str, str]) -> tuple[list[int], list[int]]:
        """Decode times (ns) of one rep, and the time of the work before each decode."""
        out.clear()
        ll.llama_memory_clear(mem, True)
        request.decode_tokens(prompt)
        sync(ctx)
        token = int(ll.llama_sampler_sample(sampler, ctx, -1))
        decode_ns, work_ns = [], []
        for i in range(args.tg):
            arr = (ll.llama_token * 1)(token)
            batch = batch_one(arr, 1)
            t0 = clock()
            decode(ctx, batch)
            sync(ctx)
            t1 = clock()
            token = work(kinds[(i + 1) % 2])  # the work before decode i + 1
            decode_ns.append(t1 - t0)
            work_ns.append(clock() - t1)
        return decode_ns, work_ns

    kinds_under_test = [k.strip() for k in args.work.split(",") if k.strip()]
    ratios: dict[str, list[float]] = {k: [] for k in kinds_under_test}
    work_us: dict[str, list[float]] = {k: [] for k in [*kinds_under_test, "rand"]}
    for r in range(args.rounds):
        for kind in kinds_under_test:
            for k in range(args.reps):
                pair = ("rand", kind) if (k + r) % 2 == 0 else (kind, "rand")
                decode_ns, work_ns = rep(pair)
                for i in range(2, args.tg - 1):  # decode 0 follows the prompt, not either work
                    if pair[i % 2] == kind:  # decode i followed the work under test; i +- 1 followed rand
                        ratios[kind].append(decode_ns[i] / ((decode_ns[i - 1] + decode_ns[i + 1]) / 2))
                for i in range(args.tg - 1):
                    work_us[pair[(i + 1) % 2]].append(work_ns[i] / 1000.0)
        print(f"round {r + 1}/{args.rounds}: " + " ".join(f"{k} {statistics.median(v):.4f}" for k, v in ratios.items()),
              file=sys.stderr, flush=True)  # fmt: skip

    print(f"\n{Path(args.model).name}: tg{args.tg} after a {args.pp}-token prompt, ctx {args.ctx}, threads "
          f"{args.threads}; decode after the work / mean of its neighbours after llama-bench's random token")  # fmt: skip
    print(f"{'work':8s} {'tokens':>7s} {'median':>8s} {'q25':>7s} {'q75':>7s} {'work µs (median)':>17s}")
    print(f"{'rand':8s} {'':>7s} {'':>8s} {'':>7s} {'':>7s} {statistics.median(work_us['rand']):17.1f}")
    for kind, xs in ratios.items():
        s = sorted(xs)
        n = len(s)
        print(f"{kind:8s} {n:7d} {statistics.median(s):8.4f} {s[n // 4]:7.4f} {s[3 * n // 4]:7.4f} "
              f"{statistics.median(work_us[kind]):17.1f}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "ratios": ratios, "work_us": work_us}))
    ll.llama_sampler_free(sampler)
    wc.free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
