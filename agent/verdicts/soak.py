"""The soak verdict: one generation request repeated back to back for minutes or hours, judged by window.

A config's steady reps last seconds; a passively cooled board throttles after minutes. A soak cuts a long
run into windows (``WindowSpeed``, what the worker measured), joins each with the telemetry taken in it
(``soak_windows`` -> ``SoakWindow``) and answers what a user asks of a long run (``judge_soak``):

- the figures: burst speed (median of the first 3 windows), sustained speed (median of the last third),
  their ratio, stability in 3DMark's sense (worst window / best window), the first throttle signal (when
  and what), thermal steady state (when the hottest zone's slope stayed under a stated °C/min over a
  stated span) and the temperature there;
- the verdict: ``throttled`` when a throttle signal fired (a hardware flag, a clock cap lowered, or a speed
  drop beyond noise while the board had heated up); ``not_throttled`` when the speed held and the
  temperature reached steady state; ``not_steady`` when the temperature was still moving at the end, or
  was not measured at all (then no steady state can be shown, and the reason says so instead of inventing
  one); ``slowdown_not_thermal`` when speed fell without heat or with clocks that held, naming contention
  where the interference counters show other processes' CPU work; ``inconclusive`` with too few windows.

Pure: plain data in (window speeds, series of ``(t_mono, value)`` readings on the same clock, the metrics'
roles as their collectors declared them), a judgement with its evidence out. Metrics are found by role.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from edgeprof.collectors import MetricRole
from edgeprof.collectors.evidence import Evidence
from edgeprof.collectors.flags import is_throttle_flag_name
from edgeprof.stats import median
from edgeprof.telemetry import SeriesLike, slope_per_s
from edgeprof.verdicts.hardware_signals import requested_not_ran
from edgeprof.verdicts.interference import InterferenceThresholds
from edgeprof.verdicts.result import rounded
from edgeprof.verdicts.series import thirds
from edgeprof.verdicts.soak_telemetry import (
    Readings,
    SoakTelemetry,
    SoakWindow,
    WindowSpeed,
    soak_telemetry,
    windows_of,
)
from edgeprof.verdicts.throttle import ThrottleThresholds, excluded_notes

SoakValue = Literal["throttled", "not_throttled", "not_steady", "slowdown_not_thermal", "inconclusive"]


@dataclass(frozen=True)
class SoakThresholds:
    """When a soak's signal counts. Each default comes with the reason it is where it is."""

    # Burst speed is the median of the first 3 windows: the board is still at its cooldown temperature
    # there, and a median of 3 survives one odd window (the first request's prefill, a page-cache miss).
    burst_windows: int = 3
    # Fewer windows than that give no burst speed at all ...
    min_windows: int = 3
    # ... and below 6 the last third (the sustained speed) overlaps the burst windows: sustained / burst
    # would compare a window with itself.
    min_windows_for_thirds: int = 6
    # The soak "held" when sustained >= 97 % of burst: 3DMark's stress-test pass mark for frame-rate
    # stability, the one threshold users of long-load tests already know.
    hold_fraction: float = 0.97
    # One window more than 5 % below burst is a drop beyond noise: the throttle verdict's drift threshold
    # (``ThrottleThresholds.tps_drop_fraction``): decode noise on an idle board is 1-3 % per rep.
    speed_drop_fraction: float = ThrottleThresholds.tps_drop_fraction
    # "Heated": the hottest zone at least 2 °C above where the soak started. Sensors quantise to 0.5-1 °C
    # and a settled board wanders about a degree with the fan and the room; two steps of the coarsest
    # sensor is heat, not noise.
    heating_rise_c: float = 2.0
    # Thermal steady state: the least-squares slope of the hottest zone under 0.5 °C/min (the figure the
    # cooldown uses to decide a board has stopped cooling, ``Cooldown.slope_c_per_min``) ...
    steady_c_per_min: float = 0.5
    # ... over the trailing 120 s: long enough that a whole-degree sensor's single step (a fitted
    # 1.5 °C / span) reads 0.75 °C/min, not the 9 °C/min of a 10-s span, and short enough that a 10-minute
    # soak (MLPerf's minimum) can reach it.
    steady_span_s: float = 120.0
    # A slope from fewer than 5 readings has under 3 degrees of freedom (the throttle verdict's
    # ``min_load_samples``).
    min_span_readings: int = 5
    # A clock below 85 % of its burst-window median has "dropped" (``ThrottleThresholds``: whole OPP steps
    # of thermal capping, not the 5-10 % DVFS moves of load alone).
    clock_drop_fraction: float = ThrottleThresholds.clock_drop_fraction
    # Other processes' CPU above a quarter of a core in the slow windows is contention
    # (``InterferenceThresholds.max_other_cores``).
    other_cores: float = InterferenceThresholds.max_other_cores


@dataclass(frozen=True)
class SoakJudgement:
    value: SoakValue
    evidence: dict[str, Any]
    windows: list[SoakWindow]
    burst_tps: float | None
    sustained_tps: float | None
    sustained_ratio: float | None
    stability_ratio: float | None
    first_throttle_s: float | None
    first_throttle_what: str | None
    steady_state_s: float | None
    steady_temp_c: float | None
    end_slope_c_per_min: float | None
    first_throttle_window: int | None = None


# -- the soak's figures ------------------------------------------------------------------------------------
def _speed_figures(windows: Sequence[SoakWindow], th: SoakThresholds) -> dict[str, Any]:
    """Burst, sustained, their ratio and the worst / best window, over the windows with a decode speed."""
    tps = [w.tg_tps for w in windows if w.tg_tps is not None]
    burst = median(tps[: th.burst_windows]) if len(tps) >= th.min_windows else None
    sustained = median(thirds(tps)[1]) if len(tps) >= th.min_windows_for_thirds else None
    ratio = sustained / burst if sustained is not None and burst else None
    stability = min(tps) / max(tps) if tps and max(tps) > 0 else None
    return {
        "windows_with_speed": len(tps),
        "burst_tps": burst,
        "sustained_tps": sustained,
        "sustained_ratio": ratio,
        "stability_ratio": stability,
        "worst_tps": min(tps) if tps else None,
        "best_tps": max(tps) if tps else None,
    }


def _slopes(
    hottest: Readings, t0: float, ends: Sequence[float], th: SoakThresholds
) -> list[tuple[float, float]]:
    """(window end, °C/min over the span before it) for every window end a whole span into the soak."""
    out = []
    for te in ends:
        if te - t0 < th.steady_span_s:
            continue
        span = hottest.inside(te - th.steady_span_s, te)
        slope = slope_per_s(span) if len(span) >= th.min_span_readings else None
        if slope is not None:
            out.append((te, slope * 60.0))
    return out


def _thermal(tel: SoakTelemetry, windows: Sequence[SoakWindow], th: SoakThresholds) -> dict[str, Any]:
    """Heating over the soak and thermal steady state (``thermal_state``) of the hottest zone."""
    if tel.hottest is None or not windows:
        return {"measured": False}
    t0, t1 = windows[0].t_start, windows[-1].t_end
    if not tel.hottest.inside(t0, t1):
        return {"measured": False, "note": "thermometers present but no reading during the soak"}
    temps = [w.temp_max_c for w in windows if w.temp_max_c is not None]
    state = thermal_state(tel.hottest, t0, t1, [w.t_end for w in windows], th, temps[0] if temps else None)
    return {"measured": True, "zones": sorted(tel.zones)} | state  # (the key order the evidence always had)


def thermal_state(
    hottest: Readings,
    t0: float,
    t1: float,
    ends: Sequence[float],
    th: SoakThresholds,
    start_c: float | None = None,
) -> dict[str, Any]:
    """The soak's thermal figures of the hottest thermometer's readings over [t0, t1]: start, max, rise,
    the slope at the end, and thermal steady state: the first of ``ends`` from which on every span's slope
    stayed under the threshold, with the median temperature from that span on. Shared with the verdict on
    an imported log, so "steady" means one thing."""
    readings = hottest.inside(t0, t1)
    slopes = _slopes(hottest, t0, ends, th)
    steady_from: float | None = None
    for te, slope in reversed(slopes):
        if abs(slope) >= th.steady_c_per_min:
            break
        steady_from = te
    steady = hottest.values(steady_from - th.steady_span_s, t1) if steady_from is not None else []
    end_slope = slopes[-1][1] if slopes and slopes[-1][0] == t1 else None
    end_span = th.steady_span_s
    if end_slope is None and t1 - t0 < th.steady_span_s and len(readings) >= th.min_span_readings:
        whole = slope_per_s(readings)  # a soak shorter than the span: its whole length says the trend
        end_slope, end_span = (whole * 60.0 if whole is not None else None), t1 - t0
    first = start_c if start_c is not None else readings[0][1]
    return {
        "measured": True,
        "start_c": first,
        "max_c": max(v for _, v in readings),
        "rise_c": max(v for _, v in readings) - first,
        "end_slope_c_per_min": end_slope,
        "end_slope_span_s": end_span,
        "steady_criterion": {"c_per_min": th.steady_c_per_min, "span_s": th.steady_span_s},
        "steady_state_s": steady_from - t0 if steady_from is not None else None,
        "steady_temp_c": median(steady),
        "soak_s": t1 - t0,
    }


def _what(signal: str) -> str:
    """A hardware signal as the first-throttle figure names it."""
    name, _, cause = signal.partition(" [")
    if is_throttle_flag_name(name):
        return f"{name} flag" + (f" ({cause.rstrip(']')}, not heat)" if cause else "")
    if " cap " in signal:
        component, _, rest = signal.partition(" cap ")
        return f"{component} clock cap {rest.replace('->', ' -> ')}"
    return f"{signal} throttle events"


def _burst_windows(windows: Sequence[SoakWindow], th: SoakThresholds) -> list[SoakWindow]:
    """The windows the burst speed is the median of (the first ones with a decode speed)."""
    return [w for w in windows if w.tg_tps is not None][: th.burst_windows]


def _after(windows: Sequence[SoakWindow], burst: Sequence[SoakWindow]) -> list[SoakWindow]:
    return [w for w in windows if w.t_start >= burst[-1].t_end] if burst else []


def _clocks_held(w: SoakWindow, burst: Sequence[SoakWindow], th: SoakThresholds) -> bool | None:
    """Whether the window's CPU and GPU clocks stayed above the drop fraction of the burst windows'
    (None where no clock was measured)."""
    held: list[bool] = []
    for clock in ("cpu_mhz", "gpu_mhz"):
        ref = median(v for b in burst if (v := getattr(b, clock)) is not None)
        now = getattr(w, clock)
        if ref and now is not None:
            held.append(now >= th.clock_drop_fraction * ref)
    return all(held) if held else None


def _speed_drops(
    windows: Sequence[SoakWindow], figures: dict[str, Any], thermal: dict[str, Any], th: SoakThresholds
) -> list[tuple[float, int, str]]:
    """(t, window, what) of each window after the burst more than the noise below burst while the board
    had heated up and its clocks did not hold (a drop with clocks that held is no throttling mechanism)."""
    burst_tps = figures["burst_tps"]
    if burst_tps is None or not thermal["measured"]:
        return []
    burst = _burst_windows(windows, th)
    out = []
    for w in _after(windows, burst):
        if w.tg_tps is None or w.temp_max_c is None or w.tg_tps >= burst_tps * (1 - th.speed_drop_fraction):
            continue
        if w.temp_max_c - thermal["start_c"] < th.heating_rise_c or _clocks_held(w, burst, th):
            continue
        drop = 100.0 * (1.0 - w.tg_tps / burst_tps)
        out.append((w.t_start, w.index, f"speed -{drop:.0f} % at {w.temp_max_c:.1f} °C"))
    return out


def _first_throttle(
    windows: Sequence[SoakWindow], drops: Sequence[tuple[float, int, str]]
) -> tuple[float, int, str] | None:
    hardware = [
        (w.signal_t, w.index, _what(w.throttle_signals[0]))
        for w in windows
        if w.throttle_signals and w.signal_t is not None
    ]
    candidates = sorted([*hardware, *drops], key=lambda c: c[0])
    return candidates[0] if candidates else None


# -- the decision ------------------------------------------------------------------------------------------
def _pct(fraction: float) -> str:
    return f"{100.0 * fraction:.1f} %"


def _cause(slow: Sequence[SoakWindow], burst: Sequence[SoakWindow], th: SoakThresholds) -> tuple[str, str]:
    """('contention'|'other'|'unknown', why) of a slowdown heat did not cause, from the interference
    counters of the slow windows against the burst windows'."""
    now = median(w.other_cores for w in slow if w.other_cores is not None)
    before = median(w.other_cores for w in burst if w.other_cores is not None)
    if now is None:
        return "unknown", "interference counters not measured: the cause is unknown"
    was = f" ({before:.2f} in the burst windows)" if before is not None else ""
    if now > th.other_cores:
        return "contention", f"contention: other processes used {now:.2f} cores in the slow windows{was}"
    return "other", (
        f"not contention (other processes {now:.2f} cores in the slow windows): something else "
        "(memory pressure, a power cap, the workload itself)"
    )


def _coincides(slow: Sequence[SoakWindow]) -> str:
    """What the slow windows coincide with, by the interference counters (no cause is claimed)."""
    now = median(w.other_cores for w in slow if w.other_cores is not None)
    if now is None:
        return "other processes' CPU work not measured"
    return f"the slowdown coincides with {now:.2f} cores of other work"


def _slowdown(
    windows: Sequence[SoakWindow],
    figures: dict[str, Any],
    thermal: dict[str, Any],
    th: SoakThresholds,
    evidence: dict[str, Any],
    found: Evidence,
) -> SoakValue:
    """Sustained fell below the hold mark with no throttle signal: heat or not, and what else?"""
    reasons: list[str] = evidence["reasons"]
    burst_tps, burst = figures["burst_tps"], _burst_windows(windows, th)
    limit = burst_tps * (1 - th.speed_drop_fraction)
    slow = [w for w in _after(windows, burst) if w.tg_tps is not None and w.tg_tps < limit]
    slow = slow or list(windows[-max(1, len(windows) // 3) :])
    cause, why = _cause(slow, burst, th)
    held = [h for w in slow if (h := _clocks_held(w, burst, th)) is not None]
    clocks = "unknown" if not held else "held" if all(held) else "dropped"
    evidence.update({"slow_windows": [w.index for w in slow], "clocks": clocks, "cause": cause})
    heated = thermal["measured"] and thermal["rise_c"] >= th.heating_rise_c
    if not thermal["measured"]:
        missing = found.missing()
        if missing is not None:  # "not thermal" would rest on nothing: say what coincides instead
            reasons.append(f"{missing}; {_coincides(slow)}")
            return "inconclusive"
        reasons.append("temperature not measured")
        if cause == "contention" and clocks == "held":
            reasons.append("clocks held: " + why)
            return "slowdown_not_thermal"
        reasons.append("without a thermometer heat can be neither shown nor ruled out: " + why)
        return "inconclusive"
    if heated and clocks != "held":
        reasons.append(
            f"the board heated {thermal['rise_c']:.1f} °C but no window fell beyond the "
            f"{_pct(th.speed_drop_fraction)} noise and no hardware signal fired: run longer"
        )
        return "inconclusive"
    if heated:
        reasons.append(f"temperature rose {thermal['rise_c']:.1f} °C but every measured clock held")
    else:
        reasons.append(f"temperatures flat ({thermal['rise_c']:+.1f} °C over the soak)")
        if clocks == "dropped":
            reasons.append("clocks fell without heat (power cap or governor?)")
        elif clocks == "held":
            reasons.append("clocks steady")
    reasons.append(why)
    return "slowdown_not_thermal"


def _held_verdict(
    figures: dict[str, Any], thermal: dict[str, Any], th: SoakThresholds, reasons: list[str]
) -> SoakValue:
    """The speed held: not_throttled only with the temperature shown to be at steady state."""
    held = f"speed held {_pct(figures['sustained_ratio'])} of burst (at least {_pct(th.hold_fraction)})"
    if not thermal["measured"]:
        reasons.append(
            "temperature not measured (no thermometer read during the soak): thermal steady state cannot "
            f"be shown; {held}"
        )
        return "not_steady"
    slope, steady_s = thermal["end_slope_c_per_min"], thermal["steady_state_s"]
    if steady_s is None:
        if slope is None:
            reasons.append(f"too few temperature readings for a slope over {th.steady_span_s:g} s; {held}")
        elif thermal["soak_s"] < th.steady_span_s:
            reasons.append(
                f"run longer: the soak ({thermal['soak_s']:.0f} s) is shorter than the "
                f"{th.steady_span_s:g}-s span steady state is judged over; {slope:+.1f} °C/min; {held}"
            )
        else:
            reasons.append(f"run longer; still {slope:+.1f} °C/min at the end; {held}")
        return "not_steady"
    reasons.append(
        f"{held}; temperature steady at {thermal['steady_temp_c']:.1f} °C after {steady_s:.0f} s "
        f"(under {th.steady_c_per_min:g} °C/min over {th.steady_span_s:g} s)"
    )
    return "not_throttled"


def _rounded_figures(figures: dict[str, Any], thermal: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: rounded(v, 4) if isinstance(v, float) else v for k, v in figures.items()}
    out["thermal"] = {k: rounded(v, 3) if isinstance(v, float) else v for k, v in thermal.items()}
    return out


def judge_soak(
    speeds: Sequence[WindowSpeed],
    series: Mapping[str, SeriesLike],
    roles: Mapping[str, MetricRole],
    thresholds: SoakThresholds | None = None,
    *,
    gpu_in_use: bool = True,
) -> SoakJudgement:
    """Judge a soak. Decision, in order:

    1. fewer windows with a decode speed than ``min_windows`` / ``min_windows_for_thirds`` -> inconclusive;
    2. a throttle signal (NVML heat/power reason, throttle counter up, a clock cap lowered, or a window
       beyond the noise below burst while the board had heated and its clocks did not hold) -> throttled;
    3. sustained below ``hold_fraction`` of burst -> slowdown_not_thermal (flat temperatures, or clocks
       that held; the cause named from the interference counters), else inconclusive;
    4. held: temperature not measured -> not_steady saying so; still moving at the end -> not_steady with
       the slope; at steady state -> not_throttled.
    """
    th = thresholds or SoakThresholds()
    tel = soak_telemetry(series, roles, gpu_in_use)
    windows = windows_of(speeds, tel, roles)
    figures = _speed_figures(windows, th)
    thermal = _thermal(tel, windows, th)
    drops = _speed_drops(windows, figures, thermal, th)
    first = _first_throttle(windows, drops)
    evidence: dict[str, Any] = {"thresholds": asdict(th), "reasons": [], "notes": []}
    evidence["evidence"] = tel.evidence.as_json()
    evidence["notes"].extend(excluded_notes(tel.evidence))
    if windows:
        evidence["notes"].extend(requested_not_ran(series, roles, windows[0].t_start, windows[-1].t_end))
    value = _decide(windows, figures, thermal, first, th, evidence, tel.evidence)
    evidence.update(_rounded_figures(figures, thermal))
    t0 = windows[0].t_start if windows else 0.0
    evidence["first_throttle"] = (
        {"s": rounded(first[0] - t0), "window": first[1], "what": first[2]} if first is not None else None
    )
    return SoakJudgement(
        value=value,
        evidence=evidence,
        windows=windows,
        burst_tps=figures["burst_tps"],
        sustained_tps=figures["sustained_tps"],
        sustained_ratio=figures["sustained_ratio"],
        stability_ratio=figures["stability_ratio"],
        first_throttle_s=first[0] - t0 if first is not None else None,
        first_throttle_what=first[2] if first is not None else None,
        steady_state_s=thermal.get("steady_state_s"),
        steady_temp_c=thermal.get("steady_temp_c"),
        end_slope_c_per_min=thermal.get("end_slope_c_per_min"),
        first_throttle_window=first[1] if first is not None else None,
    )


def _decide(
    windows: Sequence[SoakWindow],
    figures: dict[str, Any],
    thermal: dict[str, Any],
    first: tuple[float, int, str] | None,
    th: SoakThresholds,
    evidence: dict[str, Any],
    found: Evidence,
) -> SoakValue:
    reasons: list[str] = evidence["reasons"]
    n = figures["windows_with_speed"]
    if n < th.min_windows_for_thirds:
        need = th.min_windows if n < th.min_windows else th.min_windows_for_thirds
        what = "a burst speed" if n < th.min_windows else "a last third apart from the burst windows"
        reasons.append(f"{n} window(s) with a decode speed; need {need} for {what}: run longer")
        return "inconclusive"
    ratio = figures["sustained_ratio"]
    burst, sustained = figures["burst_tps"], figures["sustained_tps"]
    how_much = (
        f"sustained {sustained:.2f} t/s = {_pct(ratio)} of burst {burst:.2f} t/s"
        if ratio is not None
        else "no burst speed to compare with"
    )
    if first is not None:
        t0 = windows[0].t_start
        reasons.append(f"{first[2]} after {first[0] - t0:.0f} s (window {first[1]}); {how_much}")
        if thermal.get("steady_state_s") is None and thermal.get("end_slope_c_per_min") is not None:
            evidence["notes"].append(
                f"temperature still {thermal['end_slope_c_per_min']:+.1f} °C/min at the end"
            )
        return "throttled"
    if ratio is None or ratio < th.hold_fraction:
        reasons.append(how_much + f", below the {_pct(th.hold_fraction)} hold mark")
        return _slowdown(windows, figures, thermal, th, evidence, found)
    return _held_verdict(figures, thermal, th, reasons)
