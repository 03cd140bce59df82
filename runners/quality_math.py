"""KL divergence / perplexity arithmetic and the reference log-prob cache file (no llama.cpp here).

The numbers follow llama-perplexity's ``--kl-divergence`` (tools/perplexity in llama.cpp) so that the two
tools can be compared figure for figure:

- the reference's log-probs are kept in 16 bits per vocabulary entry: per token a ``scale`` and the
  smallest kept log-prob, then ``round((logit - min_logit) / scale)`` with ``min_logit`` clamped to
  ``max_logit - 16`` (log-probs below e^-16 relative to the top contribute nothing measurable);
- KLD(ref || variant) per token = sum over entries with ref log-prob > -16 of p_ref * (log p_ref - log q);
- PPL = exp(mean NLL of the actual next token); standard errors as sqrt(var / (n - 1)).

Where this file departs from llama-perplexity it says so: the reference's NLL, top token and top-token
log-prob are also stored exactly (float32), so PPL_ref and same-top do not carry the 16-bit rounding.

The cache layout (own format, version 1; little-endian):
``MAGIC | u32 header_len | header JSON | i32 tokens[n_chunks * ctx] | chunk records ... | sha256 | END``
where each chunk is ``n_scored`` metadata records (``RECORD``) followed by ``n_scored x n_vocab_padded``
uint16 values, and the sha256 covers every byte before it. A file whose size differs from the size the
header implies (truncated) or whose digest does not match (corrupt) is rejected and rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

FORMAT_VERSION = 1
MAGIC = b"EPQREF01"
END_MAGIC = b"EPQREND1"
LOGP_FLOOR = -16.0  # llama-perplexity's range for the 16-bit log-probs
ROWS_PER_BLOCK = 16  # rows decoded to float64 at a time: bounds memory for a 150 k-token vocabulary

RECORD = np.dtype(
    [
        ("scale", "<f4"),
        ("min_logp", "<f4"),
        ("nll", "<f4"),  # reference NLL of the actual next token (exact, not from the 16-bit values)
        ("logp_top", "<f4"),  # reference log-prob of its own top token (exact)
        ("top_id", "<i4"),  # reference top token (exact argmax, first of ties as llama.cpp)
    ]
)


def padded_vocab(n_vocab: int) -> int:
    """uint16 entries per row (even, as llama-perplexity pads), so rows stay 4-byte aligned."""
    return 2 * ((n_vocab + 1) // 2)


def n_scored(ctx: int) -> int:
    """Tokens scored per chunk: positions ctx/2 .. ctx-2 predict tokens ctx/2+1 .. ctx-1."""
    return ctx - 1 - ctx // 2


def chunk_bytes(ctx: int, n_vocab: int) -> int:
    return n_scored(ctx) * (RECORD.itemsize + 2 * padded_vocab(n_vocab))


def header_bytes(header: dict[str, Any]) -> bytes:
    return json.dumps(header, sort_keys=True, separators=(",", ":")).encode()


def predicted_size(header: dict[str, Any]) -> int:
    """Exact size of the cache file for ``header`` (n_chunks, ctx, n_vocab): printed before writing."""
    n_chunks, ctx, n_vocab = int(header["n_chunks"]), int(header["ctx"]), int(header["n_vocab"])
    return (
        len(MAGIC)
        + 4
        + len(header_bytes(header))
        + 4 * n_chunks * ctx
        + n_chunks * chunk_bytes(ctx, n_vocab)
        + 32
        + len(END_MAGIC)
    )


def _log_softmax(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log-probs in float64, max + log-sum-exp per row) of float32 logits, row-wise."""
    x = logits.astype(np.float64, copy=False)
    mx = x.max(axis=1, keepdims=True)
    lse = mx + np.log(np.exp(x - mx).sum(axis=1, keepdims=True))
    return x - lse, lse[:, 0]


def encode_rows(logits: np.ndarray, next_tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reference rows -> (RECORD array, uint16 array n x padded_vocab), as llama-perplexity's base file."""
    n, n_vocab = logits.shape
    meta = np.zeros(n, dtype=RECORD)
    q = np.zeros((n, padded_vocab(n_vocab)), dtype=np.uint16)
    for start in range(0, n, ROWS_PER_BLOCK):
        block = logits[start : start + ROWS_PER_BLOCK].astype(np.float64)
        toks = next_tokens[start : start + ROWS_PER_BLOCK]
        mx = block.max(axis=1)
        # the 16-bit range: what lies below it is the floor score_rows leaves out, one figure for both
        mn = np.maximum(block.min(axis=1), mx + LOGP_FLOOR)
        logp, lse = _log_softmax(block)
        scale = (mx - mn) / 65535.0
        rows = np.arange(block.shape[0])
        m = meta[start : start + block.shape[0]]
        m["scale"] = scale
        m["min_logp"] = mn - lse
        m["nll"] = -logp[rows, toks]
        top = block.argmax(axis=1)
        m["top_id"] = top
        m["logp_top"] = logp[rows, top]
        safe = np.where(scale > 0, scale, 1.0)[:, None]
        vals = np.where(block > mn[:, None], np.rint((block - mn[:, None]) / safe), 0.0)
        vals = np.where(scale[:, None] > 0, vals, 0.0)
        q[start : start + block.shape[0], :n_vocab] = np.clip(vals, 0, 65535).astype(np.uint16)
    return meta, q


def decode_logp(meta: np.ndarray, q: np.ndarray, n_vocab: int) -> np.ndarray:
    """The reference's log-probs back from the 16-bit form (float64)."""
    return (
        meta["scale"].astype(np.float64)[:, None] * q[:, :n_vocab].astype(np.float64)
        + meta["min_logp"].astype(np.float64)[:, None]
    )


@dataclass
class TokenScores:
    """Per scored token: KLD(ref || variant), same top token, NLLs, and Δp of the reference's top token."""

    kld: np.ndarray
    same_top: np.ndarray
    nll: np.ndarray
    nll_ref: np.ndarray
    dp_top: np.ndarray

    @classmethod
    def empty(cls) -> TokenScores:
        z = np.zeros(0, dtype=np.float64)
        return cls(z, np.zeros(0, dtype=bool), z, z, z)

    def extend(self, other: TokenScores) -> None:
        self.kld = np.concatenate([self.kld, other.kld])
        self.same_top = np.concatenate([self.same_top, other.same_top])
        self.nll = np.concatenate([self.nll, other.nll])
        self.nll_ref = np.concatenate([self.nll_ref, other.nll_ref])
        self.dp_top = np.concatenate([self.dp_top, other.dp_top])


def score_rows(logits: np.ndarray, next_tokens: np.ndarray, meta: np.ndarray, q: np.ndarray) -> TokenScores:
    """A variant's logits for one chunk's scored positions against the reference's cached rows."""
    n, n_vocab = logits.shape
    out = TokenScores(
        kld=np.zeros(n),
        same_top=np.zeros(n, dtype=bool),
        nll=np.zeros(n),
        nll_ref=np.zeros(n),
        dp_top=np.zeros(n),
    )
    for start in range(0, n, ROWS_PER_BLOCK):
        sl = slice(start, start + ROWS_PER_BLOCK)
        block = logits[sl]
        logp_q, _ = _log_softmax(block)
        m = meta[sl]
        logp_ref = decode_logp(m, q[sl], n_vocab)
        keep = logp_ref > LOGP_FLOOR
        p_ref = np.where(keep, np.exp(logp_ref), 0.0)
        out.kld[sl] = (p_ref * np.where(keep, logp_ref - logp_q, 0.0)).sum(axis=1)
        rows = np.arange(block.shape[0])
        toks = next_tokens[sl]
        out.nll[sl] = -logp_q[rows, toks]
        out.nll_ref[sl] = m["nll"].astype(np.float64)
        top_ref = m["top_id"].astype(np.int64)
        out.same_top[sl] = block.argmax(axis=1) == top_ref
        out.dp_top[sl] = np.exp(logp_q[rows, top_ref]) - np.exp(m["logp_top"].astype(np.float64))
    return out


def mean_se(x: np.ndarray) -> tuple[float | None, float | None]:
    """Mean and its standard error sqrt(var/(n-1)) (population variance, as llama-perplexity)."""
    n = int(x.size)
    if n == 0:
        return None, None
    mean = float(x.mean())
    if n < 2:
        return mean, None
    var = float((x * x).mean() - mean * mean)
    return mean, math.sqrt(max(var, 0.0) / (n - 1))


def nearest_rank(sorted_x: np.ndarray, q: float) -> float:
    """The agent's nearest-rank percentile (``edgeprof.stats.nearest_rank``) on an already sorted array.
    Restated, not imported: this worker process may not import the agent (the layer map), and the agent's
    statistics must not import numpy; tests/unit/runners/test_quality_thresholds.py holds the two to the
    same answer for every n and quantile."""
    rank = max(1, math.ceil(q * sorted_x.size - 1e-9))
    return float(sorted_x[rank - 1])


def summarize(s: TokenScores) -> dict[str, Any]:
    """The stored figures of one variant vs its reference (percentiles nearest-rank, always with n)."""
    n = int(s.kld.size)
    if n == 0:
        raise ValueError("no token was scored")
    kld_sorted = np.sort(s.kld)
    kld_mean, kld_se = mean_se(s.kld)
    nll_mean, nll_se = mean_se(s.nll)
    ref_mean, ref_se = mean_se(s.nll_ref)
    assert nll_mean is not None and ref_mean is not None
    ppl, ppl_ref = math.exp(nll_mean), math.exp(ref_mean)
    ppl_se = ppl * nll_se if nll_se is not None else None
    ppl_ref_se = ppl_ref * ref_se if ref_se is not None else None
    # Covariance of the two mean NLLs (llama-perplexity's): the same text, so the errors are correlated.
    cov = float((s.nll * s.nll_ref).mean() - nll_mean * ref_mean) / (n - 1) if n > 1 else None
    ln_ratio = nll_mean - ref_mean
    ln_ratio_se = (
        math.sqrt(max(nll_se**2 + ref_se**2 - 2 * cov, 0.0))
        if nll_se is not None and ref_se is not None and cov is not None
        else None
    )
    delta_se = (
        math.sqrt(max(ppl_se**2 + ppl_ref_se**2 - 2 * ppl * ppl_ref * cov, 0.0))
        if ppl_se is not None and ppl_ref_se is not None and cov is not None
        else None
    )
    abs_dp = np.sort(np.abs(s.dp_top))
    return {
        "n_tokens": n,
        "kld_mean": kld_mean,
        "kld_se": kld_se,
        "kld_median": float(np.median(s.kld)),
        "kld_p90": nearest_rank(kld_sorted, 0.90),
        "kld_p95": nearest_rank(kld_sorted, 0.95),
        "kld_p99": nearest_rank(kld_sorted, 0.99),
        "kld_max": float(kld_sorted[-1]),
        "same_top_pct": 100.0 * float(s.same_top.mean()),
        "dp_top_mean": float(abs_dp.mean()),
        "dp_top_p99": nearest_rank(abs_dp, 0.99),
        "ppl": ppl,
        "ppl_se": ppl_se,
        "ppl_ref": ppl_ref,
        "ppl_ref_se": ppl_ref_se,
        "delta_ppl": ppl - ppl_ref,
        "delta_ppl_se": delta_se,
        "ln_ppl_ratio": ln_ratio,
        "ln_ppl_ratio_se": ln_ratio_se,
    }


def self_scores(meta: np.ndarray) -> TokenScores:
    """The reference against itself: KLD 0 and same top everywhere by definition, its exact NLLs twice."""
    n = meta.size
    nll = meta["nll"].astype(np.float64)
    return TokenScores(
        kld=np.zeros(n), same_top=np.ones(n, dtype=bool), nll=nll.copy(), nll_ref=nll, dp_top=np.zeros(n)
    )


# ---------------------------------------------------------------- the cache file


class CacheError(ValueError):
    """The cache file is missing, truncated, corrupt or for other inputs; the message says which."""


def cache_file_mode() -> int:
    """0600 whatever the umask (the cache holds the reference model's logits of the user's text), or 0640
    under a systemd service (``INVOCATION_ID``), whose Group= reads results: the rule storage/guard.py
    ``new_file_mode`` gives databases; runners import nothing of the agent or storage, hence the copy."""
    return 0o640 if os.environ.get("INVOCATION_ID") else 0o600


def _create_private(path: Path) -> BinaryIO:
    """A new file at ``path`` with ``cache_file_mode()``; a leftover temp file of a dead worker with the
    same pid is replaced, a symbolic link there is never followed (O_NOFOLLOW after the unlink)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, cache_file_mode())
    os.fchmod(fd, cache_file_mode())
    return os.fdopen(fd, "wb")


class CacheWriter:
    """Writes a cache file chunk by chunk into a temporary name; ``finish`` seals it (digest) and renames.

    A crash mid-write leaves only the temporary file, never a file under the final name.
    """

    def __init__(self, path: Path, header: dict[str, Any], tokens: np.ndarray) -> None:
        self.path = path
        self.header = header
        self.tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.fh: BinaryIO = _create_private(self.tmp)
        self.digest = hashlib.sha256()
        self.chunks_written = 0
        head = header_bytes(header)
        self._write(MAGIC + struct.pack("<I", len(head)) + head)
        toks = np.ascontiguousarray(tokens, dtype="<i4")
        if toks.size != int(header["n_chunks"]) * int(header["ctx"]):
            raise ValueError("token count does not match n_chunks x ctx")
        self._write(toks.tobytes())

    def _write(self, data: bytes) -> None:
        self.fh.write(data)
        self.digest.update(data)

    def write_chunk(self, meta: np.ndarray, q: np.ndarray) -> None:
        self._write(np.ascontiguousarray(meta, dtype=RECORD).tobytes())
        self._write(np.ascontiguousarray(q, dtype="<u2").tobytes())
        self.chunks_written += 1

    def finish(self) -> Path:
        if self.chunks_written != int(self.header["n_chunks"]):
            raise ValueError(f"{self.chunks_written} chunks written, header says {self.header['n_chunks']}")
        self.fh.write(self.digest.digest() + END_MAGIC)
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.fh.close()
        os.replace(self.tmp, self.path)
        return self.path

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self.fh.close()
        with contextlib.suppress(OSError):
            self.tmp.unlink()


def read_header(path: Path) -> tuple[dict[str, Any], int]:
    """(header, offset of the token array); CacheError if the file does not start like a cache file."""
    try:
        with open(path, "rb") as fh:
            start = fh.read(len(MAGIC) + 4)
            if len(start) < len(MAGIC) + 4 or start[: len(MAGIC)] != MAGIC:
                raise CacheError(f"{path}: not an edgeprof reference cache (bad magic)")
            (n,) = struct.unpack("<I", start[len(MAGIC) :])
            if n > 1 << 20:
                raise CacheError(f"{path}: corrupt header length {n}")
            raw = fh.read(n)
    except FileNotFoundError:
        raise CacheError(f"{path}: no cache file") from None
    except OSError as exc:
        raise CacheError(f"{path}: cannot read: {exc.strerror}") from None
    if len(raw) < n:
        raise CacheError(f"{path}: truncated header")
    try:
        header = json.loads(raw)
    except ValueError:
        raise CacheError(f"{path}: corrupt header (not JSON)") from None
    if not isinstance(header, dict):
        raise CacheError(f"{path}: corrupt header")
    return header, len(MAGIC) + 4 + n


def verify_cache(path: Path, expect: dict[str, Any]) -> dict[str, Any]:
    """The header of a complete, intact cache made from the ``expect`` inputs; CacheError saying why not."""
    header, _ = read_header(path)
    for key, value in expect.items():
        if header.get(key) != value:
            raise CacheError(f"{path}: made for {key}={header.get(key)!r}, wanted {value!r}")
    if header.get("format") != FORMAT_VERSION:
        raise CacheError(f"{path}: format {header.get('format')!r}, this edgeprof writes {FORMAT_VERSION}")
    try:
        size = path.stat().st_size
        want = predicted_size(header)
    except (KeyError, TypeError, ValueError):
        raise CacheError(f"{path}: corrupt header (missing sizes)") from None
    if size != want:
        raise CacheError(f"{path}: truncated or padded ({size} bytes, the header implies {want})")
    digest = hashlib.sha256()
    body = size - 32 - len(END_MAGIC)
    with open(path, "rb") as fh:
        left = body
        while left > 0:
            block = fh.read(min(left, 8 << 20))
            if not block:
                raise CacheError(f"{path}: shorter than its size while reading")
            digest.update(block)
            left -= len(block)
        tail = fh.read()
    if tail[32:] != END_MAGIC or tail[:32] != digest.digest():
        raise CacheError(f"{path}: corrupt (sha256 of the content does not match the one stored)")
    return header


class CacheReader:
    """Reads the tokens, then one chunk at a time (memory bounded by one chunk, never the whole file)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.header, self._tok_off = read_header(path)
        self.ctx = int(self.header["ctx"])
        self.n_chunks = int(self.header["n_chunks"])
        self.n_vocab = int(self.header["n_vocab"])

    def tokens(self) -> np.ndarray:
        with open(self.path, "rb") as fh:
            fh.seek(self._tok_off)
            data = fh.read(4 * self.n_chunks * self.ctx)
        return np.frombuffer(data, dtype="<i4").astype(np.int64)

    def chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        ns, nv = n_scored(self.ctx), padded_vocab(self.n_vocab)
        with open(self.path, "rb") as fh:
            fh.seek(self._tok_off + 4 * self.n_chunks * self.ctx)
            for i in range(self.n_chunks):
                raw_meta = fh.read(ns * RECORD.itemsize)
                raw_q = fh.read(ns * nv * 2)
                if len(raw_meta) < ns * RECORD.itemsize or len(raw_q) < ns * nv * 2:
                    raise CacheError(f"{self.path}: truncated at chunk {i}")
                yield (
                    np.frombuffer(raw_meta, dtype=RECORD),
                    np.frombuffer(raw_q, dtype="<u2").reshape(ns, nv),
                )
