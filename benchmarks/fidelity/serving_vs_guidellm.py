#!/usr/bin/env python3
"""edgeprof's serving client against GuideLLM on the same llama-server: TTFT p50, TPOT p50 and output
tok/s at each concurrency, both clients taking turns batch by batch on one server per concurrency (started
with edgeprof's own command line, ``runners.llama_server.server_args``), and the cost of edgeprof's own
``/metrics`` polling and telemetry sampler to a server that decodes on one thread.

Clients, in a rotating order each round:

* ``edgeprof``: ``runners.loadgen`` as a sweep drives it: ``/metrics`` polled every 0.5 s on the driver's
  kept-alive client, the sampler thread at 200 ms with the default collectors following the server's pid and
  writing to SQLite;
* ``old-poll``: as ``edgeprof``, but a fresh ``httpx.AsyncClient`` per poll, as the driver did before it kept
  one (its ~25 ms of CPU per client on the event loop slowed the server by ~10 % on a 2-core machine);
* ``no-poll``, ``no-sampler``, ``bare``: the same without the polling, without the sampler, without both;
* ``guidellm``: GuideLLM from PyPI (its own venv, ``benchmarks/out/guidellm-venv``, made on first use),
  concurrent profile, OpenAI ``/v1/completions`` streamed, the same sampling settings as edgeprof's payload.

Both send prompts of the same length and no shared prefix: edgeprof its token-id prompts (``prompt_tokens``);
GuideLLM text prompts built from the GGUF's own vocabulary (whole-word pieces), each checked with the
server's ``/tokenize`` to be exactly as long, so GuideLLM needs no tokenizer (it needs one only for its
synthetic data, and transformers' GGUF converter counts the demo vocabulary differently from llama.cpp).
Every figure is computed the same way from per-request times on both sides (nearest rank, warm-ups
dropped): TTFT; TPOT = (E2EL − TTFT)/(n − 1), which GuideLLM calls ITL; E2EL/n, which GuideLLM calls TPOT;
output tok/s = output tokens / (first send → last end). GuideLLM's own summary is kept beside them.

Usage (repository root, venv active, llama-server built by scripts/setup.sh)::

    python benchmarks/fidelity/serving_vs_guidellm.py [--size small] [--conc 1,4] [--rounds 5] [--requests 24]

Prints the ratios and writes ``benchmarks/out/serving-vs-guidellm-<date>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from common import OUT_DIR, log

GUIDELLM = "guidellm==0.8.1"
VENV = OUT_DIR / "guidellm-venv"
VARIANTS = ("edgeprof", "old-poll", "no-poll", "no-sampler", "bare", "guidellm")
SAMPLED = ("edgeprof", "old-poll", "no-poll")  # the variants with the sampler thread running
SAMPLING = {"temperature": 0.0, "top_k": 40, "top_p": 0.95, "seed": 42}  # edgeprof's payload defaults


def ensure_guidellm() -> Path:
    """GuideLLM's command in its own venv, installed from PyPI the first time."""
    exe = VENV / "bin" / "guidellm"
    if not exe.exists():
        log(f"installing {GUIDELLM} into {VENV} (a few minutes, ~6 GB with torch)")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", GUIDELLM], check=True)
    return exe


def nearest(values: Sequence[float], q: float = 0.5) -> float | None:
    from edgeprof.stats import nearest_rank

    return nearest_rank(values, q)


# -- the server ---------------------------------------------------------------------------------------------
class Server:
    """One llama-server with edgeprof's command line for ``slots`` clients; stopped by its own pid."""

    def __init__(self, model: Path, slots: int, args: argparse.Namespace) -> None:
        from edgeprof.runners.llama_server import find_server, free_port, server_args

        path, where = find_server()
        if path is None:
            raise SystemExit(f"serving_vs_guidellm: no llama-server: {where}")
        params = {"n_ctx": args.ctx, "n_gpu_layers": 0, "n_threads": args.threads, "n_batch": 2048,
                  "n_ubatch": 512, "flash_attn": "auto", "type_k": "f16", "type_v": "f16"}  # fmt: skip
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        cmd = [path, *server_args(params, {"slots": slots}, str(model), self.port)]
        self.log = open(OUT_DIR / f"serving-vs-guidellm-server-c{slots}.log", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.command = cmd
        self.wait_ready()

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"llama-server exited with {self.proc.returncode}")
            try:
                if httpx.get(self.base + "/health", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise SystemExit("llama-server not ready")

    def tokenize(self, text: str) -> int:
        import httpx

        body = {"content": text, "add_special": False}
        return len(httpx.post(self.base + "/tokenize", json=body, timeout=10.0).json()["tokens"])

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


# -- prompts ------------------------------------------------------------------------------------------------
def vocab_pieces(model: Path) -> list[str]:
    """The GGUF's token pieces, in id order."""
    import gguf

    field = gguf.GGUFReader(str(model)).fields["tokenizer.ggml.tokens"]
    return [bytes(field.parts[i]).decode("utf-8", "replace") for i in field.data]


def vocab_words(model: Path) -> list[str]:
    """The GGUF's whole-word pieces (``▁`` + letters), as text words."""
    pieces = vocab_pieces(model)
    return [p[1:] for p in pieces if p.startswith("▁") and p[1:].isascii() and p[1:].isalpha()]


def text_prompt(server: Server, words: Sequence[str], n_text: int, seed: int) -> str:
    """A text of exactly ``n_text`` tokens for the server (no BOS), different for every ``seed``."""
    rng = random.Random(seed)
    chosen = [rng.choice(words) for _ in range(n_text)]
    for _ in range(4 * n_text):
        n = server.tokenize(" ".join(chosen))
        if n == n_text:
            return " ".join(chosen)
        if n > n_text:
            chosen.pop()
        else:
            chosen.append(rng.choice(words))
    raise SystemExit(f"no text of exactly {n_text} tokens found (seed {seed})")


def write_prompts(server: Server, model: Path, args: argparse.Namespace, path: Path, count: int) -> None:
    """GuideLLM's data file: one line per request. The server adds BOS to a text prompt and none to
    edgeprof's token-id prompt, so the text is one token shorter; both are checked in the results."""
    words = vocab_words(model)
    with path.open("w") as fh:
        for i in range(count):
            prompt = text_prompt(server, words, args.prompt - 1, seed=10_000 + i)
            fh.write(json.dumps({"prompt": prompt, "output_tokens_count": args.n_predict}) + "\n")


# -- edgeprof's client --------------------------------------------------------------------------------------
def start_sampler(pid: int, db: Path) -> Any:
    """The sweep's sampler: default collectors at 200 ms, the server's pid followed, rows into SQLite."""
    from sqlalchemy.orm import Session

    from edgeprof.collectors import build_collectors
    from edgeprof.storage.db import open_engine
    from edgeprof.storage.samples import write_batch
    from edgeprof.telemetry import Sampler

    engine = open_engine(db)

    def sink(rows: list[Any]) -> None:
        with Session(engine) as session:
            write_batch(session, None, rows)
            session.commit()

    sampler = Sampler(build_collectors(Path("/")), 0.2, sink)
    sampler.set_child_pid(pid)
    sampler.start()
    return sampler


async def edgeprof_batch(server: Server, c: int, args: argparse.Namespace, variant: str, first: int) -> dict:
    """c warm-up requests, then the measured batch, as ``runners.llama_server`` drives a level."""
    from edgeprof.runners import loadgen
    from edgeprof.runners.llama_server import control_client, payload_for, scrape_metrics

    job = {"workload": {"prompt_tokens": args.prompt, "n_predict": args.n_predict, **SAMPLING},
           "serving": {}, "vocab_size": args.vocab}  # fmt: skip
    payload = partial(payload_for, job)
    samples_db = OUT_DIR / "serving-vs-guidellm-samples.db"
    sampler = start_sampler(server.proc.pid, samples_db) if variant in SAMPLED else None
    async with control_client() as control:

        async def scrape() -> dict[str, float] | None:
            return await scrape_metrics(server.base, timeout_s=2.0, client=control)

        async def scrape_fresh() -> dict[str, float] | None:
            return await scrape_metrics(server.base, timeout_s=2.0)

        polled = {"edgeprof": scrape, "no-sampler": scrape, "old-poll": scrape_fresh}.get(variant)
        warm = loadgen.LoadSpec(concurrency=c, n_requests=c, duration_s=None, timeout_s=60.0)
        await loadgen.run_level(server.base, payload, warm, kind="warmup", first_idx=first)
        load = loadgen.LoadSpec(concurrency=c, n_requests=args.requests, duration_s=None, timeout_s=60.0)
        out = await loadgen.run_level(server.base, payload, load, first_idx=first + c, scrape=polled)
    if sampler is not None:
        sampler.stop()
    per_request = [edgeprof_request(r) for r in out.records if r.status == "ok"]
    return figures(per_request, out.t_start, out.t_end, len(out.records)) | {
        "polls": len(out.metrics_samples)
    }


def edgeprof_request(r: Any) -> dict[str, Any]:
    """One ``loadgen.RequestRecord`` as the figures read it, with the server's own ms per decoded token."""
    n = r.output_tokens
    server = r.server_predicted_ms / (n - 1) if r.server_predicted_ms is not None and n and n > 1 else None
    return {"ttft_ms": r.ttft_ms, "tpot_ms": r.tpot_ms, "e2e_tok_ms": r.tpot_e2e_ms, "output_tokens": n,
            "prompt_tokens": r.prompt_tokens, "server_ms_tok": server}  # fmt: skip


# -- GuideLLM -----------------------------------------------------------------------------------------------
def guidellm_batch(exe: Path, server: Server, c: int, args: argparse.Namespace, data: Path) -> dict:
    """One GuideLLM run of c + N requests at c streams; the first c (one per stream) dropped as warm-ups."""
    out_json = OUT_DIR / f"guidellm-c{c}.json"
    scenario = {"spec": {
        "backend": {"kind": "openai_http", "target": server.base, "request_format": "/v1/completions",
                    "extras": {"body": {**SAMPLING, "cache_prompt": False}}},
        "profile": {"kind": "concurrent", "streams": [c]},
        "data": [{"kind": "json_file", "path": str(data)}],
        "constraints": [{"kind": "max_requests", "count": c + args.requests}],
        "outputs": [{"kind": "json", "path": str(out_json)}],
    }}  # fmt: skip
    path = OUT_DIR / f"guidellm-scenario-c{c}.json"
    path.write_text(json.dumps(scenario))
    proc = subprocess.run([str(exe), "run", "-c", str(path), "--disable-console"], capture_output=True,
                          text=True, timeout=900, check=False)  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"guidellm failed ({proc.returncode}): {proc.stderr[-2000:]}")
    bench = json.loads(out_json.read_text())["benchmarks"][0]
    done = sorted(bench["requests"]["successful"], key=lambda r: r["request_start_time"])[c:]
    per_request = [
        {"ttft_ms": r["time_to_first_token_ms"], "tpot_ms": r["inter_token_latency_ms"],
         "e2e_tok_ms": r["time_per_output_token_ms"], "output_tokens": r["output_tokens"],
         "prompt_tokens": r["prompt_tokens"], "server_ms_tok": None}
        for r in done
    ]  # fmt: skip
    t0 = min(r["request_start_time"] for r in done)
    t1 = max(r["request_end_time"] for r in done)
    own = bench["metrics"]
    summary = {
        "ttft_ms_median": own["time_to_first_token_ms"]["successful"]["median"],
        "itl_ms_median": own["inter_token_latency_ms"]["successful"]["median"],
        "tpot_ms_median": own["time_per_output_token_ms"]["successful"]["median"],
        "output_tokens_per_second_mean": own["output_tokens_per_second"]["successful"]["mean"],
    }
    return figures(per_request, t0, t1, len(done)) | {"guidellm_summary": summary}


def figures(per_request: list[dict], t0: float, t1: float, n_sent: int) -> dict:
    """p50s the same way for both clients (nearest rank), output tokens over first send → last end."""

    def p50(key: str) -> float | None:
        return nearest([v for r in per_request if (v := r[key]) is not None])

    out_tokens = sum(r["output_tokens"] or 0 for r in per_request)
    return {
        "n_ok": len(per_request), "n_sent": n_sent, "ttft_ms_p50": p50("ttft_ms"),
        "tpot_ms_p50": p50("tpot_ms"), "e2e_tok_ms_p50": p50("e2e_tok_ms"),
        "server_ms_tok_p50": p50("server_ms_tok"), "prompt_tokens_p50": p50("prompt_tokens"),
        "output_tokens_p50": p50("output_tokens"), "output_tps": out_tokens / (t1 - t0) if t1 > t0 else None,
    }  # fmt: skip


# -- the rounds and the table -------------------------------------------------------------------------------
def run_level(exe: Path, model: Path, c: int, args: argparse.Namespace) -> list[dict[str, dict]]:
    """Every round of one concurrency on one server: each client once, in a rotated order."""
    server = Server(model, c, args)
    rounds: list[dict[str, dict]] = []
    try:
        data = OUT_DIR / f"guidellm-prompts-c{c}.jsonl"
        write_prompts(server, model, args, data, c + args.requests)
        first = 1
        for k in range(args.rounds):
            order = list(VARIANTS[k % len(VARIANTS) :] + VARIANTS[: k % len(VARIANTS)])
            got: dict[str, dict] = {}
            for variant in order:
                if variant == "guidellm":
                    got[variant] = guidellm_batch(exe, server, c, args, data)
                else:
                    got[variant] = asyncio.run(edgeprof_batch(server, c, args, variant, first))
                    first += c + args.requests
                log(f"c={c} round {k + 1}/{args.rounds} {variant}: {short(got[variant])}")
            rounds.append(got)
    finally:
        server.stop()
    return rounds


def short(f: dict) -> str:
    keys = ("ttft_ms_p50", "tpot_ms_p50", "server_ms_tok_p50", "output_tps")
    return "  ".join(f"{k} {f[k]:.2f}" if f.get(k) is not None else f"{k} —" for k in keys)


def ratio_stats(rounds: list[dict[str, dict]], a: str, b: str, key: str) -> dict[str, Any]:
    """a/b of one figure within each round (the two batches seconds apart), and its median over rounds."""
    rs = [r[a][key] / r[b][key] for r in rounds if r[a].get(key) and r[b].get(key)]
    if not rs:
        return {"n": 0, "median": None, "min": None, "max": None, "per_round": []}
    return {"n": len(rs), "median": statistics.median(rs), "min": min(rs), "max": max(rs),
            "per_round": [round(x, 4) for x in rs]}  # fmt: skip


def print_table(results: dict[int, list[dict[str, dict]]]) -> dict[str, Any]:
    """Ratios edgeprof / GuideLLM, and what polling and the sampler cost (each against ``bare``)."""
    summary: dict[str, Any] = {}
    pairs = [
        ("edgeprof", "guidellm", k) for k in ("ttft_ms_p50", "tpot_ms_p50", "e2e_tok_ms_p50", "output_tps")
    ]
    pairs += [
        (v, "bare", k)
        for v in ("edgeprof", "old-poll", "no-poll", "no-sampler")
        for k in ("server_ms_tok_p50", "tpot_ms_p50", "output_tps")
    ]
    shown_keys = ("ttft_ms_p50", "tpot_ms_p50", "e2e_tok_ms_p50", "output_tps", "prompt_tokens_p50")
    for c, rounds in results.items():
        print(f"\nc = {c} ({len(rounds)} rounds; ratio within each round, median [min–max])")
        for a, b, key in pairs:
            st = ratio_stats(rounds, a, b, key)
            summary[f"c{c} {a}/{b} {key}"] = st
            shown = f"{st['median']:.3f} [{st['min']:.3f}–{st['max']:.3f}]" if st["n"] else "—"
            print(f"  {a + ' / ' + b + ' ' + key:<44} {shown}")
        for v in VARIANTS:
            med = {k: nearest([r[v][k] for r in rounds if r[v].get(k) is not None]) for k in shown_keys}
            cells = (f"{k} {x:.2f}" if x is not None else f"{k} —" for k, x in med.items())
            print(f"  {v:<11} " + "  ".join(cells))
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="small", help="demo model size (tiny | small)")
    ap.add_argument("--quant", default="Q4_K_M")
    ap.add_argument("--conc", default="1,4", help="concurrency levels, comma-separated")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=24, help="measured requests per batch")
    ap.add_argument("--prompt", type=int, default=64, help="prompt tokens")
    ap.add_argument("--n-predict", type=int, default=65)
    ap.add_argument("--ctx", type=int, default=512)
    # one thread: the case the finding is about (and two OpenMP threads stall on a shared 2-core VM)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    from edgeprof.gguf import build_demo_models
    from edgeprof.runners.llama_server import find_server, probe_server

    exe = ensure_guidellm()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    model = build_demo_models(OUT_DIR / f"demo-{args.size}", args.size)[args.quant]
    args.vocab = len(vocab_pieces(model))  # edgeprof's token-id prompts stay inside the vocabulary
    server_path, _where = find_server()
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    load_before = os.getloadavg()
    results = {c: run_level(exe, model, c, args) for c in (int(x) for x in args.conc.split(","))}
    summary = print_table(results)
    out = OUT_DIR / f"serving-vs-guidellm-{stamp}.json"
    out.write_text(json.dumps({
        "date_utc": stamp, "args": vars(args), "model": str(model), "guidellm": GUIDELLM,
        "machine": {"node": platform.node(), "cpu_count": os.cpu_count(), "load_before": load_before,
                    "load_after": os.getloadavg()},
        "server": probe_server(server_path) if server_path else None,
        "summary": summary, "rounds": {str(c): r for c, r in results.items()},
    }, indent=2, default=str))  # fmt: skip
    print(f"\nload average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}; written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
