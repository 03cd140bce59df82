"""The stability verdict: did a run's steady repetitions agree with each other (pyperf style)?"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from edgeprof.stats import median
from edgeprof.verdicts.result import VerdictResult, rounded

StabilityValue = Literal["stable", "unstable", "inconclusive"]


@dataclass(frozen=True)
class StabilityThresholds:
    """pyperf-style checks on the steady repetitions (pyperf's ``check`` warns at the same 10 % CV)."""

    # Coefficient of variation (sample stdev / mean) above 10 %: pyperf's "the standard deviation is X % of
    # the mean" warning threshold.
    max_cv: float = 0.10
    # An outlier: max/median above 1.25 or min/median below 1/1.25. pyperf uses 50 % for its min/max
    # outlier warning over dozens of values; with the 3-10 reps of a sweep one outlier moves the median
    # less, so the looser test would pass runs whose reps plainly disagree.
    max_over_median: float = 1.25
    # Fewer than 3 values: no spread can be judged (the stdev of 2 values is their half-difference).
    min_n: int = 3


def stability(values: Iterable[float | None], thresholds: StabilityThresholds | None = None) -> VerdictResult:
    """``stable``/``unstable`` (or ``inconclusive`` for < 3 values), pyperf style.

    Unstable when the coefficient of variation (sample stdev / mean) exceeds 10 %, or one value lies
    more than 25 % above the median (max/median > 1.25) or as far below it (min/median < 1/1.25).
    """
    th = thresholds or StabilityThresholds()
    xs = [float(v) for v in values if v is not None and math.isfinite(v)]
    evidence: dict[str, Any] = {"n": len(xs), "thresholds": asdict(th), "reasons": []}
    if len(xs) < th.min_n:
        evidence["reasons"].append(f"{len(xs)} value(s); need {th.min_n} to judge the spread")
        return VerdictResult("inconclusive", evidence)
    mean = math.fsum(xs) / len(xs)
    stdev = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
    med = median(xs) or 0.0
    cv = stdev / mean if mean > 0 else None
    hi = max(xs) / med if med > 0 else None
    lo = min(xs) / med if med > 0 else None
    evidence.update(
        {
            "mean": rounded(mean, 4),
            "stdev": rounded(stdev, 4),
            "cv": rounded(cv, 4),
            "median": rounded(med, 4),
            "min": rounded(min(xs), 4),
            "max": rounded(max(xs), 4),
            "max_over_median": rounded(hi, 4),
            "min_over_median": rounded(lo, 4),
        }
    )
    reasons: list[str] = evidence["reasons"]
    if cv is None or hi is None or lo is None:
        reasons.append("mean or median not positive: spread cannot be judged")
        return VerdictResult("inconclusive", evidence)
    if cv > th.max_cv:
        reasons.append(f"stdev is {100 * cv:.1f}% of the mean (limit {100 * th.max_cv:.0f}%)")
    if hi > th.max_over_median:
        reasons.append(f"max is {hi:.2f}x the median (limit {th.max_over_median:.2f}x)")
    if lo < 1.0 / th.max_over_median:
        reasons.append(f"min is {lo:.2f}x the median (limit {1.0 / th.max_over_median:.2f}x)")
    return VerdictResult("unstable" if reasons else "stable", evidence)
