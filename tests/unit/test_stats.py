"""Nearest-rank percentiles (p = sorted[ceil(q·n) − 1]) and medians at the small n of real sweeps."""

from __future__ import annotations

import math
import random

import pytest

from edgeprof.stats import Summary, median, nearest_rank


@pytest.mark.parametrize("q", [0.01, 0.2, 0.5, 0.95, 1.0])
def test_n1_every_quantile_is_the_value(q: float) -> None:
    assert nearest_rank([7.5], q) == 7.5


def test_n2_p50_lower_p95_upper() -> None:
    assert nearest_rank([3.0, 1.0], 0.5) == 1.0
    assert nearest_rank([3.0, 1.0], 0.95) == 3.0


def test_n5() -> None:
    xs = [10.0, 20.0, 30.0, 40.0, 50.0]
    assert nearest_rank(xs, 0.5) == 30.0  # ceil(2.5) = 3rd
    assert nearest_rank(xs, 0.95) == 50.0  # ceil(4.75) = 5th: the maximum
    assert nearest_rank(xs, 0.2) == 10.0  # 0.2 * 5 = 1 exactly: 1st, not 2nd
    assert nearest_rank(xs, 0.21) == 20.0
    assert nearest_rank(xs, 0.4) == 20.0  # 0.4 * 5 = 2: 2nd
    assert nearest_rank(xs, 1.0) == 50.0


def test_n10_p95_is_10th() -> None:
    xs = [float(i) for i in range(1, 11)]
    assert nearest_rank(xs, 0.95) == 10.0
    assert nearest_rank(xs, 0.9) == 9.0
    assert nearest_rank(xs, 0.5) == 5.0


def test_n100_p95_is_95th() -> None:
    xs = [float(i) for i in range(1, 101)]
    assert nearest_rank(xs, 0.95) == 95.0
    assert nearest_rank(xs, 0.5) == 50.0
    assert nearest_rank(xs, 0.99) == 99.0
    assert nearest_rank(xs, 1.0) == 100.0


@pytest.mark.parametrize("q", [0.07, 0.14, 0.28, 0.55, 0.56])
def test_n100_product_just_above_an_integer_is_not_rounded_up(q: float) -> None:
    # q * 100 lands a hair above the integer in binary floating point (0.07 * 100 = 7.000000000000001);
    # a bare ceil() would pick the next rank.
    assert q * 100 > round(q * 100)
    xs = [float(i) for i in range(1, 101)]
    assert nearest_rank(xs, q) == float(round(q * 100))


def test_matches_the_definition_for_many_small_samples() -> None:
    rng = random.Random(1)
    for n in range(1, 12):
        xs = [rng.uniform(0, 100) for _ in range(n)]
        ordered = sorted(xs)
        for q in (0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 1.0):
            exact_rank = math.ceil(round(q * n, 9))
            assert nearest_rank(xs, q) == ordered[exact_rank - 1], (n, q)


def test_unsorted_input() -> None:
    xs = [50.0, 10.0, 40.0, 20.0, 30.0]
    assert nearest_rank(xs, 0.5) == 30.0
    assert nearest_rank(xs, 0.2) == 10.0
    assert nearest_rank(iter(xs), 0.95) == 50.0  # any iterable


def test_none_values_are_ignored() -> None:
    xs = [None, 3.0, None, 1.0, 2.0]
    assert nearest_rank(xs, 0.5) == 2.0  # type: ignore[arg-type]
    assert nearest_rank([None, 5.0], 0.95) == 5.0  # type: ignore[list-item]


def test_empty_is_none() -> None:
    assert nearest_rank([], 0.5) is None
    assert nearest_rank([None, None], 0.95) is None  # type: ignore[list-item]


@pytest.mark.parametrize("q", [0.0, -0.1, 1.0001, 50, 95.0])
def test_quantile_outside_0_1_raises(q: float) -> None:
    with pytest.raises(ValueError, match="quantile"):
        nearest_rank([1.0, 2.0, 3.0], q)


def test_median_odd_and_even() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert median([5.0]) == 5.0
    assert median([1.0, 2.0]) == 1.5
    assert median([]) is None
    assert median([None, 4.0, None, 2.0]) == 3.0  # type: ignore[list-item]


def test_summary_of_with_nones() -> None:
    s = Summary.of([None, 12.0, 9.0, None, 30.0, 10.0, 11.0])
    assert s == Summary(n=5, min=9.0, median=11.0, max=30.0, p50=11.0, p95=30.0)


def test_summary_even_n_median_differs_from_p50() -> None:
    s = Summary.of([4.0, 1.0, 3.0, 2.0])
    assert s.median == 2.5  # mean of the two middle values
    assert s.p50 == 2.0  # nearest rank: always an observed value
    assert s.p95 == 4.0


def test_summary_of_nothing() -> None:
    assert Summary.of([]) == Summary(n=0, min=None, median=None, max=None, p50=None, p95=None)
    assert Summary.of([None, None]) == Summary(n=0, min=None, median=None, max=None, p50=None, p95=None)
