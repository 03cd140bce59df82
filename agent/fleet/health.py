"""The health rule: does a board's health-plan result still look like that board?

A board fails its health check when the health sweep errors (any run not ``ok``) or when its decode speed
falls below the band of its own passed history:

    tg_tps < median(history) - max(K_MAD * MAD_SCALE * MAD(history), MIN_BAND_FRACTION * median(history))

``history`` is the board's last ``HISTORY_WINDOW`` passed results of the same health plan (its sha256); a
failed result never joins it, so a slow board cannot drag its own baseline down. MAD is the median absolute
deviation, scaled by 1.4826 to a normal sigma, so K_MAD = 3 is "three sigmas slower". The band is never
narrower than MIN_BAND_FRACTION of the median: five identical results (MAD 0) must not fail a board for
being 0.1 % slower. With fewer than MIN_HISTORY passed results the board passes (its baseline is still
being built) and says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from edgeprof.stats import median

K_MAD = 3.0
MAD_SCALE = 1.4826
MIN_BAND_FRACTION = 0.10
MIN_HISTORY = 3
HISTORY_WINDOW = 20


@dataclass(frozen=True)
class HealthVerdict:
    passed: bool
    reason: str
    lower_tps: float | None = None  # the band's lower edge, when there was a history to judge by


def lower_edge(history: Sequence[float]) -> float | None:
    """The slowest decode speed that still passes, or None while the history is too short."""
    if len(history) < MIN_HISTORY:
        return None
    mid = median(history)
    assert mid is not None
    mad = median([abs(x - mid) for x in history])
    assert mad is not None
    return mid - max(K_MAD * MAD_SCALE * mad, MIN_BAND_FRACTION * mid)


def judge(tg_tps: float | None, errors: Sequence[str], history: Sequence[float]) -> HealthVerdict:
    """The verdict on one health run: ``errors`` are its runs that did not end ``ok`` (one line each)."""
    if errors:
        return HealthVerdict(False, f"health plan failed: {'; '.join(errors)[:300]}")
    if tg_tps is None:
        return HealthVerdict(False, "health plan measured no decode speed (tg_tps)")
    edge = lower_edge(history)
    if edge is None:
        return HealthVerdict(
            True, f"tg {tg_tps:.1f} t/s; baseline {len(history) + 1} of {MIN_HISTORY} results"
        )
    mid = median(history)
    if tg_tps < edge:
        why = (
            f"tg {tg_tps:.1f} t/s below its band: median {mid:.1f} - band = {edge:.1f} t/s "
            f"(last {len(history)} passed checks)"
        )
        return HealthVerdict(False, why, edge)
    return HealthVerdict(True, f"tg {tg_tps:.1f} t/s within its band (>= {edge:.1f} t/s)", edge)
