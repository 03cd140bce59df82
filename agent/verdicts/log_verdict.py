"""The verdict on a log a user already has (tegrastats, jtop's CSV, nvidia-smi's CSV, an sbc-bench result, a
CSV through a column map, stressberry's file): per session, did the board throttle, when, which clock, by
how much, and at what temperature? ``judge_log`` is the one entry point, for an import and ``analyse`` alike.

A log is not a run: nothing says when the model worked, so "under load" is read from the log itself (a
clock counts where its own utilisation, else its domain's, is at least ``LOAD_UTIL_PCT``; a log with no load
at all counts its lines at the board's hottest). Everything else is the judgement the live verdicts use, not
a copy of it: the evidence rule (``edgeprof.collectors.evidence``: thermometers, excluded zones, observable
clocks, a measured clock observed however flat), the throttle verdict's zone figures, trip margins and
clock-drop fraction, the soak's heating threshold and its thermal steady state, and each flag word decoded
by its source (``edgeprof.collectors.flags``).

Verdicts: ``throttled`` (a flag that held the clock down, or a loaded clock below the drop fraction of its
highest so far, or of the clock the kernel asked for, while the board had heated), ``capped`` (loaded
clocks held flat below the maximum the log states: a power mode or a limit, not heat), ``not_steady``
(still heating at the end, even with a clock missing), ``not_throttled`` (clocks held, temperature steady,
with the margin to the trip where known), ``inconclusive`` (too short, or nothing that could show it: what
is missing is named, and the plateau the temperature reached). A flat clock with no stated maximum *held*.
Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from edgeprof.collectors import MetricRole
from edgeprof.collectors.evidence import Evidence, judge_evidence
from edgeprof.collectors.flags import decoder_for, news
from edgeprof.stats import median
from edgeprof.telemetry import slope_per_s
from edgeprof.verdicts.log_reasons import (
    HOT_BAND_C,
    at,
    drop_text,
    held_text,
    margin_text,
    missing_clock_note,
    no_clock_text,
    phase_at,
    plateau_c,
    when,
)
from edgeprof.verdicts.result import rounded
from edgeprof.verdicts.series import Point, per_time_max, points, thirds
from edgeprof.verdicts.soak import SoakThresholds, thermal_state
from edgeprof.verdicts.soak_telemetry import Readings
from edgeprof.verdicts.throttle import ThrottleThresholds, zone_figures

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
    # where the trip points came from ("the log", "sysfs", a per-board table and its source)
    trip_source: str | None = None
    # named spans of the log (sbc-bench's tests): (name, start, end) in the log's seconds
    phases: Sequence[tuple[str, float, float]] = ()


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


def util_metric(clock: str, series: Mapping[str, Any], domain: str) -> str | None:
    """The utilisation that says whether ``clock`` was under load: its own unit's (``cpu3.freq_mhz`` ->
    ``cpu3.util_pct``, ``gpu0.sm_clock_mhz`` -> ``gpu0.util_pct``), else its domain's whole load
    (``cpu.util_pct``: sbc-bench's %cpu, a CSV's load column); None where the log has neither."""
    for name in (clock.partition(".")[0] + ".util_pct", f"{domain}.util_pct"):
        if name in series:
            return name
    return None


def _hot_times(hottest: Readings) -> set[float]:
    """The times at which the hottest thermometer was within ``HOT_BAND_C`` of its session maximum."""
    if not hottest.pts:
        return set()
    peak = max(v for _, v in hottest.pts)
    return {t for t, v in hottest.pts if v >= peak - HOT_BAND_C}


def _loaded(
    series: Mapping[str, list[Point]], metrics: Sequence[str], domain: str, hottest: Readings
) -> tuple[list[Point], bool]:
    """A domain's clock at each line where one of its clocks ran at ``LOAD_UTIL_PCT`` or more (the
    highest such clock of the line), and whether the load was read. A log without any load for the
    domain (a vcgencmd CSV) counts the lines at its hottest as loaded: heat is what the work leaves."""
    by_t: dict[float, float] = {}
    utils = {m: util_metric(m, series, domain) for m in metrics}
    if not any(utils.values()):
        hot = _hot_times(hottest)
        for metric in metrics:
            for t, v in series[metric]:
                if t in hot:
                    by_t[t] = max(by_t.get(t, v), v)
        return sorted(by_t.items()), False
    for metric in metrics:
        name = utils[metric]
        util = dict(series[name]) if name else {}
        for t, v in series[metric]:
            # a line without a load reading is not a loaded line
            if util.get(t, -1.0) >= LOAD_UTIL_PCT:
                by_t[t] = max(by_t.get(t, v), v)
    return sorted(by_t.items()), True


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


def _drop(
    loaded: list[Point], hottest: Readings, heated_from_c: float | None, asked: Mapping[float, float]
) -> dict[str, Any] | None:
    """The first loaded reading below the drop fraction of the highest before it (or of the clock the
    kernel asked for at that line, ``asked``), while the board had heated by the soak's threshold: when,
    from, to (the median after it), the lowest after it, by how much on average, how hot."""
    fraction = ThrottleThresholds.clock_drop_fraction
    ref = float("-inf")
    for i, (t, v) in enumerate(loaded):
        ref = max(ref, asked.get(t, ref))
        temps = hottest.values(t, t) if hottest.pts else []
        hot = (
            heated_from_c is not None and temps and temps[0] - heated_from_c >= SoakThresholds.heating_rise_c
        )
        if ref > 0 and v < fraction * ref and hot:
            after = [w for _, w in loaded[i:]]
            mean_after = sum(after) / len(after)
            return {
                "t_s": t,
                "from_mhz": rounded(ref, 1),
                "to_mhz": rounded(median(after) or v, 1),
                "lowest_mhz": rounded(min(after), 1),
                "depth_pct": rounded(100.0 * (1.0 - mean_after / ref), 1),
                "temp_c": rounded(temps[0], 2),
            }
        ref = max(ref, v)
    return None


def _while_hot(series: Mapping[str, list[Point]], metrics: list[str], hottest: Readings) -> float | None:
    """The median of a domain's clock (its highest core per line) while the board was at its hottest."""
    hot_t = _hot_times(hottest)
    per_line: dict[float, float] = {}
    for metric in metrics:
        for t, v in series[metric]:
            if t in hot_t:
                per_line[t] = max(per_line.get(t, v), v)
    return median(list(per_line.values()))


@dataclass(frozen=True)
class _DomainClocks:
    """One clock domain's metrics: the ones judged and, where a measured clock is among them, the
    requested ones (cpufreq: what the kernel asked for) that are then not the clock that ran."""

    name: str
    judged: list[str]
    requested: list[str]


def _requested_by_line(series: Mapping[str, list[Point]], requested: list[str]) -> dict[float, float]:
    out: dict[float, float] = {}
    for metric in requested:
        for t, v in series[metric]:
            out[t] = max(out.get(t, v), v)
    return out


def _domain(
    clocks: _DomainClocks,
    series: Mapping[str, list[Point]],
    limit: float | None,
    hottest: Readings,
    start_c: float | None,
) -> dict[str, Any]:
    """One clock domain of a session: the highest seen, where it stood while hot, whether it held (flat or
    not), was capped (held flat under load below the maximum the log states) or dropped."""
    metrics, name = clocks.judged, clocks.name
    seen = [v for m in metrics for _, v in series[m]]
    loaded, load_read = _loaded(series, metrics, name, hottest)
    entry: dict[str, Any] = {
        "metrics": metrics,
        "max_mhz": rounded(max(seen), 1),
        "while_hot_mhz": rounded(_while_hot(series, metrics, hottest), 1),
        "loaded_readings": len(loaded),
        "load": "read" if load_read else "inferred_from_heat",
    }
    if clocks.requested:
        asked = [v for m in clocks.requested for _, v in series[m]]
        entry["requested"] = {"metrics": clocks.requested, "min_mhz": min(asked), "max_mhz": max(asked)}
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
    drop = _drop(loaded, hottest, start_c, _requested_by_line(series, clocks.requested))
    if drop is not None:
        entry.update({"capped": False, "status": "dropped", "drop": drop})
        return entry
    entry["flat"] = max(values) - min(values) <= FLAT_FRACTION * max(values)
    # capped: flat under load below a maximum the log itself states; a flat clock without one held
    capped = entry["flat"] and limit is not None and max(values) < (1.0 - FLAT_FRACTION) * limit
    entry.update({"capped": capped, "status": "capped" if capped else "held"})
    return entry


def _domains(series: Mapping[str, list[Point]], roles: Mapping[str, MetricRole]) -> dict[str, _DomainClocks]:
    """The clock metrics of each domain; where the domain has a measured clock, only those are judged."""
    observable: dict[str, list[str]] = {}
    for metric in sorted(series):
        role = roles.get(metric)
        name = _domain_of(role) if role is not None else None
        if name is not None and series[metric]:
            observable.setdefault(name, []).append(metric)
    out = {}
    for name, metrics in observable.items():
        measured = [m for m in metrics if roles[m].measured]
        requested = [
            m for m in sorted(series) if (r := roles.get(m)) is not None and r.role == "clock"
            and r.domain == name and not r.measured and series[m]
        ]
        judged, asked = (measured, requested) if measured and requested else (metrics, [])
        out[name] = _DomainClocks(name, judged, asked)
    return out


def _clocks(
    series: Mapping[str, list[Point]],
    roles: Mapping[str, MetricRole],
    hottest: Readings,
    start_c: float | None,
) -> dict[str, dict[str, Any]]:
    return {
        name: _domain(d, series, _limit_of(series, roles, name), hottest, start_c)
        for name, d in sorted(_domains(series, roles).items())
    }


def _flag_hits(role: MetricRole, metric: str, value: float, previous: float | None) -> list[str]:
    """What one reading of a throttle-flag metric says held the clock down: a 0/1 column of a CSV log
    (unit ``flag``) by its name; otherwise the bits its source's decoder names that are news at this
    reading (a "since boot" bit already set before it is not), each with its cause where that is not heat
    (a Pi's under-voltage, a GPU's power cap)."""
    if role.unit == "flag":
        return [f"{metric} set"] if value >= 1.0 else []
    decoder = decoder_for(role)
    if decoder is None:
        return []
    before = int(previous) if previous is not None else None
    hits = [d for d in news(decoder, before, int(value)) if d.throttles]
    return [d.name if d.cause in (None, "heat") else f"{d.name} ({d.cause}, not heat)" for d in hits]


def _flags(series: Mapping[str, list[Point]], roles: Mapping[str, MetricRole]) -> tuple[float, str] | None:
    """(time, reasons) of the first line whose throttle flags say heat or power."""
    first: tuple[float, str] | None = None
    for metric, readings in series.items():
        role = roles.get(metric)
        if role is None or role.role != "throttle_flags":
            continue
        previous: float | None = None
        for t, v in readings:
            hits = _flag_hits(role, metric, v, previous)
            previous = v
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
    return when(inputs.wall_t0, inputs.spacing_assumed, t)


def _at(inputs: LogInputs, t: float) -> str:
    """When, with the seconds into the log and the phase the log was in."""
    return at(inputs.wall_t0, inputs.spacing_assumed, t) + phase_at(inputs.phases, t)


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


def _zones(thermo: Mapping[str, list[Point]], inputs: LogInputs) -> dict[str, Any]:
    """Each thermometer's start / max / end and slope; its trip point and the margin to it where known
    (the margin is evidence: how far from throttling the board ran)."""
    th = ThrottleThresholds()
    out = {}
    for metric, readings in thermo.items():
        fig = zone_figures(readings, inputs.trip_points.get(metric, ()), th)
        out[metric] = {
            "start_c": fig["start_c"],
            "max_c": fig["max_c"],
            "end_c": rounded(readings[-1][1], 2),
            "slope_c_per_min": fig["slope_c_per_min"],
        }
        if "trip" in fig:
            source = inputs.trip_source or "the log"
            out[metric] |= {"trip": fig["trip"] | {"source": source}, "margin_c": fig["margin_c"]}
    return out


def _decide(
    s: dict[str, Any], found: Evidence, flags: tuple[float, str] | None, inputs: LogInputs
) -> tuple[str, str]:
    """The verdict and its reason, in the order the module docstring gives."""
    clocks, thermal = s["clocks"], s["thermal"]
    if s["lines"] < MIN_SESSION_LINES:
        return "inconclusive", f"too short: {s['lines']} line(s); need {MIN_SESSION_LINES} for a trend"
    dropped = sorted((d["drop"]["t_s"], n) for n, d in clocks.items() if d["status"] == "dropped")
    dropped_text = ""
    if dropped:
        t, first = dropped[0]
        dropped_text = drop_text(first, clocks[first], _at(inputs, t))
    if flags is not None:
        said = f"the log's throttle flags say {flags[1]} from {_at(inputs, flags[0])}"
        return "throttled", said + (f"; {dropped_text}" if dropped_text else "")
    if dropped:
        return "throttled", dropped_text
    missing = found.missing()
    if missing is not None:
        return "inconclusive", missing.replace("on this machine", "in this log")
    capped = [f"{n} flat at {d['held_mhz']:g} MHz" for n, d in clocks.items() if d["status"] == "capped"]
    if capped:
        return "capped", (
            f"clocks held under load ({', '.join(capped)}) below the maximum the log states: a power mode, "
            "jetson_clocks or a limit, not heat"
        )
    unseen = "".join(f"; {n}" for n in s["notes"])
    judged = [n for n, d in clocks.items() if n in ("cpu", "gpu") and d["status"] != "not_loaded"]
    if not judged and not s["reasons_logged"]:
        return "inconclusive", no_clock_text(found.unobservable_domains, s["plateau_c"]) + unseen
    if not thermal.get("measured"):
        return "inconclusive", "no thermometer in this log: whether the temperature settled cannot be shown"
    held = held_text(clocks)
    held = f"; {held}" if held else ""
    if thermal["steady_state_s"] is None:
        slope = thermal.get("end_slope_c_per_min")
        at_end = f"{slope:+.1f} °C/min at the end; " if slope is not None else ""
        return "not_steady", f"{at_end}run longer{held}; {margin_text(s)}{unseen}"
    return "not_throttled", (
        f"clocks held{held.replace(';', ':', 1)}; temperature steady at {thermal['steady_temp_c']:.1f} °C "
        f"after {thermal['steady_state_s']:.0f} s; {margin_text(s)}{unseen}"
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
    zones = _zones(thermo, inputs)
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
        # said once per clock domain, and not for a domain a measured clock of the log answers for
        "clocks_not_observable": {d: r for d, r in found.unobservable_domains.items() if d not in clocks},
        "power": _power(series, roles, inputs.power_budget_mw),
        "notes": [n for n in (missing_clock_note(series, roles, clocks),) if n],
        "plateau_c": plateau_c(hottest),
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
