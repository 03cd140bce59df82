#!/usr/bin/env python3
"""Per-token decode timeline: where time goes between and inside ``llama_decode`` calls.

One process, one model, one context; every round runs each variant once, in a shuffled order, so a shared
machine's drift hits them alike. A variant is (threadpool, driver):

* threadpool ``disposable``: none attached (what edgeprof's worker did before it attached one): ggml builds
  and joins a pool of n_threads-1 OS threads inside every graph computation, i.e. once per decoded token;
* ``pool-poll0`` / ``pool-poll50``: one persistent pool attached with ``llama_attach_threadpool``
  (``runners/threadpool.py``), its workers sleeping at once (poll 0) or spinning briefly first (poll 50,
  llama-bench's and llama-server's default);
* driver ``sampled``: greedy ``llama_sampler_sample`` after every decode, as the worker does;
  ``random``: a random next token and no sampler, exactly llama-bench's ``test_gen`` loop.

For each decode step it records the wall time inside ``llama_decode`` + ``llama_synchronize`` (``in_ms``)
and the time from the end of one decode to the start of the next (``gap_ms``: sampling, Python, ctypes),
separately for the first decode after the prefill, and llama.cpp's own counter (``t_eval_ms``), which is
what edgeprof reports. It also reports 63- vs 64-step runs (n_predict 64 vs 65).

Usage: python benchmarks/diagnostics/diag_decode_timeline.py MODEL.gguf [--rounds 9] [--threads 2] [--json OUT]
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
from typing import Any

import llama_cpp as ll

from edgeprof.runners import threadpool as tp
from edgeprof.stats import nearest_rank

_LOG_CB = None


def _q(xs: list[float], q: float) -> float:
    value = nearest_rank(xs, q)
    assert value is not None
    return value


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pp", type=int, default=128)
    ap.add_argument("--tg", type=int, default=64)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--json", help="write the raw per-step figures here")
    args = ap.parse_args()

    ll.llama_backend_init()
    global _LOG_CB
    _LOG_CB = ll.llama_log_callback(lambda *_: None)  # kept referenced: llama.cpp calls it later
    ll.llama_log_set(_LOG_CB, ctypes.c_void_p(0))
    mp = ll.llama_model_default_params()
    mp.n_gpu_layers = 0
    model = ll.llama_model_load_from_file(args.model.encode(), mp)
    cp = ll.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch = args.ctx, 512, 512
    cp.n_threads = cp.n_threads_batch = args.threads
    cp.flash_attn_type = ll.LLAMA_FLASH_ATTN_TYPE_DISABLED
    cp.no_perf = False
    ctx = ll.llama_init_from_model(model, cp)
    vocab = ll.llama_model_get_vocab(model)
    n_vocab = ll.llama_vocab_n_tokens(vocab)
    bos = ll.llama_vocab_bos(vocab)
    mem = ll.llama_get_memory(ctx)
    rng = random.Random(0)
    clock = time.perf_counter

    def decode(tokens: list[int]) -> None:
        arr = (ll.llama_token * len(tokens))(*tokens)
        if ll.llama_decode(ctx, ll.llama_batch_get_one(arr, len(tokens))) != 0:
            raise RuntimeError("decode failed")

    def one(driver: str, n_steps: int) -> dict[str, Any]:
        ll.llama_memory_clear(mem, True)
        sampler = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
        ll.llama_sampler_chain_add(sampler, ll.llama_sampler_init_greedy())
        ll.llama_perf_context_reset(ctx)
        decode([bos] + [rng.randrange(n_vocab) for _ in range(args.pp - 1)])
        ll.llama_synchronize(ctx)
        e0 = float(ll.llama_perf_context(ctx).t_eval_ms)
        tok = ll.llama_sampler_sample(sampler, ctx, -1) if driver == "sampled" else bos
        ins: list[float] = []
        gaps: list[float] = []
        t_prev_end = clock()
        t_start = t_prev_end
        for _ in range(n_steps):
            t_a = clock()
            decode([tok])
            ll.llama_synchronize(ctx)
            t_b = clock()
            gaps.append((t_a - t_prev_end) * 1000.0)
            ins.append((t_b - t_a) * 1000.0)
            tok = ll.llama_sampler_sample(sampler, ctx, -1) if driver == "sampled" else rng.randrange(n_vocab)
            t_prev_end = t_b  # the gap is everything from the end of one decode to the start of the next
        wall_s = clock() - t_start
        e1 = float(ll.llama_perf_context(ctx).t_eval_ms)
        ll.llama_sampler_free(sampler)
        return {
            "in_ms": ins,
            "gap_ms": gaps,
            "counter_tps": n_steps / ((e1 - e0) / 1000.0),
            "wall_tps": n_steps / wall_s,
        }

    pools = ("disposable", "pool-poll0", "pool-poll50")
    attached: dict[str, tp.Threadpool | None] = {}

    def use(pool: str) -> None:
        tp.detach(ll, ctx)
        for p in attached.values():
            if p is not None:
                p.free()
        attached.clear()
        if pool != "disposable":
            handle, why = tp.attach(ll, ctx, args.threads, poll=0 if pool == "pool-poll0" else 50)
            if handle is None:
                sys.exit(why)
            attached[pool] = handle

    variants = [(p, d) for p in pools for d in ("sampled", "random")]
    res: dict[str, list[dict[str, Any]]] = {f"{p}/{d}": [] for p, d in variants}
    steps63: dict[str, list[float]] = {"63": [], "64": []}
    for p, d in variants:  # warm-up
        use(p)
        one(d, 8)
    for r in range(args.rounds):
        order = list(variants)
        rng.shuffle(order)
        for p, d in order:
            use(p)
            res[f"{p}/{d}"].append(one(d, args.tg))
        use("pool-poll50")
        for n in rng.sample([args.tg - 1, args.tg], 2):
            steps63[str(n)].append(one("sampled", n)["counter_tps"])
        print(f"round {r + 1}/{args.rounds}", file=sys.stderr, flush=True)
    use("disposable")

    print(f"model: {Path(args.model).name}, threads {args.threads}, ctx {args.ctx}, "
          f"{args.tg} decode steps at depth {args.pp}, {args.rounds} interleaved rounds")  # fmt: skip
    print("medians over rounds (per-step figures: median over every step of every round)")
    hdr = f"{'variant':24s} {'counter t/s':>11s} {'wall t/s':>9s} {'1st in ms':>9s} {'in ms':>7s}"
    print(hdr + f" {'in p95':>7s} {'gap ms':>7s} {'gap p95':>7s}")
    summary: dict[str, dict[str, float]] = {}
    for key, runs in res.items():
        first = [x["in_ms"][0] for x in runs]
        rest = [v for x in runs for v in x["in_ms"][1:]]
        gaps = [v for x in runs for v in x["gap_ms"][1:]]
        row = {
            "counter_tps": statistics.median(x["counter_tps"] for x in runs),
            "wall_tps": statistics.median(x["wall_tps"] for x in runs),
            "first_in_ms": statistics.median(first),
            "in_ms": statistics.median(rest),
            "in_p95_ms": _q(rest, 0.95),
            "gap_ms": statistics.median(gaps),
            "gap_p95_ms": _q(gaps, 0.95),
        }
        summary[key] = row
        print(
            f"{key:24s} {row['counter_tps']:11.1f} {row['wall_tps']:9.1f} {row['first_in_ms']:9.3f} "
            f"{row['in_ms']:7.3f} {row['in_p95_ms']:7.3f} {row['gap_ms']:7.3f} {row['gap_p95_ms']:7.3f}"
        )
    print("paired ratios (median over rounds of the per-round ratio):")
    for key in res:
        ratios = [
            a["counter_tps"] / b["counter_tps"]
            for a, b in zip(res[key], res["disposable/sampled"], strict=True)
        ]
        print(f"  {key:24s} / disposable/sampled   {statistics.median(ratios):.3f}")
    lb_like = res["pool-poll50/random"]
    for key in ("disposable/sampled", "pool-poll50/sampled"):
        ratios = [a["counter_tps"] / b["counter_tps"] for a, b in zip(res[key], lb_like, strict=True)]
        print(f"  {key:24s} / pool-poll50/random   {statistics.median(ratios):.3f}")
    print(
        f"63 vs 64 steps (pool-poll50/sampled): {statistics.median(steps63['63']):.1f} vs "
        f"{statistics.median(steps63['64']):.1f} t/s"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "raw": res, "steps": steps63}, indent=1))
    ll.llama_free(ctx)
    ll.llama_model_free(model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
