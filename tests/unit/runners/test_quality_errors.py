"""The standard errors of ln(PPL/PPL_ref) and PPL - PPL_ref (runners/quality_math.py:summarize).

Both figures compare a variant with its reference on the same text, so their per-token NLLs are correlated
and the covariance term is what makes the error small; a sign slip there (``- 2 cov`` -> ``+ 2 cov``) still
gives a plausible-looking number. Checked two ways, each computed here and not by the code under test:

- llama-perplexity's own definitions (tools/perplexity/perplexity.cpp, ``kl_divergence``): from the sums of
  nll, nll^2, nll_ref, nll_ref^2 and nll * nll_ref, ``mean_and_uncertainty`` = (mean, sqrt((E[x^2] - mean^2)
  / (n - 1))), ``covariance`` = (E[ab] - E[a] E[b]) / (n - 1), then
  ``log_ppl_ratio_unc = sqrt(se^2 + se_ref^2 - 2 cov)`` and, with ppl_se = ppl * se,
  ``ppl_diff_unc = sqrt(ppl_se^2 + ppl_ref_se^2 - 2 ppl ppl_ref cov)``;
- the same quantities as the error of one mean of per-token differences, which needs no covariance at all:
  se(ln ratio) = sqrt(var(nll - nll_ref) / (n - 1)) and se(delta) = sqrt(var(ppl nll - ppl_ref nll_ref) /
  (n - 1)) (population variances, the delta method for exp).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgeprof.runners.quality_math import TokenScores, self_scores, summarize


def scores(nll: list[float] | np.ndarray, nll_ref: list[float] | np.ndarray) -> TokenScores:
    """Per-token NLL pairs with neutral KLD / top-token fields (the errors read only the NLLs)."""
    a, b = np.asarray(nll, dtype=np.float64), np.asarray(nll_ref, dtype=np.float64)
    n = a.size
    return TokenScores(kld=np.zeros(n), same_top=np.ones(n, dtype=bool), nll=a, nll_ref=b, dp_top=np.zeros(n))


def llama_perplexity_errors(nll: np.ndarray, nll_ref: np.ndarray) -> tuple[float, float]:
    """(log_ppl_ratio_unc, ppl_diff_unc) written as llama-perplexity computes them from its running sums."""
    n = nll.size
    sum_a, sum_a2 = float(nll.sum()), float((nll * nll).sum())
    sum_b, sum_b2 = float(nll_ref.sum()), float((nll_ref * nll_ref).sum())
    sum_ab = float((nll * nll_ref).sum())
    mean_a, mean_b = sum_a / n, sum_b / n
    se_a = math.sqrt((sum_a2 / n - mean_a * mean_a) / (n - 1))
    se_b = math.sqrt((sum_b2 / n - mean_b * mean_b) / (n - 1))
    cov = (sum_ab / n - mean_a * mean_b) / (n - 1)
    log_ratio_unc = math.sqrt(se_a * se_a + se_b * se_b - 2.0 * cov)
    ppl, ppl_ref = math.exp(mean_a), math.exp(mean_b)
    ppl_unc, ppl_ref_unc = ppl * se_a, ppl_ref * se_b
    diff_unc = math.sqrt(ppl_unc * ppl_unc + ppl_ref_unc * ppl_ref_unc - 2.0 * ppl * ppl_ref * cov)
    return log_ratio_unc, diff_unc


def difference_errors(nll: np.ndarray, nll_ref: np.ndarray) -> tuple[float, float]:
    """The same two errors as the standard error of one mean of per-token differences (no covariance)."""
    n = nll.size
    ppl, ppl_ref = math.exp(float(nll.mean())), math.exp(float(nll_ref.mean()))
    ln_ratio = math.sqrt(float(np.var(nll - nll_ref)) / (n - 1))
    delta = math.sqrt(float(np.var(ppl * nll - ppl_ref * nll_ref)) / (n - 1))
    return ln_ratio, delta


def test_two_tokens_by_hand() -> None:
    # nll (1, 3), nll_ref (0, 4): means 2 and 2, population variances 1 and 4, covariance E[ab] - 4 = 2;
    # over n - 1 = 1: se 1 and 2, cov 2. ln ratio: sqrt(1 + 4 - 2*2) = 1 (the differences (1, -1) have
    # variance 1). PPL = PPL_ref = e^2: sqrt(e^4 + 4 e^4 - 2 e^4 * 2) = e^2. A "+ 2 cov" gives 3 and 3 e^2.
    s = summarize(scores([1.0, 3.0], [0.0, 4.0]))
    assert s["ln_ppl_ratio"] == 0.0 and s["delta_ppl"] == 0.0
    assert s["ln_ppl_ratio_se"] == pytest.approx(1.0, rel=1e-12)
    assert s["delta_ppl_se"] == pytest.approx(math.e**2, rel=1e-12)
    assert (s["ppl_se"], s["ppl_ref_se"]) == (pytest.approx(math.e**2), pytest.approx(2 * math.e**2))


def test_a_constant_shift_of_every_nll_has_no_ratio_error() -> None:
    # A variant exactly 0.5 nats worse on every token: ln ratio 0.5 with nothing uncertain about it, though
    # each perplexity alone has an error (the text's own spread).
    ref = np.array([0.5, 1.5, 2.0, 3.0, 4.5])
    s = summarize(scores(ref + 0.5, ref))
    assert s["ln_ppl_ratio"] == pytest.approx(0.5, rel=1e-12)
    assert s["ppl_se"] > 0 and s["ppl_ref_se"] > 0
    assert s["ln_ppl_ratio_se"] == pytest.approx(0.0, abs=1e-7)
    # delta: var(ppl * nll - ppl_ref * nll_ref) with ppl = e^0.5 ppl_ref, i.e. of (e^0.5 - 1) ppl_ref * ref
    ppl_ref = math.exp(float(ref.mean()))
    expected = (math.exp(0.5) - 1.0) * ppl_ref * math.sqrt(float(np.var(ref)) / (ref.size - 1))
    assert s["delta_ppl_se"] == pytest.approx(expected, rel=1e-9)


def test_the_reference_against_itself_has_zero_errors() -> None:
    meta = np.zeros(6, dtype=[("nll", "<f4")])
    meta["nll"] = [0.25, 1.0, 2.5, 0.75, 3.0, 1.5]
    s = summarize(self_scores(meta))
    assert s["ppl_se"] is not None and s["ppl_se"] > 0
    assert s["ln_ppl_ratio_se"] == pytest.approx(0.0, abs=1e-7)
    assert s["delta_ppl_se"] == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_random_correlated_pairs_match_llama_perplexity_and_the_difference_form(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 2000))
    ref = rng.gamma(2.0, 1.2, size=n)  # NLLs: positive, skewed
    rho = float(rng.uniform(0.3, 0.99))  # the variant tracks the reference, more or less closely
    nll = np.abs(rho * ref + (1 - rho) * rng.gamma(2.0, 1.2, size=n) + rng.normal(0, 0.2, size=n))
    s = summarize(scores(nll, ref))
    ln_lp, delta_lp = llama_perplexity_errors(nll, ref)
    ln_diff, delta_diff = difference_errors(nll, ref)
    assert ln_lp == pytest.approx(ln_diff, rel=1e-9) and delta_lp == pytest.approx(delta_diff, rel=1e-9)
    assert s["ln_ppl_ratio_se"] == pytest.approx(ln_lp, rel=1e-9)
    assert s["delta_ppl_se"] == pytest.approx(delta_lp, rel=1e-9)
    # correlated on one text: the paired errors are smaller than the unpaired ones
    assert s["ln_ppl_ratio_se"] < math.hypot(s["ppl_se"] / s["ppl"], s["ppl_ref_se"] / s["ppl_ref"])


def test_one_token_has_no_error_to_give() -> None:
    s = summarize(scores([1.0], [2.0]))
    assert s["ln_ppl_ratio"] == -1.0
    assert (s["ln_ppl_ratio_se"], s["delta_ppl_se"], s["ppl_se"]) == (None, None, None)
