"""Is one variant faster than another, or is the difference noise? The ratio of two variants' steady tg
medians with an exact, rank-based confidence interval.

The interval is the Hodges–Lehmann / Moses interval of a shift, taken on the log scale so the shift is a
factor: sort the m·n pairwise differences ln a_i − ln b_j and cut off k of them at each end, where k comes
from the exact null distribution of the Mann–Whitney U statistic (the coefficients of the Gaussian binomial
[m + n choose m]). If the two variants' reps differ only by a factor — the model a speed ratio assumes —
the interval holds the true ratio (which is then also the ratio of the medians) with at least the stated
confidence, for any distribution of the reps.

Chosen over a bootstrap of the medians because:
- it is exact at the sample sizes a sweep has (5–10 steady reps a config), where a percentile bootstrap of
  a median sees a handful of distinct values and covers less than it claims;
- it needs no random numbers: the same reps give the same interval on every machine and Python version,
  so a report re-read later, or on another box of a fleet, says the same thing;
- like the median, it is not moved by one outlier rep.

Beyond ``EXACT_MAX_PAIRS`` pairs the U quantile comes from the normal approximation (continuity-corrected),
which is then accurate to far better than the interval's own resolution.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

from edgeprof.stats import median

EXACT_MAX_PAIRS = 2_500  # 50 × 50 reps: the exact distribution costs m · m·n integer additions


@dataclass(frozen=True)
class SpeedRatio:
    """``ratio`` = median(a) / median(b); ``low``/``high``: its interval at ``confidence_pct``, None where
    the samples are too small for any interval at that level (then nothing can be called faster)."""

    ratio: float
    low: float | None
    high: float | None
    confidence_pct: float

    @property
    def decided(self) -> bool:
        """Whether the interval excludes 1: one of the two is faster beyond the noise."""
        return self.low is not None and self.high is not None and (self.low > 1.0 or self.high < 1.0)

    def describe(self) -> str:
        if self.low is None or self.high is None:
            return f"ratio {self.ratio:.2f}, {self.confidence_pct:g} % CI unbounded"
        # two decimals, three where two would print a narrow interval as one number twice
        digits = 2 if f"{self.low:.2f}" != f"{self.high:.2f}" else 3
        ci = f"{self.low:.{digits}f}–{self.high:.{digits}f}"
        return f"ratio {self.ratio:.{digits}f}, {self.confidence_pct:g} % CI {ci}"


@lru_cache(maxsize=256)
def u_counts(m: int, n: int) -> tuple[int, ...]:
    """How many of the C(m+n, m) orderings of two samples give each Mann–Whitney U = 0 … m·n (no ties):
    the coefficients of the Gaussian binomial, built factor by factor as Π (1 − q^(n+i)) / (1 − q^i)."""
    coeffs = [1]
    for i in range(1, m + 1):
        grown = coeffs + [0] * (n + i)
        for j, c in enumerate(coeffs):
            grown[j + n + i] -= c
        for j in range(i, len(grown)):  # exact division by (1 − q^i)
            grown[j] += grown[j - i]
        coeffs = grown[: i * n + 1]
    return tuple(coeffs)


def cut_count(m: int, n: int, confidence_pct: float) -> int:
    """k: the largest number of pairwise differences that may be cut off at each end so that the interval
    between them still covers with at least ``confidence_pct`` (0: no interval is possible)."""
    alpha_half = (1.0 - confidence_pct / 100.0) / 2.0
    if m * n <= EXACT_MAX_PAIRS:
        counts = u_counts(min(m, n), max(m, n))
        total = math.comb(m + n, m)
        cumulative, k = 0, 0
        for c in counts:  # P(U ≤ k) ≤ α/2 for the cut-off U = 0 … k − 1
            cumulative += c
            if cumulative / total > alpha_half:
                break
            k += 1
        return k
    mean = m * n / 2.0
    sd = math.sqrt(m * n * (m + n + 1) / 12.0)
    z = NormalDist().inv_cdf(1.0 - alpha_half)
    return max(0, math.floor(mean - z * sd - 0.5) + 1)


def speed_ratio(a: Sequence[float], b: Sequence[float], confidence_pct: float = 95.0) -> SpeedRatio:
    """The ratio of ``a``'s median to ``b``'s and its interval (both samples of positive speeds)."""
    med_a, med_b = median(a), median(b)
    if med_a is None or med_b is None or med_b <= 0 or min(*a, *b) <= 0:
        raise ValueError("speed_ratio needs two non-empty samples of positive speeds")
    ratio = med_a / med_b
    k = cut_count(len(a), len(b), confidence_pct)
    if k < 1:
        return SpeedRatio(ratio, None, None, confidence_pct)
    diffs = sorted(math.log(x) - math.log(y) for x in a for y in b)
    low, high = math.exp(diffs[k - 1]), math.exp(diffs[len(diffs) - k])
    return SpeedRatio(ratio, low, high, confidence_pct)
