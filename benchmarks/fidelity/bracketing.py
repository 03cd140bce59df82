"""Paired ratios of an edgeprof run against the llama-bench runs right before and right after it.

``fidelity.py`` and ``depth_fidelity.py`` both bracket every edgeprof run with llama-bench: this host flips
between a fast and a slow state for seconds at a time, and a run whose two llama-bench neighbours agree ran
in one state (a *stable* round). Inputs are per round, in round order; None (not measured) drops that
round from the ratios that need it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def bracketed(
    before: Sequence[tuple[float, float]],
    after: Sequence[tuple[float, float]],
    ep_median: Sequence[float | None],
    ep_fastest: Sequence[float | None],
    stable_within: float,
) -> dict[str, Any]:
    """``before``/``after``: (median rep, fastest rep) of the llama-bench run on each side of the edgeprof run;
    ``ep_*``: the edgeprof run's median and fastest rep. llama-bench's figure for a round is the mean of its two
    neighbours; a round is stable when their fastest reps agree within ``stable_within``."""
    pairs = list(zip(before, after, strict=True))
    lb_median = [(b[0] + a[0]) / 2 for b, a in pairs]
    lb_fastest = [(b[1] + a[1]) / 2 for b, a in pairs]
    stable = [abs(a[1] / b[1] - 1.0) <= stable_within for b, a in pairs]
    med = list(zip(ep_median, lb_median, stable, strict=True))
    fast = list(zip(ep_fastest, lb_fastest, stable, strict=True))
    paired = [e / b for e, b, _ in med if e and b]
    paired_fastest = [e / b for e, b, _ in fast if e and b]
    stable_paired = [e / b for e, b, ok in med if e and b and ok]
    stable_fastest = [e / b for e, b, ok in fast if e and b and ok]
    return {
        "llama_bench_rounds": lb_median,
        "llama_bench_fastest_rounds": lb_fastest,
        "stable": stable,
        "stable_rounds": sum(stable),
        "paired_ratios": paired,
        "paired_ratio_median": _median(paired),
        "paired_fastest_ratios": paired_fastest,
        "paired_fastest_ratio_median": _median(paired_fastest),
        "stable_paired_ratio_median": _median(stable_paired),
        "stable_fastest_ratios": stable_fastest,
        "stable_fastest_ratio_median": _median(stable_fastest),
    }
