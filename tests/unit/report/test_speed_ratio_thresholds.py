"""The recommendation's numbers pinned: the speed ratio's interval (agent/report/speed_ratio.py) against the
Hodges–Lehmann / Moses interval computed here from its definition by exact enumeration, endpoints included;
the Mann–Whitney critical values of the published tables; the normal approximation's continuity correction
exactly; and the default quality budget (mean KLD 0.05, same-top 90 %, 5 reps, 95 %) just inside and just
outside each bound. Values and reasons: docs/thresholds.md."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import pytest

from edgeprof.plan.budget import QualityBudget, parse_budget
from edgeprof.report import speed_ratio as sr
from edgeprof.report.recommend import Candidate, exclusion, noise_flags
from edgeprof.report.speed_ratio import cut_count, speed_ratio

pytestmark = pytest.mark.timeout(120)


# -- the interval from its definition -----------------------------------------------------------------------
def null_u_counts(m: int, n: int) -> list[int]:
    """How many of the C(m + n, m) equally likely rank placements give each U = #{(i, j): x_i > y_j}."""
    counts = [0] * (m * n + 1)
    for xs in itertools.combinations(range(m + n), m):
        ys = [r for r in range(m + n) if r not in xs]
        counts[sum(1 for x in xs for y in ys if x > y)] += 1
    return counts


def moses_interval(
    a: Sequence[float], b: Sequence[float], confidence_pct: float
) -> tuple[float | None, float | None]:
    """The confidence set of the factor ``a`` is faster than ``b`` by: every shift Δ of ln a against ln b
    that the exact two-sided Mann–Whitney test at level α does not reject (p-value above α), closed.

    For Δ between two neighbouring pairwise differences d = ln a_i − ln b_j, U(Δ) = #{d > Δ}: walk the gaps
    between the sorted differences, test each, and take the outermost accepted gaps' outer ends."""
    m, n = len(a), len(b)
    counts, total = null_u_counts(m, n), math.comb(m + n, m)
    alpha = 1.0 - confidence_pct / 100.0
    diffs = sorted(math.log(x) - math.log(y) for x in a for y in b)
    big_n = len(diffs)

    def accepted(u: int) -> bool:
        below, above = sum(counts[: u + 1]) / total, sum(counts[u:]) / total
        return 2.0 * min(below, above) > alpha

    # gap t lies between diffs[t - 1] and diffs[t] (gap 0 below them all, gap N above them all)
    gaps = [t for t in range(big_n + 1) if accepted(big_n - t)]
    low = math.exp(diffs[gaps[0] - 1]) if gaps[0] > 0 else None
    high = math.exp(diffs[gaps[-1]]) if gaps[-1] < big_n else None
    return low, high


def _samples(seed: int, m: int, n: int) -> tuple[list[float], list[float]]:
    rng = random.Random(seed)
    return [20.0 * rng.lognormvariate(0.0, 0.03) for _ in range(m)], [
        20.5 * rng.lognormvariate(0.0, 0.03) for _ in range(n)
    ]


@pytest.mark.parametrize(("m", "n"), [(4, 4), (5, 5), (4, 7), (6, 5), (7, 7)])
@pytest.mark.parametrize("confidence_pct", [90.0, 95.0, 99.0])
def test_speed_ratio_interval_is_the_moses_interval_endpoints_included(
    m: int, n: int, confidence_pct: float
) -> None:
    for seed in range(3):
        a, b = _samples(seed * 100 + m * 10 + n, m, n)
        r = speed_ratio(a, b, confidence_pct)
        low, high = moses_interval(a, b, confidence_pct)
        if low is None or high is None:
            assert (r.low, r.high) == (None, None)
        else:
            assert (r.low, r.high) == (pytest.approx(low, rel=1e-12), pytest.approx(high, rel=1e-12))


def test_speed_ratio_reps_that_only_look_faster_are_a_tie() -> None:
    # Five reps a side, the first a little ahead on most: the exact interval reaches down to 1 exactly (the
    # pair 20.1 / 20.1), a tie; one pairwise difference further in on each side (the off-by-one) would call
    # it "faster".
    a, b = [20.1, 20.5, 20.2, 19.7, 20.8], [18.9, 20.0, 19.4, 19.5, 20.1]
    r = speed_ratio(a, b)
    low, high = moses_interval(a, b, 95.0)
    assert low is not None and high is not None
    assert (r.low, r.high) == (pytest.approx(low, rel=1e-12), pytest.approx(high, rel=1e-12))
    assert low == 1.0 < high and not r.decided
    diffs = sorted(math.log(x) - math.log(y) for x in a for y in b)
    assert math.exp(diffs[3]) > 1.0  # diffs[k] for k = 3: the interval one step in would exclude 1


# Two-sided 5 % critical values of the Mann–Whitney U (reject at U <= c) as the published tables give
# them (e.g. Mann & Whitney 1947; every statistics textbook's table): n1 -> {n2: c}.
PUBLISHED_U_05 = {
    5: {5: 2, 6: 3, 7: 5, 8: 6, 9: 7, 10: 8},
    6: {6: 5, 7: 6, 8: 8, 9: 10, 10: 11},
    7: {7: 8, 8: 10, 9: 12, 10: 14},
    8: {8: 13, 9: 15, 10: 17},
}


def test_speed_ratio_cut_matches_the_published_mann_whitney_table() -> None:
    for n1, row in PUBLISHED_U_05.items():
        for n2, critical in row.items():
            assert cut_count(n1, n2, 95.0) == critical + 1, (n1, n2)
    # and the 5-and-5 interval's exact level, 1 - 2 · P(U <= 2) = 1 - 2 · 4/252 = 96.8 %
    counts = null_u_counts(5, 5)
    assert 1.0 - 2.0 * sum(counts[:3]) / math.comb(10, 5) == pytest.approx(0.968, abs=5e-4)


# -- the normal approximation beyond EXACT_MAX_PAIRS ---------------------------------------------------------
def continuity_corrected_cut(m: int, n: int, confidence_pct: float, correction: float = 0.5) -> int:
    """k from the definition: how many U = 0, 1, ... have P(U <= u) <= α/2 under the normal law of U with
    the continuity correction (P(U <= u) ~ Φ((u + 0.5 − mn/2) / sd))."""
    alpha_half = (1.0 - confidence_pct / 100.0) / 2.0
    law = NormalDist(m * n / 2.0, math.sqrt(m * n * (m + n + 1) / 12.0))
    k = 0
    while law.cdf(k + correction) <= alpha_half:
        k += 1
    return k


SIZES = [(51, 51), (52, 60), (55, 55), (60, 60), (64, 70), (80, 80), (100, 90)]


@pytest.mark.parametrize("confidence_pct", [90.0, 95.0, 99.0])
def test_speed_ratio_normal_cut_has_the_half_rank_continuity_correction(confidence_pct: float) -> None:
    assert all(m * n > sr.EXACT_MAX_PAIRS for m, n in SIZES)
    got = [cut_count(m, n, confidence_pct) for m, n in SIZES]
    assert got == [continuity_corrected_cut(m, n, confidence_pct) for m, n in SIZES]
    # the cases tell the correction apart: without it (or with it the wrong way) some cut differs
    assert got != [continuity_corrected_cut(m, n, confidence_pct, 0.0) for m, n in SIZES]
    assert got != [continuity_corrected_cut(m, n, confidence_pct, 1.0) for m, n in SIZES]


def test_speed_ratio_exact_up_to_2500_pairs_and_normal_beyond(monkeypatch: pytest.MonkeyPatch) -> None:
    # 50 x 50 at 99 % is still counted exactly (878; the normal law says 876), so the boundary is seen
    assert cut_count(50, 50, 99.0) == 878 != continuity_corrected_cut(50, 50, 99.0) == 876
    monkeypatch.setattr(sr, "EXACT_MAX_PAIRS", 50 * 50 - 1)
    assert cut_count(50, 50, 99.0) == 876


# -- the default quality budget ---------------------------------------------------------------------------
def _candidate(kld: float | None = 0.01, same_top: float | None = 95.0, reps: int = 5) -> Candidate:
    row: dict[str, Any] = {
        "run_id": 1, "model_label": "q4", "status": "ok", "reason": None, "tg_tps_median": 20.0,
        "_tg_tps_reps": [20.0 + 0.1 * i for i in range(reps)],
    }
    return Candidate(row, kld, same_top, is_reference=False)


def test_budget_defaults_are_what_a_plan_without_the_table_gets() -> None:
    problems: list[str] = []
    assert parse_budget(None, problems) == parse_budget({}, problems) == QualityBudget()
    assert problems == []


@pytest.mark.parametrize(("kld", "inside"), [(0.0499, True), (0.05, True), (0.0501, False)])
def test_budget_mean_kld_at_most_0_05(kld: float, inside: bool) -> None:
    assert (exclusion(_candidate(kld=kld), QualityBudget(), quality_known=True) is None) is inside


@pytest.mark.parametrize(("same_top", "inside"), [(90.1, True), (90.0, True), (89.9, False)])
def test_budget_same_top_at_least_90_percent(same_top: float, inside: bool) -> None:
    assert (exclusion(_candidate(same_top=same_top), QualityBudget(), quality_known=True) is None) is inside


@pytest.mark.parametrize(("reps", "decides"), [(5, True), (4, False)])
def test_budget_min_reps_is_5_steady_reps_a_side(reps: int, decides: bool) -> None:
    assert (noise_flags(_candidate(reps=reps), QualityBudget()) == []) is decides


def test_budget_confidence_is_95_percent() -> None:
    # 8 and 8 reps: a cut of 14 at 95 % (published: U <= 13), 17 at 90 %, 10 at 99 %
    assert cut_count(8, 8, QualityBudget().confidence_pct) == 14
