"""Pure analysis of telemetry series: energy, per-phase aggregates, J/token and the cooldown wait.

Everything here works on plain ``(t_mono, value)`` lists and injected callables, with no database, threads
or real clock, so every number can be checked against a synthetic series whose answer is known.

Conventions shared by every function:

- A series is ``[(t_mono_s, value), ...]``; ``value`` None means "not read" and a non-finite value is
  treated the same way. Input need not be sorted.
- Missing data never becomes 0: when a window is not covered by readings the answer is None, never 0 J.
- Between two readings a gauge is taken to move linearly (trapezoid), so energy = mean power × duration
  holds between ``energy_from_power_j`` and ``mean_over``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal, TypeAlias

from edgeprof.collectors import MetricRole, counter_delta

Series: TypeAlias = list[tuple[float, float | None]]
# Parameters take any sequence so a list[tuple[float, float]] (no gaps) is accepted too: list is invariant.
SeriesLike: TypeAlias = Sequence[tuple[float, float | None]]

Stat = Literal["max", "mean", "min"]

# Which statistics a metric gets in ``aggregate_phase``, by its role (``edgeprof.collectors.roles``, as the
# collector that produced it declares it). Roles not listed (energy and throttle counters, clock caps and
# limits, "other") are not aggregated: a mean of a counter or of a policy limit says nothing about the phase.
AGGREGATE_STATS: Mapping[str, tuple[Stat, ...]] = {
    # Peak temperature is what throttles; the mean shows how long the phase sat near it.
    "temperature": ("max", "mean"),
    # Mean clock is the work done; the minimum catches a throttle dip the mean would hide.
    "clock": ("mean", "min"),
    "utilization": ("mean",),
    "power": ("mean",),
    # Memory matters at its peak: that is what gets a run OOM-killed.
    "memory": ("max",),
}

DEFAULT_MAX_GAP_S = 2.0
DEFAULT_EDGE_TOL_S = 0.5


def _clean(series: SeriesLike) -> list[tuple[float, float]]:
    """Readings that hold a number, sorted by time (stable, so equal timestamps keep their order)."""
    points = [(float(t), float(v)) for t, v in series if v is not None and math.isfinite(v)]
    points.sort(key=lambda p: p[0])
    return points


def _interp(a: tuple[float, float], b: tuple[float, float], t: float) -> float:
    (ta, va), (tb, vb) = a, b
    if tb == ta:
        return vb
    return va + (vb - va) * (t - ta) / (tb - ta)


def _edges_ok(points: list[tuple[float, float]], t_start: float, t_end: float, edge_tol_s: float) -> bool:
    # A window edge may overhang the readings by at most edge_tol_s: the sampler and the phase marks are
    # not synchronised, so the last reading of a run can land a period before the phase ends.
    return points[0][0] - t_start <= edge_tol_s and t_end - points[-1][0] <= edge_tol_s


def energy_from_power_j(
    series: SeriesLike,
    t_start: float,
    t_end: float,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
    edge_tol_s: float = DEFAULT_EDGE_TOL_S,
) -> float | None:
    """Joules in [t_start, t_end] from a power series in mW, by the trapezoid rule.

    The window is clipped by linear interpolation between the readings either side of each edge. None
    readings are dropped and the readings around them joined only if they are at most ``max_gap_s`` apart;
    a longer hole anywhere in the window makes the answer None. An edge may lie up to ``edge_tol_s``
    beyond the first/last reading, the nearest reading being held there. None also for fewer than 2
    usable readings or an empty window.
    """
    if not t_end > t_start:
        return None
    points = _clean(series)
    if len(points) < 2 or not _edges_ok(points, t_start, t_end, edge_tol_s):
        return None
    area_mw_s = 0.0
    first_t, first_v = points[0]
    last_t, last_v = points[-1]
    if first_t > t_start:
        area_mw_s += first_v * (min(first_t, t_end) - t_start)
    if last_t < t_end:
        area_mw_s += last_v * (t_end - max(last_t, t_start))
    for a, b in pairwise(points):
        lo, hi = max(a[0], t_start), min(b[0], t_end)
        if hi <= lo:
            continue
        if b[0] - a[0] > max_gap_s:
            return None
        area_mw_s += (_interp(a, b, lo) + _interp(a, b, hi)) / 2.0 * (hi - lo)
    return area_mw_s / 1000.0


def energy_from_counter_j(
    series: SeriesLike,
    t_start: float,
    t_end: float,
    wrap: float | None,
    unit_to_j: float,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
    edge_tol_s: float = DEFAULT_EDGE_TOL_S,
) -> float | None:
    """Joules in [t_start, t_end] from a cumulative energy counter (RAPL µJ: 1e-6, NVML mJ: 1e-3).

    Sums ``counter_delta`` over consecutive readings (one wraparound per step at ``wrap``). A step that
    straddles an edge contributes the share of its delta that falls inside the window (constant power
    within a step); such an edge step must be at most ``max_gap_s`` long. Steps wholly inside the window
    may be any length, since a counter keeps counting while readings are missing. When the readings do not
    reach an edge (by at most ``edge_tol_s``), the nearest step's mean power is extended to it. None if not
    covered, on fewer than 2 readings, or if the counter went backwards with no known wrap (a reset).
    """
    if not t_end > t_start:
        return None
    points = _clean(series)
    if len(points) < 2 or not _edges_ok(points, t_start, t_end, edge_tol_s):
        return None
    total = 0.0
    for a, b in pairwise(points):
        lo, hi = max(a[0], t_start), min(b[0], t_end)
        if hi <= lo:
            continue
        delta = counter_delta(a[1], b[1], wrap)
        if delta is None:
            return None
        step_s = b[0] - a[0]
        fraction = (hi - lo) / step_s
        if fraction < 1.0 and step_s > max_gap_s:
            return None
        total += delta * fraction
    pairs = list(pairwise(points))
    first_t, last_t = points[0][0], points[-1][0]
    if first_t > t_start:
        rate = _edge_rate(pairs, wrap, max_gap_s)
        if rate is None:
            return None
        total += rate * (min(first_t, t_end) - t_start)
    if last_t < t_end:
        rate = _edge_rate(reversed(pairs), wrap, max_gap_s)
        if rate is None:
            return None
        total += rate * (t_end - max(last_t, t_start))
    return total * unit_to_j


def _edge_rate(
    pairs: Iterable[tuple[tuple[float, float], tuple[float, float]]], wrap: float | None, max_gap_s: float
) -> float | None:
    """Counter units per second over the first step of positive length in ``pairs``; None if unusable."""
    for a, b in pairs:
        step_s = b[0] - a[0]
        if step_s <= 0:
            continue
        delta = counter_delta(a[1], b[1], wrap)
        if delta is None or step_s > max_gap_s:
            return None
        return delta / step_s
    return None


def mean_over(
    series: SeriesLike, t_start: float, t_end: float, max_gap_s: float = DEFAULT_MAX_GAP_S
) -> float | None:
    """Time-weighted mean over [t_start, t_end], trapezoid rule (linear between readings).

    Trapezoid rather than step so that mean power × duration equals ``energy_from_power_j``. Averages
    over the covered part only: steps longer than ``max_gap_s`` and the parts of the window beyond the
    first/last reading are left out rather than guessed. A window that falls between two close readings
    gets the interpolated mean. If no time is covered but readings lie in the window (one reading, or a
    zero-length window), their plain mean. None if nothing is known about the window.
    """
    if t_end < t_start:
        return None
    points = _clean(series)
    area = 0.0
    covered = 0.0
    for a, b in pairwise(points):
        lo, hi = max(a[0], t_start), min(b[0], t_end)
        if hi <= lo or b[0] - a[0] > max_gap_s:
            continue
        area += (_interp(a, b, lo) + _interp(a, b, hi)) / 2.0 * (hi - lo)
        covered += hi - lo
    if covered > 0:
        return area / covered
    inside = [v for t, v in points if t_start <= t <= t_end]
    return math.fsum(inside) / len(inside) if inside else None


def max_over(series: SeriesLike, t_start: float, t_end: float) -> float | None:
    """Largest reading taken in [t_start, t_end] (observed values only, never interpolated)."""
    inside = [v for t, v in _clean(series) if t_start <= t <= t_end]
    return max(inside) if inside else None


def min_over(series: SeriesLike, t_start: float, t_end: float) -> float | None:
    """Smallest reading taken in [t_start, t_end] (observed values only, never interpolated)."""
    inside = [v for t, v in _clean(series) if t_start <= t <= t_end]
    return min(inside) if inside else None


@dataclass(frozen=True)
class PhaseAggregate:
    """One row of ``phase_stat``: ``stat`` of ``metric`` over one phase of a run (value None: no data)."""

    phase: str
    kind: str | None
    rep: int | None
    metric: str
    stat: Stat
    value: float | None


def stats_for(role: MetricRole | None) -> tuple[Stat, ...]:
    """Statistics ``aggregate_phase`` computes for a metric of this role (empty: not aggregated, or no
    role); see AGGREGATE_STATS."""
    if role is None:
        return ()
    if role.role == "temperature" and not role.thermometer:
        # A fixed-value pseudo sensor (Tegra PMIC-Die at 100 C) would become every phase's hottest reading.
        return ()
    return AGGREGATE_STATS.get(role.role, ())


def aggregate_phase(
    samples: Mapping[str, SeriesLike],
    t_start: float,
    t_end: float,
    *,
    roles: Mapping[str, MetricRole],
    phase: str = "",
    kind: str | None = None,
    rep: int | None = None,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
) -> list[PhaseAggregate]:
    """Per-metric statistics over [t_start, t_end], ordered by metric then by the rule's stat order.

    ``roles``: metric -> what it is, as its collector declared it; a metric without a role is not
    aggregated. A metric with a rule but no data in the window still gets its rows, with value None, so a
    report can tell "not measured here" from "not a metric we aggregate".
    """
    rows: list[PhaseAggregate] = []
    for metric in sorted(samples):
        series = samples[metric]
        for stat in stats_for(roles.get(metric)):
            if stat == "max":
                value = max_over(series, t_start, t_end)
            elif stat == "min":
                value = min_over(series, t_start, t_end)
            else:
                value = mean_over(series, t_start, t_end, max_gap_s)
            rows.append(PhaseAggregate(phase, kind, rep, metric, stat, value))
    return rows


def energy_per_token(energy_j: float | None, n_tokens: int | None) -> float | None:
    """J/token; None when either is unknown or there were no tokens. A negative net energy stays negative."""
    if energy_j is None or n_tokens is None or n_tokens <= 0:
        return None
    return energy_j / n_tokens


def net_energy_j(
    gross_j: float | None, idle_power_mw: float | None, duration_s: float | None
) -> float | None:
    """Energy above the idle baseline: ``gross − idle·duration``; None if any input is None.

    Not clamped at 0: a negative value means the idle baseline was measured higher than the phase drew
    (noise, a fan or a background task during the idle window). Clamping would hide that and bias the mean
    of repetitions upward; the report can flag it instead.
    """
    if gross_j is None or idle_power_mw is None or duration_s is None:
        return None
    return gross_j - idle_power_mw / 1000.0 * duration_s


def slope_per_s(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of value against time (units per second); None for < 2 distinct times."""
    n = len(points)
    if n < 2:
        return None
    mean_t = math.fsum(t for t, _ in points) / n
    mean_v = math.fsum(v for _, v in points) / n
    # Centred sums avoid the cancellation of the textbook formula at monotonic-clock magnitudes (~1e5 s).
    sxx = math.fsum((t - mean_t) ** 2 for t, _ in points)
    if sxx <= 0:
        return None
    sxy = math.fsum((t - mean_t) * (v - mean_v) for t, v in points)
    return sxy / sxx


CooldownReason = Literal["below_limit", "stopped_falling", "max_wait", "no_sensor", "delay", "disabled"]


@dataclass(frozen=True)
class CooldownResult:
    start_temp_c: float | None
    end_temp_c: float | None
    waited_s: float
    reason: CooldownReason


def _read(read_temp: Callable[[], float | None]) -> float | None:
    value = read_temp()
    return value if value is not None and math.isfinite(value) else None


def wait_for_cooldown(
    read_temp: Callable[[], float | None],
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    below_c: float | None,
    max_wait_s: float,
    slope_c_per_min: float,
    window_s: float,
    delay_s: float = 0.0,
    poll_s: float = 1.0,
) -> CooldownResult:
    """Wait until the hottest sensor is below ``below_c``, has stopped falling, or ``max_wait_s`` passed.

    - ``below_c`` None: a fixed ``delay_s`` sleep ("delay"), or nothing at all ("disabled").
    - No temperature at the start: sleep ``delay_s`` (the fallback when there is no sensor) and return
      "no_sensor"; with a sensor, ``delay_s`` is not added to the wait.
    - Otherwise poll every ``poll_s``: "below_limit" as soon as a reading is under ``below_c``;
      "stopped_falling" once at least ``window_s`` has been observed and the least-squares slope of the
      readings of the last ``window_s`` is no steeper than −``slope_c_per_min``/60 °C/s (a board that
      settles above the limit, e.g. in a warm room, would otherwise always wait ``max_wait_s``);
      "max_wait" when ``max_wait_s`` has elapsed. A reading that fails mid-wait is skipped.

    Temperatures are read even in "delay"/"disabled" mode so the run can record what it started at.
    """
    if poll_s <= 0 or window_s <= 0:
        raise ValueError(f"poll_s and window_s must be > 0, got poll_s={poll_s}, window_s={window_s}")
    t0 = clock()
    start = _read(read_temp)
    if below_c is None:
        if delay_s > 0:
            sleep(delay_s)
            return CooldownResult(start, _read(read_temp), clock() - t0, "delay")
        return CooldownResult(start, start, 0.0, "disabled")
    if start is None:
        if delay_s > 0:
            sleep(delay_s)
        return CooldownResult(None, None, clock() - t0, "no_sensor")
    if start < below_c:
        return CooldownResult(start, start, clock() - t0, "below_limit")

    return _poll_until_settled(
        read_temp,
        clock,
        sleep,
        t0=t0,
        start=start,
        below_c=below_c,
        max_wait_s=max_wait_s,
        slope_c_per_min=slope_c_per_min,
        window_s=window_s,
        poll_s=poll_s,
    )


def _poll_until_settled(
    read_temp: Callable[[], float | None],
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    *,
    t0: float,
    start: float,
    below_c: float,
    max_wait_s: float,
    slope_c_per_min: float,
    window_s: float,
    poll_s: float,
) -> CooldownResult:
    """The polling part of ``wait_for_cooldown``: from a first reading ``start`` at or above ``below_c``."""
    threshold_c_per_s = -slope_c_per_min / 60.0
    readings: list[tuple[float, float]] = [(0.0, start)]
    last = start
    # Fake and real clocks both accumulate rounding over many polls; without a tolerance a window of
    # exactly window_s would be judged one poll late.
    eps = 1e-9 * max(1.0, window_s)
    while True:
        elapsed = clock() - t0
        if elapsed >= max_wait_s - eps:
            return CooldownResult(start, last, elapsed, "max_wait")
        sleep(min(poll_s, max_wait_s - elapsed))
        now = clock() - t0
        temp = _read(read_temp)
        if temp is None:
            continue
        last = temp
        readings.append((now, temp))
        if temp < below_c:
            return CooldownResult(start, temp, now, "below_limit")
        if now - readings[0][0] >= window_s - eps:
            recent = [p for p in readings if p[0] >= now - window_s - eps]
            slope = slope_per_s(recent)
            if slope is not None and slope >= threshold_c_per_s:
                return CooldownResult(start, temp, now, "stopped_falling")
