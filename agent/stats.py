"""Order statistics for small samples: min / median / max and nearest-rank percentiles, always with n."""

from __future__ import annotations

import math
from collections.abc import Iterable
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
