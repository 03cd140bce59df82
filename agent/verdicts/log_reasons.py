"""The log verdict's words (``edgeprof.verdicts.log_verdict``): times as the log shows them, a clock's drop,
what held, the margin to a trip, what is missing and the plateau. Pure text from the judged figures."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from edgeprof.collectors import MetricRole
from edgeprof.verdicts.series import Point
from edgeprof.verdicts.soak import SoakThresholds
from edgeprof.verdicts.soak_telemetry import Readings

# "While hot": the readings taken while the hottest thermometer was within 2 °C of its session maximum (the
# soak's heating threshold, read the other way: as near the peak as the board was above its start).
HOT_BAND_C = SoakThresholds.heating_rise_c


def when(wall_t0: float | None, spacing_assumed: bool, t: float) -> str:
    """A time of the log as the user reads it: the wall clock where it has timestamps, else seconds."""
    if wall_t0 is None:
        return f"{t:.0f} s" + (" (spacing assumed)" if spacing_assumed else "")
    # local time, as the importer read the log's own timestamps: the text the log itself shows
    return datetime.fromtimestamp(wall_t0 + t).strftime("%Y-%m-%d %H:%M:%S")


def at(wall_t0: float | None, spacing_assumed: bool, t: float) -> str:
    """A time of the log for a reason: the wall clock and, where there is one, the seconds into the log."""
    return when(wall_t0, spacing_assumed, t) + (f" (+{t:.0f} s)" if wall_t0 is not None else "")


def phase_at(phases: Sequence[tuple[str, float, float]], t: float) -> str:
    names = [name for name, a, b in phases if a <= t <= b]
    return f" (during {names[0]})" if names else ""


def missing_clock_note(
    series: Mapping[str, list[Point]], roles: Mapping[str, MetricRole], clocks: Any
) -> str | None:
    """Where the GPU worked but its clock cannot show a throttle, say so (JetPack 5/6 on Orin Nano prints
    no GPU clock; a GPU pinned by jetson_clocks reads one value)."""
    gpu_busy = any(
        (r := roles.get(m)) is not None and r.role == "utilization" and r.component == "gpu" for m in series
    )
    if not gpu_busy or "gpu" in clocks:
        return None
    flat = [m for m in series if (r := roles.get(m)) is not None and r.role == "clock" and r.domain == "gpu"]
    if flat:
        return (
            f"the GPU clock ({', '.join(flat)}) never moved in this log: not observable, a GPU throttle "
            "cannot be seen"
        )
    return "the GPU clock is not in this log: GPU clock throttling cannot be seen in it"


def plateau_c(hottest: Readings) -> tuple[float, float] | None:
    """The band the hottest thermometer settled in: the readings within ``HOT_BAND_C`` of its maximum,
    from their nearest-rank 10th percentile to the maximum (one stray low reading does not widen it)."""
    if not hottest.pts:
        return None
    peak = max(v for _, v in hottest.pts)
    band = sorted(v for _, v in hottest.pts if v >= peak - HOT_BAND_C)
    return band[math.ceil(0.1 * len(band)) - 1], peak


def drop_text(name: str, clock: dict[str, Any], at_text: str) -> str:
    """The drop of one clock domain in words (``at_text``: when and in which phase), with the requested
    clock it fell from where there is one."""
    drop = clock["drop"]
    label = f"{name} clock"
    asked = clock.get("requested")
    if asked:
        label += f" ({', '.join(clock['metrics'])}, measured)"
    text = (
        f"{label} {drop['from_mhz']:g} -> {drop['lowest_mhz']:g} MHz from {at_text}"
        f" (median {drop['to_mhz']:g} MHz after, -{drop['depth_pct']:g} % "
        f"on average), at {drop['temp_c']:g} °C"
    )
    if asked:
        read = f"{asked['min_mhz']:g}" if asked["min_mhz"] == asked["max_mhz"] else (
            f"{asked['min_mhz']:g}–{asked['max_mhz']:g}"
        )
        text += (
            f"; {', '.join(asked['metrics'])} read {read} MHz meanwhile: what the kernel asked for, "
            "not the clock that ran"
        )
    return text


def held_text(clocks: Mapping[str, Any]) -> str:
    held = [n for n, d in clocks.items() if d["status"] == "held" and d["held_mhz"]]
    return ", ".join(f"{n} held at {clocks[n]['held_mhz']:g} MHz" for n in held)


def margin_text(s: Mapping[str, Any]) -> str:
    zone = s["thermometers"].get(s["hottest_zone"] or "", {})
    trip = zone.get("trip")
    if not trip:
        return f"hottest {s['hottest_max_c']:g} °C (no trip point in the log or known for the board)"
    return (
        f"hottest {s['hottest_max_c']:g} °C, {trip['c'] - s['hottest_max_c']:.1f} °C under its "
        f"{trip['type']} trip at {trip['c']:g} °C ({trip.get('source', 'the log')})"
    )


def no_clock_text(unobservable_domains: Mapping[str, str], plateau: tuple[float, float] | None) -> str:
    text = "no CPU or GPU clock in this log that could show a throttle"
    if unobservable_domains:
        text += " (" + "; ".join(unobservable_domains.values()) + ")"
    if plateau is not None:
        low, high = plateau
        text += f"; the temperature plateaued at {low:g}–{high:g} °C"
    return text
