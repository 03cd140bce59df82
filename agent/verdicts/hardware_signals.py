"""The hardware's own throttle signals, for the throttle verdict: flag words decoded by their source, throttle
counters that rose, and the measured clock against the kernel's requested one.

Pure: plain series of ``(t, value)`` readings and the metrics' roles in, texts and figures out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from edgeprof.collectors import MetricRole, counter_delta
from edgeprof.collectors.flags import DecodedFlag, decoder_named
from edgeprof.stats import median
from edgeprof.telemetry import SeriesLike
from edgeprof.verdicts.series import per_time_max, points, within

# A kernel-requested clock within 2 % of the measured one is the same clock: a Pi's firmware measures a
# clock at its requested value a fraction of a percent off (1500.3 for 1500 MHz), and its smallest DVFS
# step is 100 MHz (7 % of 1500). Beyond it the report says the requested figure is not what ran.
REQUESTED_SAME_FRACTION = 0.02


def measured_clocks(clocks: Mapping[str, MetricRole], domain: str) -> list[str]:
    """The clocks of ``domain`` the hardware measured running (a Pi's firmware): where there are any, they
    are the domain's clock, and the kernel's requested figures (cpufreq) are not what ran."""
    return [m for m, r in clocks.items() if r.domain == domain and r.measured]



def requested_not_ran(
    series: Mapping[str, SeriesLike], roles: Mapping[str, MetricRole], t0: float, t1: float
) -> list[str]:
    """One note per kernel-requested clock whose figure under load differs from the measured clock of its
    domain (a Pi's cpufreq reading 1200 MHz while the firmware ran the ARM at 657 MHz)."""
    clocks = {m: r for m in sorted(series) if (r := roles.get(m)) is not None and r.role == "clock"}
    notes = []
    for domain in ("cpu", "gpu"):
        measured = measured_clocks(clocks, domain)
        if not measured:
            continue
        ran = median([v for _, v in within(per_time_max(series[m] for m in measured), t0, t1)])
        for metric, role in clocks.items():
            if role.domain != domain or role.measured:
                continue
            asked = median([v for _, v in within(series[metric], t0, t1)])
            if ran is None or asked is None or abs(asked - ran) <= REQUESTED_SAME_FRACTION * ran:
                continue
            notes.append(
                f"{metric} read {asked:g} MHz under load (median) but {', '.join(measured)} measured "
                f"{ran:g} MHz: the kernel's requested clock is not what ran; "
                f"{', '.join(measured)} is the clock"
            )
    return notes


def flags_in_window(readings: SeriesLike, role: MetricRole, t0: float, t1: float) -> list[DecodedFlag] | None:
    """The bits of a flag word set during [t0, t1], decoded by its source's decoder (None: no decoder for
    it). A "now" bit counts when any reading in the window has it; a sticky "since boot" bit only when it
    appears in the window (set before the run, it says nothing about this run)."""
    decoder = decoder_named(role.flags)
    if decoder is None:
        return None
    every = points(readings)
    inside = [int(v) for _t, v in within(readings, t0, t1)]
    before = [int(v) for t, v in every if t < t0]
    base = before[-1] if before else (inside[0] if inside else 0)
    seen = 0
    for word in inside:
        seen |= word
    new_sticky = seen & decoder.sticky_mask & ~base
    return decoder.decode((seen & ~decoder.sticky_mask) | new_sticky)


def _flag_word(
    readings: SeriesLike, metric: str, role: MetricRole, gpu_in_use: bool, t0: float, t1: float
) -> tuple[str | None, dict[str, Any]]:
    """(flag text or None, detail) of a throttle-flag word over the load window."""
    decoded = flags_in_window(readings, role, t0, t1)
    if decoded is None:
        return None, {"ignored": f"no decoder for flags of {role.flags!r}"}
    throttling = [d for d in decoded if d.throttles]
    causes = sorted({d.cause for d in throttling if d.cause is not None})
    entry: dict[str, Any] = {
        "source": role.flags or "nvml",
        "reasons_seen": [d.name for d in decoded],
        "throttle_reasons": [d.name for d in throttling],
        "causes": causes,
        "under_voltage": any(d.cause == "under-voltage" for d in decoded),
    }
    if throttling and role.discrete and not gpu_in_use:
        entry["ignored"] = "the run did not offload to the GPU (ngl=0)"
        return None, entry
    if not throttling:
        return None, entry
    names = ", ".join(d.name for d in throttling)
    return f"{metric}: {names} during load (cause: {' / '.join(causes) or 'unknown'})", entry


def _counter_rise(
    series: SeriesLike, metric: str, t0: float, t1: float
) -> tuple[str | None, dict[str, Any] | None]:
    """(flag text or None, detail or None) of a throttle-event counter over the load window."""
    readings = points(series)
    if len(readings) < 2:
        return None, None
    base = next((p for p in reversed(readings) if p[0] <= t0), readings[0])
    end = next((p for p in readings if p[0] >= t1), readings[-1])
    if end[0] <= base[0]:
        return None, None
    delta = counter_delta(base[1], end[1], None)
    flag = f"{metric}: +{delta:g} throttle events during load" if delta is not None and delta > 0 else None
    return flag, {"delta": delta, "from": base[1], "to": end[1]}


def hardware_flags(
    series: Mapping[str, SeriesLike], roles: Mapping[str, MetricRole], gpu_in_use: bool, t0: float, t1: float
) -> tuple[list[str], dict[str, Any]]:
    """(flag texts, per-metric detail) of every flag word and throttle counter over the load window."""
    flags: list[str] = []
    detail: dict[str, Any] = {}
    for metric in sorted(series):
        role = roles.get(metric)
        kind = role.role if role is not None else None
        if kind == "throttle_flags" and role is not None:
            flag, detail[metric] = _flag_word(series[metric], metric, role, gpu_in_use, t0, t1)
        elif kind == "throttle_counter":
            flag, entry = _counter_rise(series[metric], metric, t0, t1)
            if entry is not None:
                detail[metric] = entry
        else:
            continue
        if flag is not None:
            flags.append(flag)
    return flags, detail
