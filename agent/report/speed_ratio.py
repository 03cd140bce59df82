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

Variants measured interleaved (agent/sweep/interleave.py: block i of every variant of a condition runs in
round i, the rounds in alternating order) get the same interval over **paired blocks** (``blocked_ratio``):
only the differences within a block pair enter, and the null distribution of U is that of the sum of
the blocks' own Mann–Whitney statistics (the convolution of their Gaussian binomials). The host's drift
between rounds then moves both sides of every difference alike and cannot pass for a difference between the
variants; with a single block this is the interval above.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Any, TypeVar

from edgeprof.stats import median

K = TypeVar("K")

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
    return blocked_cut_count([(m, n)], confidence_pct)


def blocked_cut_count(sizes: Sequence[tuple[int, int]], confidence_pct: float) -> int:
    """``cut_count`` for blocks of (m_i, n_i) reps whose differences are taken within each block only: U is
    the sum of the blocks' independent U statistics."""
    alpha_half = (1.0 - confidence_pct / 100.0) / 2.0
    sizes = [(m, n) for m, n in sizes if m > 0 and n > 0]
    n_pairs = sum(m * n for m, n in sizes)
    if n_pairs <= EXACT_MAX_PAIRS:
        counts: list[int] = [1]
        total = 1
        for m, n in sizes:
            block = u_counts(min(m, n), max(m, n))
            total *= math.comb(m + n, m)
            summed = [0] * (len(counts) + len(block) - 1)
            for i, c in enumerate(counts):
                for j, d in enumerate(block):
                    summed[i + j] += c * d
            counts = summed
        cumulative, k = 0, 0
        for c in counts:  # P(U ≤ k) ≤ α/2 for the cut-off U = 0 … k − 1
            cumulative += c
            if cumulative / total > alpha_half:
                break
            k += 1
        return k
    mean = n_pairs / 2.0
    sd = math.sqrt(sum(m * n * (m + n + 1) / 12.0 for m, n in sizes))
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


def blocked_ratio(
    a_blocks: Mapping[int, Sequence[float]],
    b_blocks: Mapping[int, Sequence[float]],
    confidence_pct: float = 95.0,
) -> SpeedRatio:
    """The ratio of the medians of all of ``a``'s reps to all of ``b``'s, its interval over the paired blocks
    (block id -> that block's speeds): differences only within a block both sides have."""
    a = [x for reps in a_blocks.values() for x in reps]
    b = [y for reps in b_blocks.values() for y in reps]
    med_a, med_b = median(a), median(b)
    if med_a is None or med_b is None or med_b <= 0 or min(*a, *b) <= 0:
        raise ValueError("blocked_ratio needs two non-empty samples of positive speeds")
    shared = sorted(set(a_blocks) & set(b_blocks))
    sizes = [(len(a_blocks[i]), len(b_blocks[i])) for i in shared]
    k = blocked_cut_count(sizes, confidence_pct)
    ratio = med_a / med_b
    if k < 1:
        return SpeedRatio(ratio, None, None, confidence_pct)
    diffs = sorted(math.log(x) - math.log(y) for i in shared for x in a_blocks[i] for y in b_blocks[i])
    return SpeedRatio(ratio, math.exp(diffs[k - 1]), math.exp(diffs[len(diffs) - k]), confidence_pct)


def reps_by_block(
    loads: Sequence[tuple[float, int]], reps: Sequence[tuple[float | None, float]]
) -> dict[int, list[float]]:
    """Block id -> the speeds of the steady reps run in it: each rep (start time, speed) belongs to the block
    of the last child load (start time, block id) before it; a rep without a time, or a run measured in one
    child, is block 0."""
    ordered = sorted(loads)
    out: dict[int, list[float]] = {}
    for t, value in reps:
        block = 0
        for t_load, b in ordered:
            if t is None or t_load > t:
                break
            block = b
        out.setdefault(block, []).append(value)
    return out


# --- Which reps a comparison may use, and which measured figure may break a tie --------------------------


def state_words(state: Mapping[str, Any], usual: Mapping[str, Any]) -> str:
    """What differs between a block's device state and the group's usual one: "governor powersave, not
    performance"."""
    keys = sorted(set(state) | set(usual))
    diffs = [f"{k} {state.get(k)!s}, not {usual.get(k)!s}" for k in keys if state.get(k) != usual.get(k)]
    return "; ".join(diffs)


def set_aside(
    blocks_of: Mapping[K, Mapping[int, Sequence[float]]],
    states_of: Mapping[K, Mapping[int, Mapping[str, Any]]],
    flags_of: Mapping[K, Mapping[int, Sequence[str]]],
    labels: Mapping[K, str],
) -> tuple[dict[K, dict[int, list[float]]], list[str]]:
    """Each rival's blocks less those whose reps ran throttled (``flags_of``: block -> why) or in another
    device state than the group's usual one (the state most of its blocks started in), and one line per
    rival saying how many reps were set aside and why."""
    counts = Counter(_key(st) for per in states_of.values() for st in per.values())
    usual_key = counts.most_common(1)[0][0] if counts else None
    usual = next(
        (st for per in states_of.values() for st in per.values() if _key(st) == usual_key), None
    )
    kept: dict[K, dict[int, list[float]]] = {}
    lines: list[str] = []
    for key, blocks in blocks_of.items():
        kept[key], why_of = {}, []
        for block, reps in blocks.items():
            why = list(flags_of.get(key, {}).get(block, ()))
            state = states_of.get(key, {}).get(block)
            if usual is not None and state is not None and _key(state) != usual_key:
                why.append(f"device state: {state_words(state, usual)}")
            if why:
                why_of.append(f"block {block + 1} ({len(reps)} rep{'s' if len(reps) != 1 else ''}: "
                              f"{', '.join(why)})")  # fmt: skip
            else:
                kept[key][block] = list(reps)
        if why_of:
            n = sum(len(blocks[b]) for b in blocks if b not in kept[key])
            lines.append(f"{labels[key]}: {n} rep{'s' if n != 1 else ''} set aside: {'; '.join(why_of)}")
    return kept, lines


def block_states(row: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
    """A report row's device state per block (``_block_states``, from ``run.block_states_json``)."""
    found = row.get("_block_states") or {}
    return {int(k): dict(v) for k, v in found.items() if isinstance(v, dict)}


def block_flags(row: Mapping[str, Any]) -> dict[int, list[str]]:
    """A report row's reasons per block why its reps ran throttled (``_block_flags``)."""
    return {int(k): [str(w) for w in v] for k, v in (row.get("_block_flags") or {}).items() if v}


def _key(state: Mapping[str, Any]) -> str:
    return json.dumps(dict(state), sort_keys=True, default=str)


# A measured figure breaks a tie only where the two differ by more than this share of the larger.
TIE_BREAK_SHARE = 0.10
TIE_BREAK_FIGURES = (
    ("peak_rss_mb", "memory", "MiB peak RSS", "{:.0f}"),
    ("decode_j_per_token_median", "energy", "J/token decoding", "{:.3f}"),
)


def tie_breakers(
    rows: Sequence[Mapping[str, Any]], quality_known: bool
) -> tuple[Mapping[str, Any] | None, list[str]]:
    """Among rows tied on speed (quality alike or not measured): the one a measured figure sets apart
    (less memory, then less energy, each by more than ``TIE_BREAK_SHARE``), and the words for each figure:
    why it broke the tie, or that it did not (alike, or not measured for all of them)."""
    words = ["quality alike" if quality_known else 'quality not measured (add a kind = "quality" workload)']
    for key, what, unit, fmt in TIE_BREAK_FIGURES:
        values = [r.get(key) for r in rows]
        if any(v is None for v in values):
            words.append(f"{what} not measured for every one")
            continue
        shown = " and ".join(fmt.format(v) for v in values)
        ranked = sorted(rows, key=lambda r: float(r[key]))
        low, high = float(ranked[0][key]), float(ranked[1][key])
        if high > 0 and (high - low) / high > TIE_BREAK_SHARE:
            return ranked[0], [f"for {what} ({shown} {unit})", *words]
        words.append(f"{what} alike ({shown} {unit})")
    return None, words
