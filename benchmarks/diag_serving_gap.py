#!/usr/bin/env python3
"""Diagnostic for the serving-fidelity gap (issue 14): decode ms/token of a bare llama-cpp-python loop (one
token per llama_decode, no sampling), with and without the persistent threadpool edgeprof's worker attaches,
to put beside llama-server's ``predicted_ms`` and the worker's counters on the same model.

    nice -n 5 python benchmarks/diag_serving_gap.py [MODEL.gguf] [--threads 1] [--tokens 128]
"""

from __future__ import annotations

import argparse
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default="benchmarks/out/demo-small/edgeprof-demo-small-q4_k_m.gguf")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    import llama_cpp as ll

    from edgeprof.runners import threadpool

    ll.llama_backend_init()
    model = ll.llama_model_load_from_file(args.model.encode(), ll.llama_model_default_params())
    if not model:
        print(f"diag_serving_gap: cannot load {args.model}", file=sys.stderr)
        return 2
    for _ in range(args.rounds):
        for pool in (False, True):
            cp = ll.llama_context_default_params()
            cp.n_ctx, cp.n_threads, cp.n_threads_batch = 512, args.threads, args.threads
            cp.flash_attn_type = 0  # off, as the plans compared
            ctx = ll.llama_init_from_model(model, cp)
            attached = threadpool.attach(ll, ctx, args.threads, 50)[0] if pool else None
            prompt = (ll.llama_token * 64)(*[300 + i for i in range(64)])
            assert ll.llama_decode(ctx, ll.llama_batch_get_one(prompt, 64)) == 0
            t0 = time.perf_counter()
            for i in range(args.tokens):
                one = (ll.llama_token * 1)(400 + i)
                assert ll.llama_decode(ctx, ll.llama_batch_get_one(one, 1)) == 0
            ms = (time.perf_counter() - t0) * 1000.0 / args.tokens
            print(f"threadpool={'attached' if attached is not None else 'none':8s}  {ms:.3f} ms/token (wall)")
            ll.llama_free(ctx)
    return 0


if __name__ == "__main__":
    sys.exit(main())
