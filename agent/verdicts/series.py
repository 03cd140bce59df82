"""Series arithmetic the verdicts share: clean readings, windows, pointwise maxima, ranks and interpolation.

A series is ``[(t_mono, value), ...]`` as ``edgeprof.telemetry.analysis`` defines it: a None or non-finite
value is a reading that was not taken, and input need not be sorted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from edgeprof.telemetry import SeriesLike

Point = tuple[float, float]


def points(series: SeriesLike) -> list[Point]:
    """The readings that hold a number, sorted by time."""
    out = [(float(t), float(v)) for t, v in series if v is not None and math.isfinite(v)]
    out.sort(key=lambda p: p[0])
    return out


def within(series: SeriesLike, t_start: float, t_end: float) -> list[Point]:
    """The readings taken in [t_start, t_end]."""
    return [(t, v) for t, v in points(series) if t_start <= t <= t_end]


def per_time_max(series_list: Iterable[SeriesLike]) -> list[Point]:
    """Pointwise max of several series (readings of one sampler tick share their timestamp)."""
    by_t: dict[float, float] = {}
    for series in series_list:
        for t, v in points(series):
            by_t[t] = max(by_t[t], v) if t in by_t else v
    return sorted(by_t.items())


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        mean_rank = (i + j) / 2.0 + 1.0
        for k in range(i, j + 1):
            out[order[k]] = mean_rank
        i = j + 1
    return out


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman rank correlation (Pearson on tie-averaged ranks); None for < 3 pairs or a constant side."""
    if len(xs) != len(ys) or len(xs) < 3:
        return None
    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    mx, my = math.fsum(rx) / n, math.fsum(ry) / n
    sxx = math.fsum((a - mx) ** 2 for a in rx)
    syy = math.fsum((b - my) ** 2 for b in ry)
    if sxx <= 0 or syy <= 0:
        return None
    sxy = math.fsum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    return sxy / math.sqrt(sxx * syy)


def value_at(series: SeriesLike, t: float, tol_s: float = 2.0) -> float | None:
    """Linear interpolation at ``t`` between the readings either side; the nearest reading within
    ``tol_s`` when ``t`` lies beyond the readings; None if nothing is that close."""
    readings = points(series)
    if not readings:
        return None
    before = [p for p in readings if p[0] <= t]
    after = [p for p in readings if p[0] >= t]
    if before and after:
        (ta, va), (tb, vb) = before[-1], after[0]
        if tb - ta > 2 * tol_s:
            return None
        return va if tb == ta else va + (vb - va) * (t - ta) / (tb - ta)
    nearest = before[-1] if before else after[0]
    return nearest[1] if abs(nearest[0] - t) <= tol_s else None


def thirds(values: Sequence[float]) -> tuple[list[float], list[float]]:
    """The first and the last third of ``values`` (at least one value each)."""
    k = max(1, len(values) // 3)
    return list(values[:k]), list(values[-k:])
