#!/usr/bin/env python3
"""edgeprof's memory prediction against the measured peak, on a model larger than the test suite's: the
small demo architecture with a large vocabulary (Gemma's 262 144 tokens by default, where a quality run's
logits and scoring arrays dominate) and as many layers as asked, written in F16 and quantized to Q8_0 by
llama.cpp's quantizer.

One sweep on this machine's real memory figures: a generation workload and a quality workload at each ctx,
both variants. Per run it prints the prediction made before the run started (``mem_predicted_mb``), the
child's measured peak (``peak_rss_mb``, its VmHWM), their ratio and whether the difference is inside the
band the test suite holds (5 % + 4 MiB for generation, 15 % + 16 MiB for quality runs). The model is
SYNTHETIC (random weights); its shapes and types are a real llama model's.

Usage (repository root, venv active)::

    python benchmarks/fidelity/memory_prediction.py [--vocab 262144] [--layers 8] [--ctx 512,2048]

Writes ``benchmarks/out/memory-prediction-<date>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import tempfile
from pathlib import Path

from common import OUT_DIR, log
from sqlalchemy import select

from edgeprof.gguf import quantize, write_f16_gguf
from edgeprof.plan import parse_plan
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Run
from edgeprof.sweep import run_plan

Q8_0_FTYPE = 7  # llama.cpp's LLAMA_FTYPE_MOSTLY_Q8_0
BANDS = {"gen": (0.05, 4.0), "quality": (0.15, 16.0)}  # (relative, MiB), as the tests hold them

PLAN = """
name = "memory-prediction"
[matrix]
models = [{{ path = "{f16}", label = "f16" }}, {{ path = "{q8}", label = "q8_0" }}]
ctx = [{ctxs}]
threads = [{threads}]
[[workload]]
name = "gen"
prompt_tokens = 64
n_predict = 32
{quality}
[repeat]
cold = 1
warmup = 0
steady = 1
[run]
cold_cache = "keep"
timeout_s = 1200
"""

QUALITY = """
[[workload]]
name = "kld{ctx}"
kind = "quality"
ctx = {ctx}
chunks = 2
"""


def build_models(work: Path, vocab: int, layers: int) -> tuple[Path, Path]:
    f16 = write_f16_gguf(work / f"small-v{vocab}-l{layers}-f16.gguf", "small", n_vocab=vocab, n_layer=layers)
    q8 = work / f"small-v{vocab}-l{layers}-q8_0.gguf"
    quantize(f16, q8, Q8_0_FTYPE)
    return f16, q8


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, default=262_144)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--ctx", default="512,2048", help="comma-separated context sizes")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    ctxs = [int(c) for c in args.ctx.split(",") if c]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        log(f"writing a {args.vocab}-token, {args.layers}-layer model (F16 + Q8_0)")
        f16, q8 = build_models(work, args.vocab, args.layers)
        sizes = {"f16": f16.stat().st_size / 2**20, "q8_0": q8.stat().st_size / 2**20}
        quality = "".join(QUALITY.format(ctx=c) for c in ctxs)
        text = PLAN.format(
            f16=f16, q8=q8, ctxs=", ".join(map(str, ctxs)), threads=args.threads, quality=quality
        )
        plan = parse_plan(text, str(work / "plan.toml"), work)
        engine = open_engine(work / "m.db")
        log(f"running {plan.n_specs()} configs")
        outcome = run_plan(engine, plan, out=io.StringIO())
        with new_session(engine) as s:
            runs = list(s.scalars(select(Run).where(Run.sweep_id == outcome.sweep_id).order_by(Run.id)))
            cases = [
                (r.model_label, r.workload_name, r.n_ctx, r.status, r.mem_predicted_mb, r.peak_rss_mb)
                for r in runs
            ]
        engine.dispose()
    results = []
    print("model files: " + ", ".join(f"{k} {v:.0f} MiB" for k, v in sizes.items()))
    print(
        f"{'model':6s} {'workload':9s} {'ctx':>5s} {'status':8s} {'pred MiB':>9s} {'peak MiB':>9s} ratio  band"
    )
    for label, workload, ctx, status, pred, peak in cases:
        kind = "gen" if workload == "gen" else "quality"
        rel, abs_mb = BANDS[kind]
        ratio = pred / peak if pred and peak else None
        inside = abs(pred - peak) <= rel * peak + abs_mb if pred and peak else None
        results.append(
            dict(
                model=label,
                workload=workload,
                ctx=ctx,
                status=status,
                predicted_mib=pred,
                peak_mib=peak,
                ratio=ratio,
                inside_band=inside,
            )
        )
        shown = f"{ratio:.3f}" if ratio is not None else "—"
        print(
            f"{label:6s} {workload:9s} {ctx:5d} {status:8s} {pred or 0:9.1f} {peak or 0:9.1f} {shown:5s}  "
            f"{'ok' if inside else 'OUTSIDE' if inside is False else '—'}"
        )
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    out = OUT_DIR / f"memory-prediction-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    out.write_text(json.dumps({"args": vars(args), "model_mib": sizes, "results": results}, indent=2))
    log(f"written to {out}")
    return 0 if all(r["inside_band"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
