"""Intervals of task accuracy: one proportion (Wilson) and the paired difference of two (Bonett-Price).

- Accuracy k/n: the Wilson score interval (E. B. Wilson, JASA 22:209, 1927), the interval llama-perplexity
  prints beside its HellaSwag score; it stays inside [0, 1] and keeps its coverage near 0 and 1 where the
  Wald interval does not (R. G. Newcombe, Stat Med 17:857, 1998, compared seven).
- A variant against its reference on the same tasks: only the discordant tasks carry the difference
  (``gained``: the variant right where the reference was wrong, ``lost``: the reverse), as in McNemar's
  test. Interval of the difference of the two paired proportions: Bonett and Price's adjusted Wald
  interval (D. G. Bonett and R. M. Price, J Educ Behav Stat 37:479, 2012), one of the two Fagerland,
  Lydersen and Laake recommend for paired proportions (Stat Med 33:2850, 2014): add one to each discordant
  count and two to n, then a Wald interval. Its coverage stays near 95 % at a handful of discordant tasks,
  where the plain Wald interval (b - c) / n +- z * sqrt(b + c - (b - c)^2 / n) / n collapses to zero width.
"""

from __future__ import annotations

import math

Z95 = 1.959963984540054  # the 97.5 % normal quantile (llama-perplexity uses 1.95996398454)


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of k successes in n trials (proportions, not percent)."""
    if n <= 0:
        raise ValueError("no trial")
    p = k / n
    z2n = z * z / n
    centre = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(p * (1 - p) / n + z2n / (4 * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def paired_difference(gained: int, lost: int, n: int, z: float = Z95) -> tuple[float, float, float]:
    """(difference, low, high) of variant minus reference accuracy (proportions) on the same n tasks, from
    the discordant counts: the Bonett-Price adjusted Wald interval, clipped to [-1, 1]."""
    if n <= 0 or gained < 0 or lost < 0 or gained + lost > n:
        raise ValueError(f"impossible paired counts: gained {gained}, lost {lost} of {n}")
    diff = (gained - lost) / n
    p12 = (gained + 1) / (n + 2)
    p21 = (lost + 1) / (n + 2)
    centre = p12 - p21
    half = z * math.sqrt(max(p12 + p21 - centre * centre, 0.0) / (n + 2))
    return diff, max(-1.0, centre - half), min(1.0, centre + half)


def loss_sentence(label: str, gained: int, lost: int, n: int) -> str:
    """What the data say of a variant's accuracy against its reference, in points: a loss (or a gain) only
    when the whole 95 % interval is on that side of zero."""
    _diff, low, high = paired_difference(gained, lost, n)
    loss, lo, hi = 100 * (lost - gained) / n, -100 * high, -100 * low  # the loss, never a "-0.0"
    span = f"(95 % CI {lo:.1f}-{hi:.1f})" if lo >= 0 or hi <= 0 else f"(95 % CI {lo:+.1f} to {hi:+.1f})"
    counts = f"{lost} lost, {gained} gained of {n} tasks"
    if lo > 0:
        return f"{label} loses {loss:.1f} points {span}; {counts}"
    if hi < 0:
        return f"{label} gains {-loss:.1f} points {span}; {counts}"
    return f"{label}: no loss shown (loss {loss:+.1f} points, 95 % CI {lo:+.1f} to {hi:+.1f}); {counts}"
