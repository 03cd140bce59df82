"""Order statistics for small samples: min / median / max and nearest-rank percentiles, always with n; and
the anytime-valid interval a sequential decision between two rivals rests on."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


def nearest_rank(values: Iterable[float], q: float) -> float | None:
    """Nearest-rank percentile: ``sorted(x)[ceil(q·n) − 1]`` (q in (0, 1]); None for no values.

    Always an observed value, never an interpolation: with n = 5, p95 is the maximum, and saying so is
    more honest than inventing a number between two runs.
    """
    if not 0.0 < q <= 1.0:
        raise ValueError(f"quantile must be in (0, 1], got {q}")
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return None
    rank = max(1, math.ceil(q * len(xs) - 1e-9))
    return xs[rank - 1]


def median(values: Iterable[float]) -> float | None:
    """The middle observation (mean of the two middle ones for even n, the usual definition)."""
    xs = sorted(v for v in values if v is not None)
    n = len(xs)
    if n == 0:
        return None
    mid = n // 2
    return xs[mid] if n % 2 else (xs[mid - 1] + xs[mid]) / 2.0


@dataclass(frozen=True)
class Summary:
    n: int
    min: float | None
    median: float | None
    max: float | None
    p50: float | None
    p95: float | None

    @classmethod
    def of(cls, values: Iterable[float | None]) -> Summary:
        xs = [v for v in values if v is not None]
        return cls(
            n=len(xs),
            min=min(xs) if xs else None,
            median=median(xs),
            max=max(xs) if xs else None,
            p50=nearest_rank(xs, 0.5),
            p95=nearest_rank(xs, 0.95),
        )


# --- Decisions that may look at the data after every block -------------------------------------------
#
# Lai's (1976) confidence sequence for the mean of i.i.d. normal observations of unknown variance: the
# scale-invariant mixture likelihood ratio (a N(0, 1/c²) prior on the effect in units of sigma, the right
# Haar prior on sigma)
#     M_n(mu) = sqrt(c² / (n + c²)) · (1 − S_n² / ((n + c²) V_n))^(−n/2),  S_n = Σ(x − mu), V_n = Σ(x − mu)²
# is a nonnegative martingale under mu with M_1 = 1, so by Ville's inequality P(∃ n: M_n(mu) ≥ 1/α) ≤ α: the
# set {mu: M_n(mu) < 1/α} covers mu at every n at once, however the stopping time is chosen (Wang & Ramdas
# 2023, "Anytime-valid t-tests and confidence sequences for Gaussian means with unknown variance", give it
# with its proof). Solved for mu it is x̄ ± s·sqrt(K / (n − K)), s² = Σ(x − x̄)²/n, K = (n + c²)(1 −
# (α² c² / (n + c²))^(1/n)); unbounded while K ≥ n.
# c² = 0.5: the sequence is bounded from 4 observations at 95 % and within 1.3× a fixed-n t interval's
# width at the 10–20 block pairs a group's budget allows (c² = 1 is wider below 6, c² = 2 below 8).
CS_PRIOR_PRECISION = 0.5


def mean_confidence_sequence(
    xs: Iterable[float], alpha: float, c2: float = CS_PRIOR_PRECISION
) -> tuple[float, float] | None:
    """Lai's anytime-valid ``1 − alpha`` interval for the mean of ``xs`` (assumed i.i.d. normal); None while
    it is unbounded (fewer than 2 observations, or too few for ``alpha``)."""
    values = list(xs)
    n = len(values)
    if n < 2 or not 0.0 < alpha < 1.0:
        return None
    mean = sum(values) / n
    spread = sum((x - mean) ** 2 for x in values) / n
    k = (n + c2) * (1.0 - (alpha * alpha * c2 / (n + c2)) ** (1.0 / n))
    if k >= n:
        return None
    half = math.sqrt(spread * k / (n - k))
    return mean - half, mean + half


# Where no resolution is given, a tie is "within twice the spread of one block pair's log ratio", kept
# between these bounds (%): finer than the machine's own noise would take more pairs than any budget has.
TIE_FROM_NOISE = 2.0
TIE_MIN_PCT, TIE_MAX_PCT = 1.0, 10.0


@dataclass(frozen=True)
class PairedDecision:
    """Two rivals' speed ratio over their paired blocks (one log ratio of mean log speeds per block pair),
    with its anytime-valid interval. ``state``: ``decided`` (the interval excludes 1), ``tie`` (it lies
    within ±``tie_pct`` %), ``open`` (neither yet)."""

    n_pairs: int
    ratio: float | None  # exp(mean log ratio): the geometric mean of the block pairs' ratios
    low: float | None
    high: float | None
    confidence_pct: float
    tie_pct: float | None
    tie_from: str  # "plan" or "noise"
    state: str

    @property
    def decided(self) -> bool:
        return self.state == "decided"

    def describe(self) -> str:
        if self.ratio is None:
            return f"no paired blocks ({self.n_pairs})"
        where = f"{self.n_pairs} block pairs"
        if self.low is None or self.high is None:
            return f"ratio {self.ratio:.3f}, {self.confidence_pct:g} % CS unbounded after {where}"
        digits = 2 if f"{self.low:.2f}" != f"{self.high:.2f}" else 3
        ci = f"{self.low:.{digits}f}–{self.high:.{digits}f}"
        return f"ratio {self.ratio:.{digits}f}, {self.confidence_pct:g} % CS {ci} after {where}"


def block_log_ratios(
    a_blocks: Mapping[int, Sequence[float]], b_blocks: Mapping[int, Sequence[float]]
) -> list[float]:
    """One observation per block both sides ran: mean ln(a) − mean ln(b) over that block's reps."""
    out = []
    for i in sorted(set(a_blocks) & set(b_blocks)):
        a = [math.log(x) for x in a_blocks[i] if x is not None and x > 0]
        b = [math.log(y) for y in b_blocks[i] if y is not None and y > 0]
        if a and b:
            out.append(sum(a) / len(a) - sum(b) / len(b))
    return out


def paired_decision(
    a_blocks: Mapping[int, Sequence[float]],
    b_blocks: Mapping[int, Sequence[float]],
    confidence_pct: float = 95.0,
    tie_pct: float | None = None,
) -> PairedDecision:
    """``a``'s speed over ``b``'s and where it stands, from the blocks they ran side by side (block id ->
    that block's speeds). ``tie_pct`` None: the resolution comes from the block pairs' own spread."""
    ds = block_log_ratios(a_blocks, b_blocks)
    n = len(ds)
    tie_from = "plan" if tie_pct is not None else "noise"
    if n >= 2 and tie_pct is None:
        mean = sum(ds) / n
        sd_pct = 100.0 * math.sqrt(sum((d - mean) ** 2 for d in ds) / (n - 1))
        tie_pct = round(min(TIE_MAX_PCT, max(TIE_MIN_PCT, TIE_FROM_NOISE * sd_pct)), 1)
    if not ds:
        return PairedDecision(0, None, None, None, confidence_pct, tie_pct, tie_from, "open")
    ratio = math.exp(sum(ds) / n)
    cs = mean_confidence_sequence(ds, 1.0 - confidence_pct / 100.0)
    if cs is None:
        return PairedDecision(n, ratio, None, None, confidence_pct, tie_pct, tie_from, "open")
    low, high = math.exp(cs[0]), math.exp(cs[1])
    bound = 1.0 + (tie_pct or 0.0) / 100.0
    if low > 1.0 or high < 1.0:
        state = "decided"
    elif tie_pct is not None and low >= 1.0 / bound and high <= bound:
        state = "tie"
    else:
        state = "open"
    return PairedDecision(n, ratio, low, high, confidence_pct, tie_pct, tie_from, state)


def pair_confidence_pct(confidence_pct: float, n_rivals: int) -> float:
    """The level of each pairwise interval so that all pairs of ``n_rivals`` hold together (Bonferroni)."""
    n_pairs = max(1, n_rivals * (n_rivals - 1) // 2)
    return 100.0 - (100.0 - confidence_pct) / n_pairs
