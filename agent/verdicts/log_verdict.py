"""The verdict on a log a user already has (tegrastats, jtop's CSV, nvidia-smi's CSV): per session, did the
board throttle, when, which clock, by how much, and at what temperature?

A log is not a run: nothing says when the model worked, so "under load" is read from the log itself (a
clock counts where its own utilisation is at least ``LOAD_UTIL_PCT``). Everything else is the judgement the
live verdicts use, not a copy of it: the evidence rule (``edgeprof.collectors.evidence``: thermometers,
excluded zones, observable clocks), the throttle verdict's zone figures and clock-drop fraction, the soak's
heating threshold and its thermal steady state, and the NVML clock-event reasons that mean heat or power.

Verdicts: ``throttled`` (a hardware reason, or a loaded clock below the drop fraction of its highest so far
while the board had heated), ``capped`` (loaded clocks held flat: a power mode, ``jetson_clocks`` or a
limit, not heat), ``not_steady`` (still heating at the end), ``not_throttled`` (clocks held, temperature
steady), ``inconclusive`` (too short, or nothing that could show it). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from typing import Any

from edgeprof.collectors import MetricRole, decode_clock_event_reasons
from edgeprof.collectors.evidence import Evidence, judge_evidence
from edgeprof.stats import median
from edgeprof.telemetry import slope_per_s
from edgeprof.verdicts.result import rounded
from edgeprof.verdicts.series import Point, per_time_max, points, thirds
from edgeprof.verdicts.soak import SoakThresholds, thermal_state
from edgeprof.verdicts.soak_telemetry import Readings
from edgeprof.verdicts.throttle import NVML_THROTTLE_REASONS, ThrottleThresholds, zone_figures

# The version of this judgement, stored with every log verdict it made (agent/verdicts/log_store.py): a stored
# verdict of another version is judged again on its next read. Bump it with every change to this module that
# can change a verdict, its reason or its figures.
RULE_VERSION = 1

# A gap of more than 5 intervals between two lines splits the log into sessions: tegrastats and the
# samplers write every interval; a restart of the logger a few seconds late is one session, a board
# switched off overnight is two.
GAP_INTERVALS = 5.0
# A clock is "under load" where its own utilisation is at least 90 %: a governor under full load runs at
# the highest clock it is allowed, so a lower clock there is a limit, while at partial load DVFS moves the
# clock with the load alone.
LOAD_UTIL_PCT = 90.0
# Loaded clocks within 2 % of their highest are "flat" (held at a limit): the 0.08 % jitter of a pinned
# Orin CPU clock is flat, one OPP step (5-15 %) is not.
FLAT_FRACTION = 0.02
# Fewer lines than this in a session say nothing of a trend (the soak's ``min_span_readings``).
MIN_SESSION_LINES = SoakThresholds.min_span_readings


@dataclass(frozen=True)
class LogInputs:
    """A log as plain data. ``series``: metric -> ``(t, value)`` with ``t`` in seconds from the first line
    (or the line index x the spacing without timestamps); ``roles``: as the source's collector declares
    them; ``spacing_s``: the interval between lines, measured or assumed (``spacing_assumed``);
    ``wall_t0``: the epoch of t = 0 where the log has timestamps; ``power_budget_mw``: the board's where
    known."""

    series: Mapping[str, Sequence[tuple[float, float | None]]]
    roles: Mapping[str, MetricRole]
    spacing_s: float = 1.0
    spacing_assumed: bool = False
    wall_t0: float | None = None
    power_budget_mw: float | None = None
    trip_points: Mapping[str, Sequence[tuple[str, float]]] = field(default_factory=dict)


def line_times(series: Mapping[str, Sequence[tuple[float, float | None]]]) -> list[float]:
    """Every time at which any metric was read, in order: one per line of the log."""
    return sorted({t for s in series.values() for t, _ in s})


def measured_spacing_s(times: Sequence[float]) -> float | None:
    """The median step between consecutive lines; None under 2 lines."""
    steps = [b - a for a, b in pairwise(times) if b > a]
    return median(steps)


def split_sessions(times: Sequence[float], spacing_s: float) -> list[tuple[float, float, int]]:
    """(start, end, lines) of each session: a gap of more than ``GAP_INTERVALS`` spacings splits them."""
    out: list[tuple[float, float, int]] = []
    if not times:
        return out
    start, count = times[0], 1
    for before, after in pairwise(times):
        if after - before > GAP_INTERVALS * spacing_s:
            out.append((start, before, count))
            start, count = after, 0
        count += 1
    out.append((start, times[-1], count))
    return out


# -- clocks ------------------------------------------------------------------------------------------------
def _domain_of(role: MetricRole) -> str | None:
    if role.role != "clock" or not role.observable:
        return None
    if role.domain in ("cpu", "gpu"):
        return role.domain
    return "emc" if role.component == "dram" else None


def _util_metric(clock: str) -> str:
    """``cpu3.freq_mhz`` -> ``cpu3.util_pct``; ``gpu0.sm_clock_mhz`` -> ``gpu0.util_pct``."""
    return clock.partition(".")[0] + ".util_pct"


def _loaded(series: Mapping[str, list[Point]], metrics: Sequence[str]) -> list[Point]:
    """A domain's clock at each line where one of its clocks ran at ``LOAD_UTIL_PCT`` or more (the
    highest such clock of the line)."""
    by_t: dict[float, float] = {}
    for metric in metrics:
        util = dict(series.get(_util_metric(metric), []))
        for t, v in series[metric]:
            if util.get(t, -1.0) >= LOAD_UTIL_PCT:
                by_t[t] = max(by_t.get(t, v), v)
    return sorted(by_t.items())


def _limit_of(
    series: Mapping[str, list[Point]], roles: Mapping[str, MetricRole], domain: str
) -> float | None:
    """The hardware maximum of a domain's clock where the log states it (nvidia-smi's clocks.max.sm)."""
    values = [
        v
        for m, r in roles.items()
        if r.role == "clock_limit" and r.domain == domain
        for _, v in series.get(m, [])
    ]
    return max(values) if values else None


def _drop(loaded: list[Point], hottest: Readings, heated_from_c: float | None) -> dict[str, Any] | None:
    """The first loaded reading below the drop fraction of the highest before it, while the board had
    heated by the soak's threshold: when, from, to (the median after it), by how much, how hot."""
    fraction = ThrottleThresholds.clock_drop_fraction
    ref = float("-inf")
    for i, (t, v) in enumerate(loaded):
        temps = hottest.values(t, t) if hottest.pts else []
        hot = (
            heated_from_c is not None and temps and temps[0] - heated_from_c >= SoakThresholds.heating_rise_c
        )
        if ref > 0 and v < fraction * ref and hot:
            after = median([w for _, w in loaded[i:]]) or v
            return {
                "t_s": t,
                "from_mhz": rounded(ref, 1),
                "to_mhz": rounded(after, 1),
                "depth_pct": rounded(100.0 * (1.0 - after / ref), 1),
                "temp_c": rounded(temps[0], 2),
            }
        ref = max(ref, v)
    return None


# "While hot": the readings taken while the hottest thermometer was within 2 °C of its session maximum (the
# soak's heating threshold, read the other way: as near the peak as the board was above its start).
HOT_BAND_C = SoakThresholds.heating_rise_c


def _while_hot(series: Mapping[str, list[Point]], metrics: list[str], hottest: Readings) -> float | None:
    """The median of a domain's clock (its highest core per line) while the board was at its hottest."""
    if not hottest.pts:
        return None
    peak = max(v for _, v in hottest.pts)
    hot_t = {t for t, v in hottest.pts if v >= peak - HOT_BAND_C}
    per_line: dict[float, float] = {}
    for metric in metrics:
        for t, v in series[metric]:
            if t in hot_t:
                per_line[t] = max(per_line.get(t, v), v)
    return median(list(per_line.values()))


def _domain(
    metrics: list[str],
    series: Mapping[str, list[Point]],
    limit: float | None,
    hottest: Readings,
    start_c: float | None,
) -> dict[str, Any]:
    """One clock domain of a session: the highest seen, where it stood while hot, whether it was capped
    (held flat under load below its maximum, or at a limit the log cannot name) or dropped."""
    seen = [v for m in metrics for _, v in series[m]]
    loaded = _loaded(series, metrics)
    entry: dict[str, Any] = {
        "metrics": metrics,
        "max_mhz": rounded(max(seen), 1),
        "while_hot_mhz": rounded(_while_hot(series, metrics, hottest), 1),
        "loaded_readings": len(loaded),
    }
    if limit is not None:
        entry["limit_mhz"] = rounded(limit, 1)
    if len(loaded) < MIN_SESSION_LINES:
        # never fully loaded: a clock that stayed within the drop fraction of its highest still held
        low = min(seen) >= ThrottleThresholds.clock_drop_fraction * max(seen)
        entry.update(
            {"held_mhz": None, "capped": False, "status": "held_light_load" if low else "not_loaded"}
        )
        return entry
    values = [v for _, v in loaded]
    entry["held_mhz"] = rounded(median(thirds(values)[1]), 1)  # the throttle verdict's "observed"
    drop = _drop(loaded, hottest, start_c)
    if drop is not None:
        entry.update({"capped": False, "status": "dropped", "drop": drop})
        return entry
    flat = max(values) - min(values) <= FLAT_FRACTION * max(values)
    below_limit = limit is not None and max(values) < (1.0 - FLAT_FRACTION) * limit
    capped = flat and (limit is None or below_limit)
    entry.update({"capped": capped, "status": "capped" if capped else "held"})
    return entry


def _clocks(
    series: Mapping[str, list[Point]],
    roles: Mapping[str, MetricRole],
    hottest: Readings,
    start_c: float | None,
) -> dict[str, dict[str, Any]]:
    domains: dict[str, list[str]] = {}
    for metric in sorted(series):
        role = roles.get(metric)
        name = _domain_of(role) if role is not None else None
        if name is not None and series[metric]:
            domains.setdefault(name, []).append(metric)
    return {
        name: _domain(ms, series, _limit_of(series, roles, name), hottest, start_c)
        for name, ms in sorted(domains.items())
    }


def _flags(series: Mapping[str, list[Point]], roles: Mapping[str, MetricRole]) -> tuple[float, str] | None:
    """(time, reasons) of the first line whose clock-event reasons say heat or power."""
    first: tuple[float, str] | None = None
    for metric, readings in series.items():
        role = roles.get(metric)
        if role is None or role.role != "throttle_flags":
            continue
        for t, v in readings:
            hits = [n for n in decode_clock_event_reasons(int(v)) if n in NVML_THROTTLE_REASONS]
            if hits and (first is None or t < first[0]):
                first = (t, ", ".join(hits))
                break
    return first


# Steady state is judged at most every 10 s of the log (the soak judges it at its 10-s window ends): a
# day-long log at 1 s would otherwise fit 86 400 slopes.
STEADY_EVERY_S = 10.0


def judged_ends(times: Sequence[float]) -> list[float]:
    """The times at which the steady-state slope is judged: one per ``STEADY_EVERY_S``, and the last."""
    out: list[float] = []
    for t in times:
        if not out or t - out[-1] >= STEADY_EVERY_S:
            out.append(t)
    if times and out[-1] != times[-1]:
        out.append(times[-1])
    return out


# -- one session ---------------------------------------------------------------------------------------------
def _when(inputs: LogInputs, t: float) -> str:
    """A time of the log as the user reads it: the wall clock where it has timestamps, else seconds."""
    if inputs.wall_t0 is None:
        return f"{t:.0f} s" + (" (spacing assumed)" if inputs.spacing_assumed else "")
    # local time, as the importer read the log's own timestamps: the text the log itself shows
    return datetime.fromtimestamp(inputs.wall_t0 + t).strftime("%Y-%m-%d %H:%M:%S")


def _power(series: Mapping[str, list[Point]], roles: Mapping[str, MetricRole], budget: float | None) -> Any:
    power = {m: r for m in sorted(series) if (r := roles.get(m)) is not None and r.role == "power"}
    # the board's input rail; without one (an nvidia-smi log) the device's own draw
    board = [m for m, r in power.items() if r.whole_board]
    board = board or [m for m, r in power.items() if r.scope == "device"]
    values = [v for m in board[:1] for _, v in series[m]]
    if not values:
        return None
    peak = max(values)
    out = {"metric": board[0], "mean_mw": rounded(sum(values) / len(values), 1), "max_mw": rounded(peak, 1)}
    out["budget_mw"] = budget
    out["max_of_budget_pct"] = rounded(100.0 * peak / budget, 1) if budget else None
    return out


def _trip_zone(thermometers: Sequence[str], roles: Mapping[str, MetricRole]) -> str | None:
    """Which zone the board's throttle trips on, where that is known: Tj on Orin, the CPU/GPU zones on
    older Jetsons (their trip points sit on those zones)."""
    if "temp.tj_c" in thermometers:
        return "temp.tj_c"
    parts = [m for m in thermometers if roles[m].component in ("cpu", "gpu")]
    return ", ".join(parts) or None


def _zones(
    thermo: Mapping[str, list[Point]], trips: Mapping[str, Sequence[tuple[str, float]]]
) -> dict[str, Any]:
    th = ThrottleThresholds()
    out = {}
    for metric, readings in thermo.items():
        fig = zone_figures(readings, trips.get(metric, ()), th)
        out[metric] = {
            "start_c": fig["start_c"],
            "max_c": fig["max_c"],
            "end_c": rounded(readings[-1][1], 2),
            "slope_c_per_min": fig["slope_c_per_min"],
        } | ({"trip": fig["trip"]} if "trip" in fig else {})
    return out


def _gpu_clock_note(
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


def _decide(
    s: dict[str, Any], found: Evidence, flags: tuple[float, str] | None, inputs: LogInputs
) -> tuple[str, str]:
    clocks, thermal = s["clocks"], s["thermal"]
    if s["lines"] < MIN_SESSION_LINES:
        return "inconclusive", f"too short: {s['lines']} line(s); need {MIN_SESSION_LINES} for a trend"
    dropped = sorted(
        (d["drop"]["t_s"], name, d["drop"]) for name, d in clocks.items() if d["status"] == "dropped"
    )
    drop_text = ""
    if dropped:
        t, name, d = dropped[0]
        drop_text = (
            f"{name} clock {d['from_mhz']:g} -> {d['to_mhz']:g} MHz (-{d['depth_pct']:g} %) "
            f"at {_when(inputs, t)}, hottest {d['temp_c']:g} °C"
        )
    if flags is not None:
        said = f"the log's clock-event reasons say {flags[1]} from {_when(inputs, flags[0])}"
        return "throttled", said + (f"; {drop_text}" if drop_text else "")
    if dropped:
        return "throttled", drop_text
    missing = found.missing()
    if missing is not None:
        return "inconclusive", missing.replace("on this machine", "in this log")
    heating = (
        f"; still {thermal['end_slope_c_per_min']:+.1f} °C/min at the end"
        if thermal.get("measured")
        and thermal.get("steady_state_s") is None
        and thermal.get("end_slope_c_per_min")
        else ""
    )
    capped = [f"{n} flat at {d['held_mhz']:g} MHz" for n, d in clocks.items() if d["status"] == "capped"]
    if capped:
        return "capped", (
            f"clocks held under load ({', '.join(capped)}): a power mode, jetson_clocks or a limit, "
            f"not heat{heating}"
        )
    judged = [n for n, d in clocks.items() if n in ("cpu", "gpu") and d["status"] != "not_loaded"]
    if not judged and not s["reasons_logged"]:
        return "inconclusive", (
            "no CPU or GPU clock in this log that could show a throttle"
            + (f" ({', '.join(found.unobservable_clocks)} never moved)" if found.unobservable_clocks else "")
        )
    if not thermal.get("measured"):
        return "inconclusive", "no thermometer in this log: whether the temperature settled cannot be shown"
    if thermal["steady_state_s"] is None:
        slope = thermal.get("end_slope_c_per_min")
        return "not_steady", "run longer" + (f"; {slope:+.1f} °C/min at the end" if slope is not None else "")
    return "not_throttled", (
        f"clocks held; temperature steady at {thermal['steady_temp_c']:.1f} °C after "
        f"{thermal['steady_state_s']:.0f} s"
    )


def judge_session(inputs: LogInputs, index: int, t0: float, t1: float, lines: int) -> dict[str, Any]:
    """One session of a log, judged: its figures, evidence and verdict (see the module docstring)."""
    series = {m: [p for p in points(s) if t0 <= p[0] <= t1] for m, s in inputs.series.items()}
    series = {m: s for m, s in series.items() if s}
    # a clock flat below the maximum the log itself states (nvidia-smi's clocks.max.sm) is a real clock
    limits = {d: v for d in ("cpu", "gpu") if (v := _limit_of(series, inputs.roles, d)) is not None}
    found = judge_evidence(series, inputs.roles, limits)
    roles = found.apply(inputs.roles)
    thermo = {m: series[m] for m in found.thermometers if m in series}
    hottest = Readings(per_time_max(thermo.values()))
    zones = _zones(thermo, inputs.trip_points)
    hottest_zone = max(zones, key=lambda m: zones[m]["max_c"]) if zones else None
    start_c = hottest.pts[0][1] if hottest.pts else None
    thermal: dict[str, Any] = (
        thermal_state(hottest, t0, t1, judged_ends(hottest.ts), SoakThresholds())
        if hottest.pts
        else {"measured": False}
    )
    slope = slope_per_s(hottest.pts) if len(hottest.pts) >= 2 else None
    clocks = _clocks(series, roles, hottest, start_c)
    session: dict[str, Any] = {
        "session": index,
        "start": _when(inputs, t0),
        "end": _when(inputs, t1),
        "lines": lines,
        "duration_s": rounded(t1 - t0, 1),
        "hottest_zone": hottest_zone,
        "hottest_max_c": zones[hottest_zone]["max_c"] if hottest_zone else None,
        "excluded_zones": dict(found.excluded_zones),
        "trip_zone": _trip_zone(list(thermo), roles),
        "thermometers": zones,
        "heating_c_per_min": rounded(slope * 60.0 if slope is not None else None),
        "steady_state_s": rounded(thermal.get("steady_state_s"), 1),
        "steady_temp_c": rounded(thermal.get("steady_temp_c"), 2),
        "end_slope_c_per_min": rounded(thermal.get("end_slope_c_per_min")),
        "clocks": clocks,
        "clocks_not_observable": dict(found.unobservable_clocks),
        "power": _power(series, roles, inputs.power_budget_mw),
        "notes": [n for n in (_gpu_clock_note(series, roles, clocks),) if n],
        "thermal": thermal,
    }
    # the driver's own clock-event reasons, logged and never naming heat or power, are evidence too
    session["reasons_logged"] = any(r.role == "throttle_flags" for m in series if (r := roles.get(m)))
    session["verdict"], session["reason"] = _decide(session, found, _flags(series, roles), inputs)
    del session["thermal"]
    return session


def judge_log(inputs: LogInputs) -> dict[str, Any]:
    """Every session of a log, judged; with the spacing used and whether it was assumed."""
    times = line_times(inputs.series)
    sessions = split_sessions(times, inputs.spacing_s)
    return {
        "spacing_s": inputs.spacing_s,
        "spacing_assumed": inputs.spacing_assumed,
        "lines": len(times),
        "sessions": [judge_session(inputs, i + 1, *s) for i, s in enumerate(sessions)],
    }
