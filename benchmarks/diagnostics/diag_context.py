"""One llama.cpp context set up exactly as edgeprof's worker sets it up, for the in-process diagnostics
(``diag_worker_vs_bare.py``, ``diag_token_pairs.py``): ``llama_context.load_model`` with the plan's
parameters, llama-bench's context values, the attached threadpool and the log capture, plus the worker's
``Request`` and its deterministic prompt."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pp", type=int, default=128)
    ap.add_argument("--tg", type=int, default=64)
    ap.add_argument("--ctx", type=int, default=256)


@dataclass
class WorkerContext:
    ll: Any
    model: Any
    ctx: Any
    effective: dict[str, Any]
    vocab: Any
    n_vocab: int
    mem: Any
    request: Any
    prompt: list[int]

    def free(self) -> None:
        self.ll.llama_free(self.ctx)
        self.ll.llama_model_free(self.model)


def worker_context(args: argparse.Namespace) -> WorkerContext:
    import llama_cpp as ll

    from edgeprof.runners import llama_worker as worker
    from edgeprof.runners.llama_context import install_log_capture, load_model

    job: dict[str, Any] = {
        "model_path": args.model,
        "params": {
            "n_ctx": args.ctx, "n_gpu_layers": 0, "n_threads": args.threads, "n_batch": 512, "n_ubatch": 512,
            "flash_attn": "off", "type_k": "f16", "type_v": "f16", "use_mmap": True,
        },
        "workload": {
            "name": "diag", "prompt": None, "prompt_tokens": args.pp, "n_predict": args.tg + 1,
            "temperature": 0.0, "seed": 42, "ignore_eos": True,
        },
    }  # fmt: skip
    install_log_capture(ll)
    ll.llama_backend_init()
    model, ctx, effective = load_model(ll, job)
    vocab = ll.llama_model_get_vocab(model)
    request = worker.Request(ll, ctx, vocab, job)
    return WorkerContext(
        ll=ll,
        model=model,
        ctx=ctx,
        effective=effective,
        vocab=vocab,
        n_vocab=int(ll.llama_vocab_n_tokens(vocab)),
        mem=ll.llama_get_memory(ctx),
        request=request,
        prompt=request._exact_tokens(args.pp, ""),
    )
