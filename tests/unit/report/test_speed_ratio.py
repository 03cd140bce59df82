"""The ratio of two variants' steady medians and its exact rank-based interval (agent/report/speed_ratio.py),
checked against brute force and the Mann–Whitney tables."""

from __future__ import annotations

import itertools
import math

import pytest

from edgeprof.report import speed_ratio as sr
from edgeprof.report.speed_ratio import cut_count, speed_ratio, u_counts


def brute_u_counts(m: int, n: int) -> tuple[int, ...]:
    """U for every way of placing m ranks among m + n (U = pairs where the first sample's value is larger)."""
    counts = [0] * (m * n + 1)
    for first in itertools.combinations(range(m + n), m):
        u = sum(sum(1 for j in range(i) if j not in first) for i in first)
        counts[u] += 1
    return tuple(counts)


@pytest.mark.parametrize(("m", "n"), [(m, n) for m in range(1, 6) for n in range(1, 6)])
def test_u_distribution_is_exact(m: int, n: int) -> None:
    assert u_counts(m, n) == brute_u_counts(m, n)
    assert sum(u_counts(m, n)) == math.comb(m + n, m)


def test_cut_counts_match_the_mann_whitney_tables() -> None:
    # two-sided 5 % critical values of U (reject at U <= c): k = c + 1; none exists for 3 reps a side
    assert [cut_count(n, n, 95.0) for n in range(2, 11)] == [0, 0, 1, 3, 6, 9, 14, 18, 24]
    assert cut_count(3, 7, 95.0) == 2
    assert cut_count(7, 7, 99.0) == 5


def test_every_interval_covers_at_least_its_level() -> None:
    for m in range(2, 13):
        for n in range(2, 13):
            k = cut_count(m, n, 95.0)
            if k:
                tail = sum(u_counts(min(m, n), max(m, n))[:k]) / math.comb(m + n, m)
                assert 1 - 2 * tail >= 0.95, (m, n)
                more = sum(u_counts(min(m, n), max(m, n))[: k + 1]) / math.comb(m + n, m)
                assert 1 - 2 * more < 0.95, (m, n)  # and k is the largest cut that does


def test_the_normal_approximation_joins_the_exact_count(monkeypatch: pytest.MonkeyPatch) -> None:
    exact = [cut_count(n, n, 95.0) for n in (30, 40, 50)]
    monkeypatch.setattr(sr, "EXACT_MAX_PAIRS", 0)
    approx = [cut_count(n, n, 95.0) for n in (30, 40, 50)]
    assert all(abs(a - e) <= 1 for a, e in zip(approx, exact, strict=True))


def test_the_same_reps_twice_are_no_difference() -> None:
    reps = [20.0, 20.3, 19.8, 20.1, 19.9]
    r = speed_ratio(reps, list(reversed(reps)))
    assert r.ratio == 1.0 and r.low is not None and r.high is not None and r.low < 1.0 < r.high
    assert not r.decided
    assert r.describe().startswith("ratio 1.00, 95 % CI ")


def test_a_clear_factor_is_decided_and_an_outlier_rep_does_not_undo_it() -> None:
    slow = [20.0, 20.1, 19.9, 20.05, 19.95, 20.02, 19.98]
    fast = [24.0, 24.1, 23.9, 24.05, 23.95, 24.02, 5.0]  # one rep hit by something else
    r = speed_ratio(fast, slow)
    assert r.decided and r.low is not None and r.low > 1.0
    assert r.ratio == pytest.approx(24.0 / 20.0)


def test_identical_reps_give_the_ratio_itself() -> None:
    r = speed_ratio([30.0] * 5, [10.0] * 5)
    assert (r.ratio, r.low, r.high) == (pytest.approx(3.0), pytest.approx(3.0), pytest.approx(3.0))
    assert r.decided and r.describe() == "ratio 3.000, 95 % CI 3.000–3.000"


def test_too_few_reps_have_no_interval() -> None:
    r = speed_ratio([30.0, 31.0, 29.0], [10.0, 10.5, 9.5])
    assert r.low is None and r.high is None and not r.decided
    assert r.describe() == "ratio 3.00, 95 % CI unbounded"


def test_speeds_must_be_positive() -> None:
    with pytest.raises(ValueError):
        speed_ratio([], [1.0])
    with pytest.raises(ValueError):
        speed_ratio([1.0, 0.0], [1.0])


# -- over paired blocks (rivals measured interleaved) ------------------------------------------------------
def test_blocked_cut_count_is_the_convolution_of_the_blocks() -> None:
    # one block: the plain interval; 2,2,1 reps a side (5 steady reps in blocks of 2): only the extreme
    # ordering in every block is cut (P = 1/6 · 1/6 · 1/2 = 1/72 per tail), P(U <= 1) = 4/72 > 2.5 %
    assert sr.blocked_cut_count([(5, 5)], 95.0) == cut_count(5, 5, 95.0)
    assert sr.blocked_cut_count([(2, 2), (2, 2), (1, 1)], 95.0) == 1
    # five pairs of single reps: the sign test, whose least two-sided p is 1/16 — no 95 % interval; six: one
    assert sr.blocked_cut_count([(1, 1)] * 5, 95.0) == 0
    assert sr.blocked_cut_count([(1, 1)] * 6, 95.0) == 1
    assert sr.blocked_cut_count([(2, 2)] * 3, 95.0) == 2  # P(U <= 1) = 4/216 < 2.5 % < P(U <= 2)


def test_blocked_ratio_takes_differences_within_blocks_only() -> None:
    # the host slowed down by half between the rounds: across blocks, b's slow block overlaps a's fast one
    a = {0: [10.0, 10.2], 1: [5.0, 5.1], 2: [10.1]}
    b = {0: [9.0, 9.1], 1: [4.5, 4.6], 2: [9.05]}
    paired = sr.blocked_ratio(a, b, 95.0)
    assert paired.decided and paired.low is not None and paired.low > 1.0
    pooled = speed_ratio([x for v in a.values() for x in v], [x for v in b.values() for x in v], 95.0)
    assert not pooled.decided  # the drift hides what the pairing sees
    assert paired.ratio == pooled.ratio  # the figure shown is the same ratio of medians


def test_reps_are_assigned_to_the_block_of_the_load_before_them() -> None:
    loads = [(10.0, 0), (30.0, 1), (50.0, 2), (40.0, 0)]  # an extra cold-only child loads at 40
    reps = [(11.0, 5.0), (12.0, 6.0), (31.0, 7.0), (51.0, 8.0), (None, 9.0)]
    assert sr.reps_by_block(loads, reps) == {0: [5.0, 6.0, 9.0], 1: [7.0], 2: [8.0]}
    assert sr.reps_by_block([], [(1.0, 2.0)]) == {0: [2.0]}
