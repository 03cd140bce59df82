"""The child process of a quality run: the reference's log-probs into the cache, or a variant against them.

Run as ``python -m edgeprof.runners.quality_worker --event-fd N`` with the job (JSON) on stdin, like
``llama_worker`` (same events, exit codes, fault injection and model loading), so a crash, OOM or hang is a
stored row. Two modes:

- ``base``: tokenize the text, cut it into chunks of ``ctx`` tokens, evaluate each chunk (first token set
  to BOS where the vocabulary adds one, as llama-perplexity does), and write the 16-bit log-probs of the
  second half of each chunk into the cache file, chunk by chunk. Its size is announced (``cache_plan``)
  before anything is written, and the job is refused when the disk cannot hold it.
- ``score``: evaluate the same tokens (read from the cache) with a variant and score each chunk against the
  cached reference rows as soon as it is computed: memory holds one chunk, never the whole file.

Logits come from llama.cpp's low-level API: one batch per ``n_batch`` tokens with an output requested for
every scored position, read with ``llama_get_logits_ith``.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from edgeprof.runners.llama_worker import begin, emit, emit_hello, load_reported, maybe_fault
from edgeprof.runners.protocol import EXIT_BAD_SPEC, EXIT_LOAD_FAILED, EXIT_OK, EXIT_REQUEST_FAILED, vm_hwm_mb
from edgeprof.runners.quality_math import (
    FORMAT_VERSION,
    CacheReader,
    CacheWriter,
    TokenScores,
    encode_rows,
    n_scored,
    predicted_size,
    score_rows,
    summarize,
)

# Test use only: pretend the cache folder's disk has this many bytes free (never set it in production).
FAKE_FREE_ENV = "EDGEPROF_TEST_DISK_FREE_BYTES"
# Room left on the disk beyond the cache itself: a full disk breaks the database and the logs too.
DISK_MARGIN_BYTES = 64 << 20


def tokenize(ll: Any, vocab: Any, text: str) -> list[int]:
    """The text's tokens with the vocabulary's BOS (llama-perplexity: common_tokenize(..., add_special))."""
    data = text.encode("utf-8")
    n_max = len(data) + 8
    buf = (ll.llama_token * n_max)()
    n = ll.llama_tokenize(vocab, data, len(data), buf, n_max, True, False)
    if n < 0:
        n_max = -n
        buf = (ll.llama_token * n_max)()
        n = ll.llama_tokenize(vocab, data, len(data), buf, n_max, True, False)
    return list(buf[:n])


def eval_chunk(
    ll: Any, ctx: Any, tokens: list[int], n_batch: int, bos: int | None, n_vocab: int
) -> np.ndarray:
    """Logits (float32, n_scored x n_vocab) at positions ctx/2 .. ctx-2 of one chunk, KV cache cleared."""
    n_ctx = len(tokens)
    first = n_ctx // 2
    toks = list(tokens)
    if bos is not None:
        toks[0] = bos  # llama-perplexity replaces the chunk's first token by BOS
    ll.llama_memory_clear(ll.llama_get_memory(ctx), True)
    out = np.empty((n_scored(n_ctx), n_vocab), dtype=np.float32)
    batch = ll.llama_batch_init(n_batch, 0, 1)
    try:
        for j0 in range(0, n_ctx, n_batch):
            n = min(n_batch, n_ctx - j0)
            batch.n_tokens = n
            for k in range(n):
                pos = j0 + k
                batch.token[k] = toks[pos]
                batch.pos[k] = pos
                batch.n_seq_id[k] = 1
                batch.seq_id[k][0] = 0
                batch.logits[k] = 1 if pos >= first else 0
            rc = ll.llama_decode(ctx, batch)
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc} (KV cache full or batch rejected)")
            for k in range(n):
                pos = j0 + k
                if first <= pos <= n_ctx - 2:
                    ptr = ll.llama_get_logits_ith(ctx, k)
                    out[pos - first] = np.ctypeslib.as_array(
                        ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), shape=(n_vocab,)
                    )
    finally:
        ll.llama_batch_free(batch)
    return out


def _base(ll: Any, ctx: Any, vocab: Any, job: dict[str, Any], n_vocab: int, bos: int | None) -> None:
    q = job["quality"]
    ctx_n = int(q["ctx"])
    tokens = tokenize(ll, vocab, job["text"])
    n_chunks = len(tokens) // ctx_n
    if q.get("chunks") is not None:
        n_chunks = min(n_chunks, int(q["chunks"]))
    n_chunks = min(n_chunks, int(q["max_chunks"]))
    if n_chunks < 1:
        raise ValueError(f"the text tokenizes to {len(tokens)} tokens, fewer than one chunk of ctx {ctx_n}")
    header = dict(job["cache_key"])
    header.update(
        format=FORMAT_VERSION,
        n_chunks=n_chunks,
        n_vocab=n_vocab,
        add_bos=bos is not None,
        n_text_tokens=len(tokens),
    )
    path = Path(job["cache_path"])
    size = predicted_size(header)
    path.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(path.parent).free
    if os.environ.get(FAKE_FREE_ENV):  # test use only, like the fault injection: a full disk on demand
        free = int(os.environ[FAKE_FREE_ENV])
    emit("cache_plan", path=str(path), bytes=size, free_bytes=free, n_chunks=n_chunks, n_vocab=n_vocab)
    if free < size + DISK_MARGIN_BYTES:
        raise OSError(
            f"the reference cache needs {size / 2**20:.1f} MiB (+{DISK_MARGIN_BYTES >> 20} MiB margin) in "
            f"{path.parent}, only {free / 2**20:.1f} MiB free; free space or set EDGEPROF_CACHE_DIR"
        )
    arr = np.asarray(tokens[: n_chunks * ctx_n], dtype=np.int64)
    writer = CacheWriter(path, header, arr)
    try:
        first = ctx_n // 2
        for i in range(n_chunks):
            chunk = tokens[i * ctx_n : (i + 1) * ctx_n]
            t0 = time.monotonic()
            logits = eval_chunk(ll, ctx, chunk, int(job["params"]["n_batch"]), bos, n_vocab)
            meta, qv = encode_rows(logits, arr[i * ctx_n + first + 1 : (i + 1) * ctx_n])
            writer.write_chunk(meta, qv)
            emit("phase", name="quality_base", kind="quality", rep=i, t_start=t0, t_end=time.monotonic())
        writer.finish()
    except BaseException:
        writer.abort()
        raise
    emit("cache_written", path=str(path), bytes=size, peak_rss_mb=vm_hwm_mb())


def _score(ll: Any, ctx: Any, job: dict[str, Any], n_vocab: int, bos: int | None) -> None:
    reader = CacheReader(Path(job["cache_path"]))
    if reader.n_vocab != n_vocab:
        raise ValueError(
            f"this model has {n_vocab} tokens in its vocabulary, the reference {reader.n_vocab}: "
            "not variants of one model"
        )
    if bool(reader.header.get("add_bos")) != (bos is not None):
        raise ValueError("this model and the reference disagree on adding BOS: not variants of one model")
    tokens = reader.tokens()
    ctx_n, first = reader.ctx, reader.ctx // 2
    scores = TokenScores.empty()
    for i, (meta, qv) in enumerate(reader.chunks()):
        chunk = [int(t) for t in tokens[i * ctx_n : (i + 1) * ctx_n]]
        t0 = time.monotonic()
        logits = eval_chunk(ll, ctx, chunk, int(job["params"]["n_batch"]), bos, n_vocab)
        scores.extend(score_rows(logits, tokens[i * ctx_n + first + 1 : (i + 1) * ctx_n], meta, qv))
        emit("phase", name="quality_score", kind="quality", rep=i, t_start=t0, t_end=time.monotonic())
    emit("quality", n_chunks=reader.n_chunks, peak_rss_mb=vm_hwm_mb(), **summarize(scores))


def main(argv: list[str]) -> int:
    job = begin(argv, "edgeprof.runners.quality_worker")
    if job is None:
        return EXIT_BAD_SPEC
    model_path = job["model_path"]

    import llama_cpp as ll

    ll.llama_backend_init()  # no log capture: the KV cache and flash-attention choice stay unreported
    emit_hello(ll)
    loaded = load_reported(ll, job, phase_kind="quality")
    if loaded is None:
        return EXIT_LOAD_FAILED
    model, ctx = loaded
    vocab = ll.llama_model_get_vocab(model)
    n_vocab = int(ll.llama_vocab_n_tokens(vocab))
    bos = int(ll.llama_vocab_bos(vocab)) if ll.llama_vocab_get_add_bos(vocab) else None
    try:
        maybe_fault("prefill", model_path)
        if job["mode"] == "base":
            _base(ll, ctx, vocab, job, n_vocab, bos)
        else:
            _score(ll, ctx, job, n_vocab, bos)
    except Exception as exc:  # noqa: BLE001 - reported to the parent with its stage
        stage = "cache" if isinstance(exc, OSError) else "request"
        emit("error", stage=stage, message=f"{type(exc).__name__}: {exc}")
        return EXIT_REQUEST_FAILED
    finally:
        ll.llama_free(ctx)
        ll.llama_model_free(model)
    emit("done", t=time.monotonic())
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
