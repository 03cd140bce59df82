"""The child process of a task run: score a task set's chosen tasks with one model, as llama-perplexity does.

Run as ``python -m edgeprof.runners.tasks.worker --event-fd N`` with the job (JSON) on stdin, like the
other workers (same events, exit codes, fault injection and model loading). It reads the task file again
(its sha256 must be the one the plan validated), draws the same subset, tokenizes, and decodes the tasks
batch by batch as llama-perplexity packs them (runners/tasks/score.py), appending each batch's results to
the run's checkpoint (runners/tasks/checkpoint.py) before the next: a run killed half-way keeps what it
scored. Events: ``task_plan`` (tasks, of which already done, tokens to evaluate) before the first batch,
``task_progress`` after each batch, ``tasks`` at the end.
"""

from __future__ import annotations

import ctypes
import hashlib
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from edgeprof.runners.llama_worker import begin, emit, emit_hello, load_reported, maybe_fault
from edgeprof.runners.protocol import EXIT_BAD_SPEC, EXIT_LOAD_FAILED, EXIT_OK, EXIT_REQUEST_FAILED, vm_hwm_mb
from edgeprof.runners.quality_worker import tokenize
from edgeprof.runners.tasks import checkpoint
from edgeprof.runners.tasks.data import parse_tasks, select
from edgeprof.runners.tasks.score import Prepared, batch_groups, build_batch, prepare, score_group


def load_selected(spec: dict[str, Any]) -> list[Any]:
    """The chosen tasks of the job's file, in scoring order; ValueError when the file changed since."""
    data = Path(spec["file"]).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec["file_sha256"]:
        raise ValueError(f"{spec['file']} changed since the plan was checked (sha256 {digest[:16]}…)")
    tasks = parse_tasks(spec["task"], data, spec["file"])
    order = select(spec["task"], len(tasks), spec.get("tasks"), int(spec["seed"]))
    return [tasks[i] for i in order]


def decode_group(
    ll: Any, ctx: Any, group: list[Prepared], n_batch: int, n_vocab: int
) -> tuple[Any, list[int]]:
    """Decode one packed batch (KV cache cleared first); (output rows float32, each task's first row)."""
    entries, starts = build_batch(group)
    n_out = sum(e.output for e in entries)
    logits = np.empty((n_out, n_vocab), dtype=np.float32)
    ll.llama_memory_clear(ll.llama_get_memory(ctx), True)
    n_seq = max(len(e.seq_ids) for e in entries)
    batch = ll.llama_batch_init(n_batch, 0, n_seq)
    row = 0
    try:
        for j0 in range(0, len(entries), n_batch):
            part = entries[j0 : j0 + n_batch]
            batch.n_tokens = len(part)
            for k, e in enumerate(part):
                batch.token[k] = e.token
                batch.pos[k] = e.pos
                batch.n_seq_id[k] = len(e.seq_ids)
                for m, sid in enumerate(e.seq_ids):
                    batch.seq_id[k][m] = sid
                batch.logits[k] = 1 if e.output else 0
            rc = ll.llama_decode(ctx, batch)
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc} (KV cache full or batch rejected)")
            n = sum(e.output for e in part)
            if n:
                ptr = ll.llama_get_logits(ctx)
                src = np.ctypeslib.as_array(
                    ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), shape=(n, n_vocab)
                )
                logits[row : row + n] = src
                row += n
    finally:
        ll.llama_batch_free(batch)
    return logits, starts


def _item(i: int, s: Any) -> dict[str, Any]:
    return {
        "i": i,
        "index": s.index,
        "pred": s.pred,
        "correct": s.correct,
        "scores": list(s.scores),  # unrounded: compared with llama-perplexity to its printed decimals
        "margin": s.margin if s.margin != float("inf") else None,
    }


def run_tasks(ll: Any, ctx: Any, vocab: Any, job: dict[str, Any], n_vocab: int) -> None:
    spec = job["task"]
    selected = load_selected(spec)
    path, key = Path(job["checkpoint"]), job["checkpoint_key"]
    done = checkpoint.read(path, key)
    prepared = [
        prepare(spec["task"], t, lambda text: tokenize(ll, vocab, text)) for t in selected[len(done) :]
    ]
    n_tokens = sum(p.required_tokens for p in prepared)
    emit("task_plan", n_tasks=len(selected), n_done=len(done), n_tokens=n_tokens)
    writer = checkpoint.Writer(path, key, done)
    n_ctx, n_batch = int(job["params"]["n_ctx"]), int(job["params"]["n_batch"])
    i_next = len(done)
    try:
        for i0, i1 in batch_groups(prepared, n_ctx):
            group = prepared[i0:i1]
            t0 = time.monotonic()
            logits, starts = decode_group(ll, ctx, group, n_batch, n_vocab)
            scored = score_group(group, logits.__getitem__, starts)
            items = [_item(i_next + k, s) for k, s in enumerate(scored)]
            writer.add(items)
            i_next += len(items)
            t1 = time.monotonic()
            emit("phase", name="task_score", kind="task", rep=i0, t_start=t0, t_end=t1)
            emit(
                "task_progress",
                n_done=i_next,
                n_tasks=len(selected),
                n_correct=sum(s.correct for s in scored),
            )
            maybe_fault(f"task{i_next}", job["model_path"])
    finally:
        writer.close()
    emit("tasks", n_tasks=len(selected), n_resumed=len(done), n_tokens=n_tokens, peak_rss_mb=vm_hwm_mb())


def main(argv: list[str]) -> int:
    job = begin(argv, "edgeprof.runners.tasks.worker")
    if job is None:
        return EXIT_BAD_SPEC
    import llama_cpp as ll

    ll.llama_backend_init()
    emit_hello(ll)
    loaded = load_reported(ll, job, phase_kind="task")
    if loaded is None:
        return EXIT_LOAD_FAILED
    model, ctx = loaded
    vocab = ll.llama_model_get_vocab(model)
    n_vocab = int(ll.llama_vocab_n_tokens(vocab))
    try:
        maybe_fault("prefill", job["model_path"])
        run_tasks(ll, ctx, vocab, job, n_vocab)
    except Exception as exc:  # noqa: BLE001 - reported to the parent with its stage
        emit("error", stage="request", message=f"{type(exc).__name__}: {exc}")
        return EXIT_REQUEST_FAILED
    finally:
        ll.llama_free(ctx)
        ll.llama_model_free(model)
    emit("done", t=time.monotonic())
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
