"""Does time spent by the calling thread *between* decode calls slow the next decode down?

    .venv/bin/python benchmarks/diag_decode_gap.py [--model PATH] [--threads 2] [--rounds 3]

A bare llama-cpp-python loop (no sampler, no edgeprof): a 128-token prompt, then 64 single-token decodes at
ctx 256, with the calling thread busy-waiting GAP seconds between decodes (0, 50 µs, 0.5 ms, 2 ms). It prints
the time inside ``llama_decode`` + ``llama_synchronize`` per token, per gap, interleaved over rounds. With an
OpenMP build the CPU threads spin for a while after each graph and then sleep; waking them is paid inside the
next decode, where llama.cpp's own counters see it. A lead for the open tg gap against llama-bench (issue 12),
whose loop has no gap at all.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

DEFAULT_MODEL = Path.home() / ".local/share/edgeprof/models/edgeprof-demo-small-q4_k_m.gguf"
GAPS_S = (0.0, 0.00005, 0.0005, 0.002)


def inside_ms_per_token(ll: object, model: object, threads: int, gap_s: float) -> float:
    lc = ll  # llama_cpp module
    cp = lc.llama_context_default_params()  # type: ignore[attr-defined]
    cp.n_ctx, cp.n_batch, cp.n_ubatch = 256, 512, 512
    cp.n_threads = cp.n_threads_batch = threads
    ctx = lc.llama_init_from_model(model, cp)  # type: ignore[attr-defined]
    try:
        prompt = (lc.llama_token * 128)(*([1] + [300 + i for i in range(127)]))  # type: ignore[attr-defined]
        lc.llama_decode(ctx, lc.llama_batch_get_one(prompt, 128))  # type: ignore[attr-defined]
        lc.llama_synchronize(ctx)  # type: ignore[attr-defined]
        tok = (lc.llama_token * 1)(400)  # type: ignore[attr-defined]
        inside = 0.0
        for i in range(64):
            tok[0] = 400 + i
            t0 = time.perf_counter()
            lc.llama_decode(ctx, lc.llama_batch_get_one(tok, 1))  # type: ignore[attr-defined]
            lc.llama_synchronize(ctx)  # type: ignore[attr-defined]
            inside += time.perf_counter() - t0
            end = time.perf_counter() + gap_s
            while time.perf_counter() < end:  # busy, like Python sampling and bookkeeping would be
                pass
        return inside * 1000.0 / 64
    finally:
        lc.llama_free(ctx)  # type: ignore[attr-defined]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import llama_cpp as ll

    ll.llama_backend_init()
    model = ll.llama_model_load_from_file(str(args.model).encode(), ll.llama_model_default_params())
    results: dict[float, list[float]] = {g: [] for g in GAPS_S}
    for _ in range(args.rounds):
        for gap in GAPS_S:
            results[gap].append(inside_ms_per_token(ll, model, args.threads, gap))
    print(f"{'gap between decodes':>22}  inside-decode ms/token: median (min-max) over {args.rounds} rounds")
    for gap, values in results.items():
        print(f"{gap * 1e6:>19.0f} µs  {statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
