"""Quality arithmetic on synthetic logits (hand-computed values): KL divergence, same top token, perplexity
and their nearest-rank percentiles; the reference cache file's integrity checks; the default text's hash."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pytest

from edgeprof.plan import DEFAULT_TEXT_SHA256, default_text
from edgeprof.runners.quality_math import (
    CacheError,
    CacheReader,
    CacheWriter,
    TokenScores,
    encode_rows,
    predicted_size,
    score_rows,
    summarize,
    verify_cache,
)

LN2, LN3 = math.log(2), math.log(3)


def _two_rows() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Synthetic (labelled): 4-token vocabulary, two scored positions, reference and variant logits."""
    ref = np.array([[0, 0, 0, 0], [LN3, 0, 0, 0]], dtype=np.float32)  # p_ref: uniform; (1/2, 1/6, 1/6, 1/6)
    var = np.array([[LN2, 0, 0, 0], [0, LN2, 0, 0]], dtype=np.float32)  # q: (.4 .2 .2 .2), (.2 .4 .2 .2)
    next_tokens = np.array([1, 0])
    return ref, var, next_tokens


def test_kld_ppl_same_top_match_hand_computed_values() -> None:
    ref, var, toks = _two_rows()
    meta, q = encode_rows(ref, toks)
    s = summarize(score_rows(var, toks, meta, q))
    kld_a = 0.25 * (math.log(0.25 / 0.4) + 3 * math.log(0.25 / 0.2))
    kld_b = 0.5 * math.log(0.5 / 0.2) + (1 / 6) * math.log((1 / 6) / 0.4) + (2 / 6) * math.log((1 / 6) / 0.2)
    assert s["n_tokens"] == 2
    assert s["kld_mean"] == pytest.approx((kld_a + kld_b) / 2, rel=1e-5)
    assert s["kld_max"] == pytest.approx(max(kld_a, kld_b), rel=1e-5)
    # population variance / (n - 1), as llama-perplexity
    assert s["kld_se"] == pytest.approx(abs(kld_a - kld_b) / 2, rel=1e-4)
    # row A: both tops are token 0 (first of ties); row B: reference 0, variant 1
    assert s["same_top_pct"] == pytest.approx(50.0)
    # NLL of the actual next tokens: variant ln 5 twice; reference ln 4 and ln 2
    assert s["ppl"] == pytest.approx(5.0, rel=1e-5)
    assert s["ppl_ref"] == pytest.approx(math.sqrt(8.0), rel=1e-5)
    assert s["delta_ppl"] == pytest.approx(5.0 - math.sqrt(8.0), rel=1e-5)
    assert s["ln_ppl_ratio"] == pytest.approx(math.log(5.0 / math.sqrt(8.0)), rel=1e-5)
    # |Δp| of the reference's top token (0): |2/5 - 1/4| and |1/5 - 1/2|
    assert s["dp_top_mean"] == pytest.approx((0.15 + 0.3) / 2, rel=1e-5)
    assert s["dp_top_p99"] == pytest.approx(0.3, rel=1e-5)


def test_a_distribution_against_itself_gives_zero_kld_and_all_tops_the_same() -> None:
    rng = np.random.default_rng(7)
    logits = rng.normal(0, 3, size=(40, 300)).astype(np.float32)
    toks = rng.integers(0, 300, size=40)
    meta, q = encode_rows(logits, toks)
    s = summarize(score_rows(logits, toks, meta, q))
    assert abs(s["kld_mean"]) < 1e-6  # only the 16-bit rounding of the reference remains
    assert s["same_top_pct"] == 100.0
    assert s["ppl"] == pytest.approx(s["ppl_ref"], rel=1e-5)


def test_percentiles_are_nearest_rank() -> None:
    n = 100
    kld = np.arange(1, n + 1) / 100.0
    s = summarize(
        TokenScores(kld=kld, same_top=np.ones(n, bool), nll=np.ones(n), nll_ref=np.ones(n), dp_top=kld)
    )
    assert (s["kld_p90"], s["kld_p95"], s["kld_p99"], s["kld_max"]) == (0.90, 0.95, 0.99, 1.0)
    assert s["kld_median"] == pytest.approx(0.505)
    assert s["dp_top_p99"] == 0.99


def _write_cache(path: Path) -> dict[str, object]:
    rng = np.random.default_rng(1)
    ctx, n_vocab, n_chunks = 16, 50, 2
    key = {"model_sha256": "a" * 64, "text_sha256": "b" * 64, "ctx": ctx, "chunks": None, "max_chunks": 100}
    header = {**key, "format": 1, "n_chunks": n_chunks, "n_vocab": n_vocab, "add_bos": True}
    tokens = rng.integers(0, n_vocab, size=n_chunks * ctx)
    w = CacheWriter(path, header, tokens)
    for _ in range(n_chunks):
        w.write_chunk(*encode_rows(rng.normal(size=(7, n_vocab)).astype(np.float32), rng.integers(0, 50, 7)))
    w.finish()
    assert path.stat().st_size == predicted_size(header)
    return key


def test_cache_file_round_trip_and_damage_detected(tmp_path: Path) -> None:
    path = tmp_path / "ref.eplp"
    key = _write_cache(path)
    verify_cache(path, key)
    chunks = list(CacheReader(path).chunks())
    assert len(chunks) == 2 and chunks[0][1].shape == (7, 50)
    with pytest.raises(CacheError, match="made for ctx"):
        verify_cache(path, {**key, "ctx": 32})
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CacheError, match="corrupt"):
        verify_cache(path, key)
    path.write_bytes(bytes(data[: len(data) - 100]))
    with pytest.raises(CacheError, match="truncated"):
        verify_cache(path, key)
    path.write_bytes(b"junk")
    with pytest.raises(CacheError):
        verify_cache(path, key)


def test_default_text_ships_with_its_hash() -> None:
    text = default_text()
    assert len(text.encode()) > 20_000  # a few thousand tokens of prose
    assert "Alice" in text
    assert hashlib.sha256(text.encode()).hexdigest() == DEFAULT_TEXT_SHA256
