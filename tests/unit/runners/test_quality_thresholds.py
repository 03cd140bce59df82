"""The quality scoring's log-prob floor pinned: a reference entry with log-prob just above -16 counts in
the KL divergence, one just below does not (llama-perplexity's range for its 16-bit log-probs, which
runners/quality_math.py follows figure for figure); and its nearest-rank percentiles the agent's rule.
Values and reasons: docs/thresholds.md."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgeprof import stats
from edgeprof.runners.quality_math import encode_rows, nearest_rank, score_rows

pytestmark = pytest.mark.timeout(60)

INSIDE, OUTSIDE = -15.9, -16.1  # reference log-probs of entries 2 and 3


def _reference_logits() -> np.ndarray:
    """One row: a top entry, one at -2 and the two probes at log-probs INSIDE and OUTSIDE."""
    lse = math.log(1.0 + math.exp(-2.0) + math.exp(INSIDE) + math.exp(OUTSIDE))
    # logits shifted so the log-softmax lands on the probes (to float32 precision)
    return np.array([[0.0, -2.0, INSIDE + lse, OUTSIDE + lse]], dtype=np.float32)


def _kld_dropping(entry: int) -> float:
    """KLD(ref || variant) where the variant gives ``entry`` almost no probability (logit -10 000)."""
    ref = _reference_logits()
    variant = ref.copy()
    variant[0, entry] = -10_000.0
    tokens = np.array([0])
    meta, q = encode_rows(ref, tokens)
    return float(score_rows(variant, tokens, meta, q).kld[0])


def _definition(entry: int) -> float:
    """KLD = sum over reference entries with log-prob above -16 of p_ref · (log p_ref - log q)."""
    ref = _reference_logits()[0].astype(np.float64)
    variant = ref.copy()
    variant[entry] = -10_000.0
    logp_ref = ref - np.log(np.exp(ref - ref.max()).sum()) - ref.max()
    logp_q = variant - np.log(np.exp(variant - variant.max()).sum()) - variant.max()
    keep = logp_ref > -16.0
    return float((np.exp(logp_ref[keep]) * (logp_ref[keep] - logp_q[keep])).sum())


def test_logp_floor_counts_an_entry_just_above_minus_16() -> None:
    kld = _kld_dropping(2)
    # e^-15.9 · (10 000 - 15.9): the one term, about 1.2e-3, far above the 16-bit rounding of the others
    assert kld == pytest.approx(_definition(2), rel=1e-2)
    assert kld == pytest.approx(math.exp(INSIDE) * 10_000.0, rel=2e-2)


def test_logp_floor_leaves_out_an_entry_just_below_minus_16() -> None:
    assert _definition(3) < 1e-5
    assert abs(_kld_dropping(3)) < 1e-5  # the same loss of probability, below the floor: nothing counted


@pytest.mark.parametrize("n", [1, 2, 3, 5, 9, 10, 11, 20, 99, 100, 101, 1000])
def test_nearest_rank_is_the_agents_rule_at_every_n(n: int) -> None:
    values = [float((7919 * i) % 1009) for i in range(n)]  # distinct-ish, in no order
    for q in (0.01, 0.1, 0.5, 0.9, 0.95, 0.99, 1.0):
        assert nearest_rank(np.sort(np.array(values)), q) == stats.nearest_rank(values, q), (n, q)
