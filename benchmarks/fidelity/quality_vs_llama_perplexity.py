#!/usr/bin/env python3
"""Quality benchmark: edgeprof's KLD / same-top / PPL against llama.cpp's own ``llama-perplexity``.

Both tools run the same llama.cpp (llama-perplexity is built from the source vendored in the installed
llama-cpp-python's sdist, see ``build_llama_bench.sh``) on the same demo files (F16 reference, Q8_0, Q5_K_M,
Q4_K_M), the same text (edgeprof's default text), the same ctx, chunk count, batch and threads:

* llama-perplexity: ``--kl-divergence-base`` on the F16 (writes its 16-bit base file and prints the F16's
  PPL), then ``--kl-divergence`` for each variant against that file;
* edgeprof: one sweep of a plan with a ``kind = "quality"`` workload over the four files.

Checks: mean KLD within 2 % relative (or 1e-4 absolute), same top within 0.5 percentage points, PPL within
0.5 % (each variant's, and the reference's).

Usage (from the repository root, with the venv active)::

    TARGETS="llama-bench llama-perplexity" benchmarks/fidelity/build_llama_bench.sh   # once
    python benchmarks/fidelity/quality_vs_llama_perplexity.py                          # ~2 min on 2 quiet cores

Results are printed side by side and written to ``benchmarks/out/quality-<date>.json``; exit 1 when a check
fails.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import OUT_DIR, built_tool, log

VARIANTS = ("Q8_0", "Q5_K_M", "Q4_K_M")


def find_tool(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    found = built_tool("llama-perplexity")
    if found:
        return found
    on_path = shutil.which("llama-perplexity")
    if on_path:
        return Path(on_path)
    sys.exit(
        'llama-perplexity not found: run TARGETS="llama-bench llama-perplexity" '
        "benchmarks/fidelity/build_llama_bench.sh first (or pass --llama-perplexity)"
    )


def _number(pattern: str, text: str, what: str) -> float:
    m = re.search(pattern, text)
    if m is None:
        tail = "\n".join(text.splitlines()[-15:])
        sys.exit(f"llama-perplexity printed no {what}; its last lines:\n{tail}")
    return float(m.group(1))


# llama.cpp's logger (common/log.cpp) is a leaked singleton with a worker thread, so the last lines of a run,
# the final statistics among them, are often lost when the process exits (the source says so).
# A preloaded destructor that waits half a second at exit lets the worker write them; nothing else changes.
SHIM_C = (
    "#include <unistd.h>\n"
    "__attribute__((destructor)) static void edgeprof_wait_for_log_thread(void) { usleep(500000); }\n"
)


def log_shim(work: Path) -> Path:
    src, lib = work / "logshim.c", work / "logshim.so"
    src.write_text(SHIM_C)
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        sys.exit("a C compiler (cc) is needed for the log shim; llama-perplexity was built with one")
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(lib), str(src)], check=True)
    return lib


def run_llama_perplexity(tool: Path, args: list[str], shim: Path, timeout_s: float = 1800.0) -> str:
    """llama-perplexity's whole output; it is written to benchmarks/out/llama-perplexity.log as it runs, so
    that a long task set can be watched (``tail -f``)."""
    cmd = [str(tool), *args]
    log(" ".join(cmd))
    env = {**os.environ, "LD_PRELOAD": str(shim)}
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    with (OUT_DIR / "llama-perplexity.log").open("w+") as out:
        proc = subprocess.run(
            cmd, stdout=out, stderr=subprocess.STDOUT, text=True, timeout=timeout_s, env=env, check=False
        )
        out.seek(0)
        text = out.read()
    if proc.returncode != 0:
        sys.exit(f"llama-perplexity failed ({proc.returncode}):\n{text[-3000:]}")
    return text


def llama_side(
    tool: Path,
    models: dict[str, Path],
    text_file: Path,
    ctx: int,
    chunks: int,
    threads: int,
    fa: str,
    work: Path,
) -> dict[str, Any]:
    base = work / "base.kld"
    shim = log_shim(work)
    common = [
        "-c",
        str(ctx),
        "-b",
        str(ctx),
        "-ub",
        str(min(512, ctx)),
        "-t",
        str(threads),
        "--chunks",
        str(chunks),
        "-ngl",
        "0",
        "-fa",
        fa,
    ]  # llama.cpp's default -fa is auto
    out = run_llama_perplexity(
        tool,
        ["-m", str(models["F16"]), "-f", str(text_file), "--kl-divergence-base", str(base), *common],
        shim,
    )
    result: dict[str, Any] = {"ppl_ref": _number(r"Final estimate: PPL = ([0-9.eE+-]+)", out, "final PPL")}
    for quant in VARIANTS:
        out = run_llama_perplexity(
            tool,
            ["-m", str(models[quant]), "--kl-divergence-base", str(base), "--kl-divergence", *common],
            shim,
        )
        result[quant] = {
            "ppl": _number(r"Mean PPL\(Q\)\s*:\s*([0-9.eE+-]+)", out, "Mean PPL(Q)"),
            "ppl_base": _number(r"Mean PPL\(base\)\s*:\s*([0-9.eE+-]+)", out, "Mean PPL(base)"),
            "kld_mean": _number(r"Mean\s+KLD:\s*([0-9.eE+-]+)", out, "Mean KLD"),
            "kld_p99": _number(r"99\.0%\s+KLD:\s*([0-9.eE+-]+)", out, "99% KLD"),
            "same_top_pct": _number(r"Same top p:\s*([0-9.eE+-]+)", out, "Same top p"),
        }
    return result


PLAN = """
name = "quality-vs-llama-perplexity"
[matrix]
models = [
  {{ path = "{F16}", label = "F16" }},
  {{ path = "{Q8_0}", label = "Q8_0" }},
  {{ path = "{Q5_K_M}", label = "Q5_K_M" }},
  {{ path = "{Q4_K_M}", label = "Q4_K_M" }},
]
ngl = [0]
threads = [{threads}]
flash_attn = ["{fa}"]
[[workload]]
name = "kld"
kind = "quality"
ctx = {ctx}
chunks = {chunks}
reference = "F16"
[run]
timeout_s = 1800
cold_cache = "keep"
[collect]
idle_s = 0
"""


def edgeprof_side(
    models: dict[str, Path], ctx: int, chunks: int, threads: int, fa: str, work: Path
) -> dict[str, Any]:
    os.environ["EDGEPROF_CACHE_DIR"] = str(work / "cache")
    from edgeprof.plan import parse_plan
    from edgeprof.report import build_rows
    from edgeprof.storage.db import new_session, open_engine
    from edgeprof.sweep import run_plan

    paths = {k: str(v) for k, v in models.items()}
    text = PLAN.format(ctx=ctx, chunks=chunks, threads=threads, fa=fa, **paths)
    plan = parse_plan(text, source=str(work / "plan.toml"), base=work)
    engine = open_engine(work / "edgeprof.db")
    log("edgeprof: quality sweep over F16 + " + ", ".join(VARIANTS))
    outcome = run_plan(engine, plan, out=io.StringIO())
    if outcome.counts != {"ok": 4}:
        sys.exit(f"edgeprof sweep did not finish cleanly: {outcome.counts}")
    with new_session(engine) as session:
        rows = {r["model_label"]: r for r in build_rows(session, outcome.sweep_id)}
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-perplexity", help="path of llama-perplexity (default: the one built here)")
    ap.add_argument("--size", default="small", choices=("tiny", "small"), help="demo model size")
    ap.add_argument("--models-dir", type=Path, default=OUT_DIR / "quality-models")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--fa", default="off", choices=("off", "on"), help="flash attention, both tools")
    args = ap.parse_args()

    from edgeprof.gguf import build_demo_models
    from edgeprof.plan import DEFAULT_TEXT_SHA256, default_text

    tool = find_tool(args.llama_perplexity)
    models = build_demo_models(args.models_dir, args.size)
    with tempfile.TemporaryDirectory(prefix="edgeprof-quality-bench-") as tmp:
        work = Path(tmp)
        text_file = work / "text.txt"
        text_file.write_bytes(default_text().encode("utf-8"))
        t0 = time.monotonic()
        llama = llama_side(tool, models, text_file, args.ctx, args.chunks, args.threads, args.fa, work)
        t1 = time.monotonic()
        ours = edgeprof_side(models, args.ctx, args.chunks, args.threads, args.fa, work)
        t2 = time.monotonic()

    checks: list[tuple[str, bool, str]] = []
    lines = [f"{'quant':8s} {'metric':14s} {'edgeprof':>14s} {'llama-perplexity':>17s}  check"]

    def compare(quant: str, metric: str, mine: float, theirs: float, ok: bool, rule: str) -> None:
        checks.append((f"{quant} {metric}", ok, rule))
        verdict = "ok" if ok else "FAIL"
        lines.append(f"{quant:8s} {metric:14s} {mine:14.6g} {theirs:17.6g}  {verdict} ({rule})")

    ref = ours["F16"]
    rel = abs(ref["ppl"] - llama["ppl_ref"]) / llama["ppl_ref"]
    compare("F16", "PPL (ref)", ref["ppl"], llama["ppl_ref"], rel <= 0.005, f"rel {rel * 100:.3f} % <= 0.5 %")
    for quant in VARIANTS:
        mine, theirs = ours[quant], llama[quant]
        d = abs(mine["kld_mean"] - theirs["kld_mean"])
        ok = d <= 1e-4 or d <= 0.02 * abs(theirs["kld_mean"])
        compare(
            quant,
            "mean KLD",
            mine["kld_mean"],
            theirs["kld_mean"],
            ok,
            f"|d| {d:.2e}, rel {d / max(abs(theirs['kld_mean']), 1e-300) * 100:.2f} % <= 2 % or 1e-4",
        )
        pp = abs(mine["same_top_pct"] - theirs["same_top_pct"])
        compare(
            quant,
            "same top %",
            mine["same_top_pct"],
            theirs["same_top_pct"],
            pp <= 0.5,
            f"{pp:.3f} pp <= 0.5 pp",
        )
        r = abs(mine["ppl"] - theirs["ppl"]) / theirs["ppl"]
        compare(quant, "PPL", mine["ppl"], theirs["ppl"], r <= 0.005, f"rel {r * 100:.3f} % <= 0.5 %")
        lines.append(
            f"{quant:8s} {'p99 KLD':14s} {mine['kld_p99']:14.6g} {theirs['kld_p99']:17.6g}  "
            "(info: nearest rank vs interpolated)"
        )
    print("\n".join(lines))
    n_tok = ref["quality_n_tokens"]
    print(
        f"\n{args.size} demo models, ctx {args.ctx}, {args.chunks} chunks ({n_tok} scored tokens), "
        f"{args.threads} threads, flash-attn {args.fa}; text sha256 {DEFAULT_TEXT_SHA256[:16]}…; "
        f"llama-perplexity {t1 - t0:.0f} s, edgeprof {t2 - t1:.0f} s"
    )
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    out = OUT_DIR / f"quality-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    keys = ("kld_mean", "kld_se", "kld_p99", "same_top_pct", "ppl", "ppl_ref", "delta_ppl")
    keys += ("quality_n_tokens",)
    out.write_text(
        json.dumps(
            {
                "size": args.size,
                "ctx": args.ctx,
                "chunks": args.chunks,
                "threads": args.threads,
                "fa": args.fa,
                "llama_perplexity": llama,
                "edgeprof": {q: {k: ours[q][k] for k in keys} for q in ("F16", *VARIANTS)},
                "checks": [{"what": w, "ok": ok, "rule": r} for w, ok, r in checks],
            },
            indent=2,
        )
    )
    print(f"written {out}")
    return 0 if all(ok for _w, ok, _r in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
