#!/usr/bin/env python3
"""Diagnostic for fidelity gaps: where does edgeprof's figure part from llama-bench's?

Within ONE process (the llama-cpp-python that edgeprof's worker loads), alternating every iteration so that
slow drift of a shared machine hits all variants alike, this measures the same work four ways:

* ``pp_wall``     128 prompt tokens in one batch, wall clock around decode + synchronize (llama-bench's way)
* ``pp_counter``  the same prefill, from llama.cpp's ``llama_perf_context`` counters (edgeprof's way)
* ``tg_bench``    64 single-token decodes at depth 128..191, random tokens, decode + synchronize, wall clock
                  (exactly llama-bench's ``test_gen`` loop)
* ``tg_sampled``  the same 64 decodes driven by greedy sampling as edgeprof's worker does, measured both by
                  the counters (``tg_sampled_counter``, what edgeprof reports) and by the wall clock
                  (``tg_sampled_wall``, which includes the sampling and Python time between decodes)

and, interleaved, the llama-bench binary itself (``--llama-bench``) on the same model and settings.

If ``tg_bench`` ~ llama-bench and ``tg_sampled_counter`` ~ ``tg_bench``, the worker measures faithfully and
any remaining gap in ``fidelity.py`` comes from the edgeprof harness around the worker (for example the
telemetry sampler thread competing for the two cores).

Usage: python benchmarks/diagnostics/diag_decode_overhead.py MODEL.gguf [--iters 15] [--llama-bench PATH]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import llama_cpp as ll

_LOG_CB = None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--iters", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pp", type=int, default=128)
    ap.add_argument("--tg", type=int, default=64)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--llama-bench", help="also run this llama-bench binary, interleaved (-r 3 each time)")
    ap.add_argument("--json", help="write the raw figures here")
    args = ap.parse_args()

    ll.llama_backend_init()
    global _LOG_CB
    _LOG_CB = ll.llama_log_callback(lambda *_: None)  # kept referenced: llama.cpp calls it later
    ll.llama_log_set(_LOG_CB, ctypes_null())
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

    def decode(tokens: list[int]) -> None:
        arr = (ll.llama_token * len(tokens))(*tokens)
        if ll.llama_decode(ctx, ll.llama_batch_get_one(arr, len(tokens))) != 0:
            raise RuntimeError("decode failed")

    def prompt() -> list[int]:
        return [bos] + [rng.randrange(n_vocab) for _ in range(args.pp - 1)]

    def perf() -> tuple[float, float]:
        p = ll.llama_perf_context(ctx)
        return float(p.t_p_eval_ms), float(p.t_eval_ms)

    def run_pp() -> tuple[float, float]:
        ll.llama_memory_clear(mem, True)
        ll.llama_perf_context_reset(ctx)
        toks = prompt()
        t0 = time.perf_counter()
        decode(toks)
        ll.llama_synchronize(ctx)
        wall = time.perf_counter() - t0
        t_p, _ = perf()
        return args.pp / wall, args.pp / (t_p / 1000.0)

    def run_tg_bench() -> float:
        ll.llama_memory_clear(mem, True)
        decode(prompt())
        ll.llama_synchronize(ctx)
        tok = bos
        t0 = time.perf_counter()
        for _ in range(args.tg):
            decode([tok])
            ll.llama_synchronize(ctx)
            tok = rng.randrange(n_vocab)
        return args.tg / (time.perf_counter() - t0)

    def run_tg_sampled() -> tuple[float, float]:
        ll.llama_memory_clear(mem, True)
        sampler = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
        ll.llama_sampler_chain_add(sampler, ll.llama_sampler_init_greedy())
        ll.llama_perf_context_reset(ctx)
        decode(prompt())
        ll.llama_synchronize(ctx)
        _, e0 = perf()
        tok = ll.llama_sampler_sample(sampler, ctx, -1)
        t0 = time.perf_counter()
        for _ in range(args.tg):
            decode([tok])
            tok = ll.llama_sampler_sample(sampler, ctx, -1)
        ll.llama_synchronize(ctx)
        wall = time.perf_counter() - t0
        _, e1 = perf()
        ll.llama_sampler_free(sampler)
        return args.tg / wall, args.tg / ((e1 - e0) / 1000.0)

    def run_llama_bench(kind: str) -> float:
        common = ["-m", args.model, "-t", str(args.threads), "-b", "512", "-ub", "512", "-fa", "off",
                  "-r", "3", "-o", "json"]  # fmt: skip
        extra = (
            ["-p", str(args.pp), "-n", "0"]
            if kind == "pp"
            else ["-p", "0", "-n", str(args.tg), "-d", str(args.pp)]
        )
        out = subprocess.run([args.llama_bench, *common, *extra], capture_output=True, text=True, check=True)
        return statistics.median(json.loads(out.stdout)[0]["samples_ts"])

    # warm-up
    run_pp()
    run_tg_bench()
    run_tg_sampled()

    names = ("pp_wall", "pp_counter", "tg_bench", "tg_sampled_wall", "tg_sampled_counter", "lb_pp", "lb_tg")
    res: dict[str, list[float]] = {k: [] for k in names}
    for i in range(args.iters):
        steps = ["pp", "tgb", "tgs"] + (["lb"] if args.llama_bench else [])
        rng.shuffle(steps)
        for s in steps:
            if s == "pp":
                w, c = run_pp()
                res["pp_wall"].append(w)
                res["pp_counter"].append(c)
            elif s == "tgb":
                res["tg_bench"].append(run_tg_bench())
            elif s == "tgs":
                w, c = run_tg_sampled()
                res["tg_sampled_wall"].append(w)
                res["tg_sampled_counter"].append(c)
            else:
                res["lb_pp"].append(run_llama_bench("pp"))
                res["lb_tg"].append(run_llama_bench("tg"))
        print(f"iter {i + 1}/{args.iters}", file=sys.stderr, flush=True)

    med = {k: statistics.median(v) for k, v in res.items() if v}
    print(f"model: {Path(args.model).name}  (medians of {args.iters} interleaved iterations, t/s)")
    for k, v in med.items():
        print(f"  {k:20s} {v:9.1f}")
    print("ratios:")
    if "lb_tg" in med:
        print(f"  tg_bench / llama-bench tg           {med['tg_bench'] / med['lb_tg']:.3f}")
        print(f"  tg_sampled_counter / llama-bench tg {med['tg_sampled_counter'] / med['lb_tg']:.3f}")
        print(f"  pp_counter / llama-bench pp         {med['pp_counter'] / med['lb_pp']:.3f}")
        print(f"  pp_wall / llama-bench pp            {med['pp_wall'] / med['lb_pp']:.3f}")
    print(f"  tg_sampled_counter / tg_bench       {med['tg_sampled_counter'] / med['tg_bench']:.3f}")
    print(f"  tg_sampled_wall / tg_bench          {med['tg_sampled_wall'] / med['tg_bench']:.3f}")
    print(f"  pp_counter / pp_wall                {med['pp_counter'] / med['pp_wall']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"raw": res, "median": med}, indent=2))
    ll.llama_free(ctx)
    ll.llama_model_free(model)
    return 0


def ctypes_null():  # a NULL user-data pointer for llama_log_set
    import ctypes

    return ctypes.c_void_p(0)


if __name__ == "__main__":
    sys.exit(main())
