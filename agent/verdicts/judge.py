"""Verdicts on a run: was it throttled, and were its steady repetitions stable?

The judging functions (``throttle_verdict``, ``stability``) are pure: they take plain data (series of
``(t_mono, value)`` readings, per-rep tokens/s) and return a value with the evidence behind it, so every rule
can be checked on a synthetic series whose answer is known. ``analyse_run`` is the one function that talks to
the database: it loads a run's samples, phases and measurements, judges, and stores ``Verdict`` rows.

Throttle evidence comes in three kinds, strongest first:

(a) hardware flags: an NVML clock-event reason for heat or power set while the model ran, or an x86
    thermal-throttle counter that went up (the silicon saying it throttled, no inference needed);
(b) clocks: a CPU/GPU clock under load below a fraction of the highest this clock reached in comparable runs
    of the sweep (or a cpufreq cap lowered), *while* a thermal zone was near its trip point or rising;
(c) drift: steady tokens/s falling across repetitions (last third vs first third, and the rank correlation
    with temperature).

A slowdown the heat cannot explain (flat temperatures, or clocks that held) is ``slowdown_not_thermal``:
something else (a background task, memory pressure, a power cap) is at work. Too little data to say
anything either way is ``inconclusive`` — never a guess of "fine".
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from edgeprof.collectors.base import counter_delta
from edgeprof.collectors.nvml import decode_clock_event_reasons
from edgeprof.collectors.registry import role_of
from edgeprof.collectors.roles import MetricRole
from edgeprof.stats import median
from edgeprof.storage.models import Measurement, Phase, Run, Verdict
from edgeprof.storage.samples import max_value, read_samples, sample_metrics
from edgeprof.telemetry.analysis import SeriesLike, slope_per_s
from edgeprof.verdicts.interference import Rep as IRep
from edgeprof.verdicts.interference import interference_verdict

ThrottleValue = Literal["throttled", "not_throttled", "inconclusive", "slowdown_not_thermal"]
StabilityValue = Literal["stable", "unstable", "inconclusive"]

VERDICT_KINDS = ("throttle", "stability", "interference")

# Phases in which the model is working: the window "under load".
LOAD_PHASES = ("load", "prefill", "decode")

# NVML clock-event ("throttle") reasons that mean "clocks held down by heat or power" (names as
# ``edgeprof.collectors.nvml.decode_clock_event_reasons`` gives them). GpuIdle, application-clock settings,
# SyncBoost and display clocks are normal operation, not throttling.
NVML_THROTTLE_REASONS = frozenset(
    {"SwPowerCap", "HwSlowdown", "SwThermalSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown"}
)

# Trip types at which the kernel starts taking clock away ("active" trips only switch fans on, and
# "critical" shuts the board down, far above where throttling starts).
THROTTLING_TRIP_TYPES = ("passive", "hot")


def gpu_in_use(run: Run) -> bool:
    """Whether a run's llama.cpp offloaded layers to a GPU: it asked for some (-ngl > 0, the default "all")
    and its build can offload (a CPU-only build ignores -ngl; the worker records which it was)."""
    if run.n_gpu_layers == 0:
        return False
    try:
        effective = json.loads(run.effective_json) if run.effective_json else {}
    except ValueError:
        effective = {}
    return (effective or {}).get("gpu_offload_supported") is not False


def _role(metric: str, roles: Mapping[str, MetricRole] | None = None) -> MetricRole | None:
    """What ``metric`` is: as given in ``roles`` (stored with the sweep), else as its collector declares."""
    given = roles.get(metric) if roles else None
    return given if given is not None else role_of(metric)


@dataclass(frozen=True)
class ThrottleThresholds:
    """When a signal counts. Each default comes with the reason it is where it is."""

    # A clock under load below 85 % of the highest this clock domain reached in comparable runs counts as a
    # drop. DVFS governors move clocks by one or two small steps (5-10 %) with load alone; thermal capping on
    # Jetson/ARM takes whole OPP steps off (15 % and more), and a desktop CPU at its thermal limit sheds
    # several hundred MHz. 0.85 sits between the two.
    clock_drop_fraction: float = 0.85
    # "Near" a trip point: within 5 °C of the lowest passive/hot trip. Passive trips are where the kernel's
    # step-wise governor starts taking clock away; 5 °C is about what a passively cooled Jetson overshoots
    # in one sampling period at full load, and well above the 0.5-1 °C quantisation of the sensors.
    near_trip_c: float = 5.0
    # Rising: least-squares slope above 0.5 °C/min under load (the same figure the cooldown uses to decide a
    # board has stopped cooling, ``Cooldown.slope_c_per_min``) ...
    rising_c_per_min: float = 0.5
    # ... and at least 1 °C of fitted rise over the window, so that a single quantisation step in a run of
    # a few seconds (a "slope" of 20 °C/min) is not called a trend.
    min_rise_c: float = 1.0
    # Drift: median tg_tps of the last third of the steady reps more than 5 % below the first third's.
    # Rep-to-rep noise of steady decode on an idle board is 1-3 %; 5 % is clearly beyond it while still
    # catching the 10-30 % a throttled Jetson loses.
    tps_drop_fraction: float = 0.05
    # Below 5 telemetry readings under load nothing can be said of a trend (a slope from 5 points has 3
    # degrees of freedom), ...
    min_load_samples: int = 5
    # ... and below 3 steady reps "first third" and "last third" are the same single values.
    min_steady_reps: int = 3
    # Spearman rank correlation between per-rep tg_tps and temperature at or below -0.6: speed falls as the
    # board heats. 0.6 is "strong" on the usual scale and about the one-sided 10 % critical value for 6 reps.
    rank_correlation: float = 0.6


@dataclass(frozen=True)
class StabilityThresholds:
    """pyperf-style checks on the steady repetitions (pyperf's ``check`` warns at the same 10 % CV)."""

    # Coefficient of variation (sample stdev / mean) above 10 %: pyperf's "the standard deviation is X % of
    # the mean" warning threshold.
    max_cv: float = 0.10
    # An outlier: max/median above 1.25 or min/median below 1/1.25. pyperf uses 50 % for its min/max
    # outlier warning over dozens of values; with the 3-10 reps of a sweep one outlier moves the median
    # less, so the looser test would pass runs whose reps plainly disagree.
    max_over_median: float = 1.25
    # Fewer than 3 values: no spread can be judged (the stdev of 2 values is their half-difference).
    min_n: int = 3


@dataclass(frozen=True)
class VerdictResult:
    """A verdict value and the evidence behind it (JSON-serialisable). Unpacks as ``value, evidence``."""

    value: str
    evidence: dict[str, Any]

    def __iter__(self) -> Iterator[Any]:
        return iter((self.value, self.evidence))


@dataclass(frozen=True)
class RepSample:
    """One steady repetition: when it ran (shared monotonic clock) and its decode speed."""

    rep: int
    t_start: float
    t_end: float
    tg_tps: float | None


@dataclass(frozen=True)
class ThrottleInputs:
    """Everything ``throttle_verdict`` looks at, as plain data.

    - ``reps``: the steady repetitions, any order.
    - ``series``: metric -> readings taken during the run (``temp.*_c``, ``cpufreq.policyN.*``,
      ``cpuN.freq_mhz``, ``gpu*.freq_mhz``/``gpuN.sm_clock_mhz``, ``gpuN.clock_event_reasons``,
      ``throttle.*``).
    - ``load_start``/``load_end``: the window in which the model worked (load, prefill, decode); when None,
      the span of ``reps``.
    - ``trip_points``: temperature metric -> ``[(trip type, °C), ...]``, as
      ``ThermalZonesCollector.trip_points`` gives them.
    - ``max_freq_mhz``: clock domain (``"cpu"``, ``"gpu"``, ``"cpu_cap.policyN"``) -> the reference maximum
      (the highest reading in comparable runs of the sweep, or the hardware maximum). A domain not given
      is compared with its own highest reading under load in this run.
    - ``gpu_in_use``: the run offloaded layers to a GPU (ngl > 0); GPU clocks and NVML reasons of a GPU the
      run did not use say nothing about it.
    """

    reps: Sequence[RepSample] = ()
    series: Mapping[str, SeriesLike] = field(default_factory=dict)
    load_start: float | None = None
    load_end: float | None = None
    trip_points: Mapping[str, Sequence[tuple[str, float]]] = field(default_factory=dict)
    max_freq_mhz: Mapping[str, float] = field(default_factory=dict)
    gpu_in_use: bool = False
    # metric -> role (``edgeprof.collectors.roles``); a metric not given here is classified by the
    # registered collectors (``edgeprof.collectors.registry.role_of``).
    roles: Mapping[str, MetricRole] = field(default_factory=dict)


# -- small helpers ----------------------------------------------------------------------------------------
def is_temperature(
    metric: str, gpu_in_use: bool = False, roles: Mapping[str, MetricRole] | None = None
) -> bool:
    """A real thermometer (not a fixed-value zone); one on a discrete GPU only when the run used it."""
    role = _role(metric, roles)
    if role is None or role.role != "temperature" or not role.thermometer:
        return False
    return gpu_in_use or not role.discrete


def _is_clock(role: MetricRole | None, gpu_in_use: bool = True) -> bool:
    """A CPU or GPU clock the throttle verdict judges (not a memory-controller clock, not a cap)."""
    if role is None or role.role != "clock" or role.domain not in ("cpu", "gpu"):
        return False
    return gpu_in_use or role.domain != "gpu"


def _points(series: SeriesLike) -> list[tuple[float, float]]:
    points = [(float(t), float(v)) for t, v in series if v is not None and math.isfinite(v)]
    points.sort(key=lambda p: p[0])
    return points


def _within(series: SeriesLike, t_start: float, t_end: float) -> list[tuple[float, float]]:
    return [(t, v) for t, v in _points(series) if t_start <= t <= t_end]


def _per_time_max(series_list: Iterable[SeriesLike]) -> list[tuple[float, float]]:
    """Pointwise max of several series (readings of one sampler tick share their timestamp)."""
    by_t: dict[float, float] = {}
    for series in series_list:
        for t, v in _points(series):
            by_t[t] = max(by_t[t], v) if t in by_t else v
    return sorted(by_t.items())


def _r(value: float | None, digits: int = 3) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits)


def _ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        mean_rank = (i + j) / 2.0 + 1.0
        for k in range(i, j + 1):
            ranks[order[k]] = mean_rank
        i = j + 1
    return ranks


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman rank correlation (Pearson on tie-averaged ranks); None for < 3 pairs or a constant side."""
    if len(xs) != len(ys) or len(xs) < 3:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    n = len(xs)
    mx, my = math.fsum(rx) / n, math.fsum(ry) / n
    sxx = math.fsum((a - mx) ** 2 for a in rx)
    syy = math.fsum((b - my) ** 2 for b in ry)
    if sxx <= 0 or syy <= 0:
        return None
    sxy = math.fsum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    return sxy / math.sqrt(sxx * syy)


def value_at(series: SeriesLike, t: float, tol_s: float = 2.0) -> float | None:
    """Linear interpolation at ``t`` between the readings either side; the nearest reading within
    ``tol_s`` when ``t`` lies beyond the readings; None if nothing is that close."""
    points = _points(series)
    if not points:
        return None
    before = [p for p in points if p[0] <= t]
    after = [p for p in points if p[0] >= t]
    if before and after:
        (ta, va), (tb, vb) = before[-1], after[0]
        if tb - ta > 2 * tol_s:
            return None
        return va if tb == ta else va + (vb - va) * (t - ta) / (tb - ta)
    nearest = before[-1] if before else after[0]
    return nearest[1] if abs(nearest[0] - t) <= tol_s else None


def _thirds(values: Sequence[float]) -> tuple[list[float], list[float]]:
    k = max(1, len(values) // 3)
    return list(values[:k]), list(values[-k:])


# -- throttle evidence ------------------------------------------------------------------------------------
def _hardware_flags(inputs: ThrottleInputs, t0: float, t1: float) -> tuple[list[str], dict[str, Any]]:
    flags: list[str] = []
    detail: dict[str, Any] = {}
    for metric in sorted(inputs.series):
        role = _role(metric, inputs.roles)
        kind = role.role if role is not None else None
        if kind == "throttle_flags":
            seen = 0
            for _t, v in _within(inputs.series[metric], t0, t1):
                seen |= int(v)
            names = decode_clock_event_reasons(seen)
            throttling = [name for name in names if name in NVML_THROTTLE_REASONS]
            entry: dict[str, Any] = {"reasons_seen": names, "throttle_reasons": throttling}
            if throttling and not inputs.gpu_in_use:
                entry["ignored"] = "the run did not offload to the GPU (ngl=0)"
            elif throttling:
                flags.append(f"{metric}: {', '.join(throttling)} during load")
            detail[metric] = entry
            continue
        if kind == "throttle_counter":
            points = _points(inputs.series[metric])
            if len(points) < 2:
                continue
            base = next((p for p in reversed(points) if p[0] <= t0), points[0])
            end = next((p for p in points if p[0] >= t1), points[-1])
            if end[0] <= base[0]:
                continue
            delta = counter_delta(base[1], end[1], None)
            detail[metric] = {"delta": delta, "from": base[1], "to": end[1]}
            if delta is not None and delta > 0:
                flags.append(f"{metric}: +{delta:g} throttle events during load")
    return flags, detail


def _clock_domains(
    series: Mapping[str, SeriesLike], gpu_in_use: bool, roles: Mapping[str, MetricRole] | None = None
) -> dict[str, list[str]]:
    of = {m: _role(m, roles) for m in sorted(series)}
    clocks = {m: r for m, r in of.items() if r is not None and _is_clock(r)}
    cpu_all = [m for m, r in clocks.items() if r.domain == "cpu"]
    cpu_clusters = [m for m in cpu_all if not clocks[m].per_core]
    domains: dict[str, list[str]] = {}
    if cpu_all:
        # The busiest CPU runs at the top clock: a pointwise max over policies follows it wherever the
        # scheduler puts the thread, and idle policies at a low clock do not read as a "drop". Single
        # cores' clocks stand in only where no per-cluster clock was read.
        domains["cpu"] = cpu_clusters or cpu_all
    gpus = [m for m, r in clocks.items() if r.domain == "gpu"]
    if gpus and gpu_in_use:
        domains["gpu"] = gpus
    for metric, role in of.items():
        if role is not None and role.role == "clock_cap":
            domains[f"cpu_cap.{role.domain or metric}"] = [metric]
    return domains


def _clocks(
    inputs: ThrottleInputs, t0: float, t1: float, th: ThrottleThresholds
) -> tuple[str, dict[str, Any]]:
    """('dropped'|'steady'|'unknown', per-domain detail)."""
    domains = _clock_domains(inputs.series, inputs.gpu_in_use, inputs.roles)
    detail: dict[str, Any] = {}
    evaluated = 0
    dropped: list[str] = []
    for name, metrics in domains.items():
        points = _within(_per_time_max(inputs.series[m] for m in metrics), t0, t1)
        entry: dict[str, Any] = {"metrics": metrics, "n": len(points)}
        detail[name] = entry
        if len(points) < th.min_load_samples:
            entry["status"] = "too_few_samples"
            continue
        values = [v for _, v in points]
        own_max = max(values)
        given = inputs.max_freq_mhz.get(name)
        if given is not None and given > 0:
            # The reference is at least what this run itself reached.
            ref, ref_source = max(given, own_max), "comparable runs of the sweep"
        else:
            ref, ref_source = own_max, "this run"
        if name.startswith("cpu_cap."):
            # A cap is a kernel decision, not a noisy reading: its lowest value under load is the evidence.
            observed = min(values)
            observed_what = "min cap under load"
        else:
            observed = median(_thirds(values)[1]) or 0.0
            observed_what = "median of the last third under load"
        fraction = observed / ref if ref > 0 else None
        entry.update(
            {
                "reference_mhz": _r(ref, 1),
                "reference_source": ref_source,
                "observed_mhz": _r(observed, 1),
                "observed": observed_what,
                "min_mhz": _r(min(values), 1),
                "max_mhz": _r(own_max, 1),
                "fraction": _r(fraction),
                "first_below_t": None,
            }
        )
        evaluated += 1
        if fraction is not None and fraction < th.clock_drop_fraction:
            entry["status"] = "dropped"
            limit = th.clock_drop_fraction * ref
            entry["first_below_t"] = next((t for t, v in points if v < limit), None)
            dropped.append(name)
        else:
            entry["status"] = "steady"
    if inputs.gpu_in_use and "gpu" not in domains:
        detail["gpu"] = {"status": "not_measured"}
    if dropped:
        return "dropped", detail
    if evaluated == 0:
        return "unknown", detail
    if inputs.gpu_in_use and "gpu" not in domains:
        return "unknown", detail  # the CPU held, but a GPU run's own clock was not seen
    return "steady", detail


def _lowest_throttling_trip(trips: Sequence[tuple[str, float]]) -> tuple[str, float] | None:
    candidates = [(kind, temp) for kind, temp in trips if kind in THROTTLING_TRIP_TYPES]
    return min(candidates, key=lambda kt: kt[1]) if candidates else None


def _temperatures(
    inputs: ThrottleInputs, t0: float, t1: float, th: ThrottleThresholds
) -> tuple[str, dict[str, Any]]:
    """('near_trip'|'rising'|'flat'|'unknown', per-zone detail)."""
    detail: dict[str, Any] = {}
    evaluated = 0
    near = rising = False
    for metric in sorted(inputs.series):
        if not is_temperature(metric, inputs.gpu_in_use, inputs.roles):
            continue
        points = _within(inputs.series[metric], t0, t1)
        entry: dict[str, Any] = {"n": len(points)}
        detail[metric] = entry
        if len(points) < th.min_load_samples:
            entry["status"] = "too_few_samples"
            continue
        evaluated += 1
        hottest = max(v for _, v in points)
        slope = slope_per_s(points)
        duration = points[-1][0] - points[0][0]
        rise = slope * duration if slope is not None else None
        entry.update(
            {
                "start_c": _r(points[0][1], 2),
                "max_c": _r(hottest, 2),
                "slope_c_per_min": _r(slope * 60.0 if slope is not None else None),
                "fitted_rise_c": _r(rise),
            }
        )
        trip = _lowest_throttling_trip(inputs.trip_points.get(metric, ()))
        if trip is not None:
            entry["trip"] = {"type": trip[0], "c": trip[1]}
            entry["margin_c"] = _r(trip[1] - hottest, 2)
        entry["near_trip"] = trip is not None and hottest >= trip[1] - th.near_trip_c
        entry["rising"] = (
            slope is not None
            and rise is not None
            and slope * 60.0 > th.rising_c_per_min
            and rise >= th.min_rise_c
        )
        near = near or bool(entry["near_trip"])
        rising = rising or bool(entry["rising"])
        entry["status"] = "near_trip" if entry["near_trip"] else "rising" if entry["rising"] else "flat"
    if near:
        return "near_trip", detail
    if rising:
        return "rising", detail
    return ("flat" if evaluated else "unknown"), detail


def _hottest_series(
    series: Mapping[str, SeriesLike], gpu_in_use: bool, roles: Mapping[str, MetricRole] | None = None
) -> list[tuple[float, float]]:
    return _per_time_max(s for m, s in series.items() if is_temperature(m, gpu_in_use, roles))


def _drift(inputs: ThrottleInputs, th: ThrottleThresholds) -> tuple[str, dict[str, Any]]:
    """('falling'|'steady'|'unknown', detail) from the steady reps' tg_tps in time order."""
    reps = sorted((r for r in inputs.reps if r.tg_tps is not None), key=lambda r: (r.t_start, r.rep))
    tps = [float(r.tg_tps) for r in reps if r.tg_tps is not None]
    detail: dict[str, Any] = {"n_reps": len(tps), "tg_tps": [_r(v, 2) for v in tps]}
    if len(tps) < th.min_steady_reps:
        detail["status"] = "too_few_reps"
        return "unknown", detail
    first, last = _thirds(tps)
    first_med, last_med = median(first), median(last)
    drop = 1.0 - last_med / first_med if first_med and last_med is not None else None
    hottest = _hottest_series(inputs.series, inputs.gpu_in_use, inputs.roles)
    temps = [value_at(hottest, (r.t_start + r.t_end) / 2.0) for r in reps]
    pairs = [(v, t) for v, t in zip(tps, temps, strict=True) if t is not None]
    rho_temp = spearman([p[0] for p in pairs], [p[1] for p in pairs]) if pairs else None
    rho_rep = spearman(list(range(len(tps))), tps)
    detail.update(
        {
            "first_third_median": _r(first_med, 2),
            "last_third_median": _r(last_med, 2),
            "drop_fraction": _r(drop, 4),
            "spearman_tps_vs_temp": _r(rho_temp),
            "spearman_tps_vs_rep": _r(rho_rep),
            "rep_temps_c": [_r(t, 2) for t in temps],
        }
    )
    falling = drop is not None and drop > th.tps_drop_fraction
    detail["status"] = "falling" if falling else "steady"
    return ("falling" if falling else "steady"), detail


def _load_window(inputs: ThrottleInputs) -> tuple[float, float] | None:
    t0, t1 = inputs.load_start, inputs.load_end
    if t0 is None or t1 is None:
        if not inputs.reps:
            return None
        t0 = min(r.t_start for r in inputs.reps) if t0 is None else t0
        t1 = max(r.t_end for r in inputs.reps) if t1 is None else t1
    return (t0, t1) if t1 >= t0 else None


def _load_sample_count(inputs: ThrottleInputs, t0: float, t1: float) -> int:
    times: set[float] = set()
    for metric, series in inputs.series.items():
        is_temp = is_temperature(metric, inputs.gpu_in_use, inputs.roles)
        is_clock = _is_clock(_role(metric, inputs.roles))
        if is_temp or is_clock:
            times.update(t for t, _ in _within(series, t0, t1))
    return len(times)


def _describe_clock(detail: dict[str, Any]) -> list[str]:
    out = []
    for name, entry in detail.items():
        if entry.get("status") == "dropped":
            out.append(
                f"{name} clock {entry['observed_mhz']:g} MHz under load = {100 * entry['fraction']:.0f}% of "
                f"{entry['reference_mhz']:g} MHz ({entry['reference_source']})"
            )
    return out


def _describe_temp(detail: dict[str, Any]) -> list[str]:
    out = []
    for metric, entry in detail.items():
        if entry.get("status") == "near_trip":
            trip = entry["trip"]
            out.append(
                f"{metric} reached {entry['max_c']:g} °C, {entry['margin_c']:g} °C below its {trip['type']} "
                f"trip at {trip['c']:g} °C"
            )
        elif entry.get("status") == "rising":
            out.append(f"{metric} rising {entry['slope_c_per_min']:g} °C/min to {entry['max_c']:g} °C")
    return out


def throttle_verdict(inputs: ThrottleInputs, thresholds: ThrottleThresholds | None = None) -> VerdictResult:
    """Judge one run: ``throttled``, ``not_throttled``, ``slowdown_not_thermal`` or ``inconclusive``.

    Decision, in order:

    1. a hardware flag (NVML heat/power reason with the GPU in use, x86 throttle counter up) -> throttled;
    2. a clock drop while a zone is near its trip point or rising -> throttled;
    3. tokens/s falling across steady reps:
       - temperatures flat -> slowdown_not_thermal (whatever the clocks did, heat did not cause it);
       - temperatures up but every measured clock held -> slowdown_not_thermal (no throttling mechanism);
       - temperatures up, clocks not measured, tg_tps rank-correlated with temperature -> throttled;
       - otherwise -> inconclusive;
    4. too few steady reps or readings under load -> inconclusive;
    5. otherwise not_throttled (with notes: near a trip point, or a clock drop without heat).
    """
    th = thresholds or ThrottleThresholds()
    window = _load_window(inputs)
    evidence: dict[str, Any] = {"thresholds": asdict(th), "signals": [], "reasons": [], "notes": []}
    if window is None:
        evidence["reasons"].append("no load window: no steady reps and no load phases")
        return VerdictResult("inconclusive", evidence)
    t0, t1 = window
    n_load = _load_sample_count(inputs, t0, t1)
    flags, hw_detail = _hardware_flags(inputs, t0, t1)
    clock_status, clock_detail = _clocks(inputs, t0, t1, th)
    temp_status, temp_detail = _temperatures(inputs, t0, t1, th)
    drift_status, drift_detail = _drift(inputs, th)
    evidence.update(
        {
            "load_window": {"t_start": t0, "t_end": t1, "duration_s": _r(t1 - t0)},
            "samples_under_load": n_load,
            "steady_reps": drift_detail["n_reps"],
            "hardware": {"flags": flags, "detail": hw_detail},
            "clocks": {"status": clock_status, "domains": clock_detail},
            "temperature": {"status": temp_status, "zones": temp_detail},
            "drift": drift_detail | {"status": drift_status},
        }
    )
    signals: list[str] = evidence["signals"]
    reasons: list[str] = evidence["reasons"]
    notes: list[str] = evidence["notes"]
    heat = temp_status in ("near_trip", "rising")
    clock_text, temp_text = _describe_clock(clock_detail), _describe_temp(temp_detail)
    if flags:
        signals.append("hardware")
        reasons.extend(flags)
    if clock_status == "dropped" and heat:
        signals += ["clock", "temperature"]
        reasons += clock_text + temp_text
    drift_text = ""
    if drift_status == "falling":
        drift_text = (
            f"steady tg_tps fell {100 * drift_detail['drop_fraction']:.1f}% "
            f"({drift_detail['first_third_median']:g} -> {drift_detail['last_third_median']:g} t/s, "
            "first vs last third of the reps)"
        )
        rho = drift_detail.get("spearman_tps_vs_temp")
        if rho is not None:
            drift_text += f"; Spearman(tg_tps, temperature) = {rho:.2f}"
    if signals:
        if drift_status == "falling":
            signals.append("drift")
            reasons.append(drift_text)
        return VerdictResult("throttled", evidence)

    if drift_status == "falling":
        rho = drift_detail.get("spearman_tps_vs_temp")
        if temp_status == "flat":
            reasons.append(drift_text)
            reasons.append("temperatures stayed flat under load: heat did not cause the slowdown")
            if clock_status == "dropped":
                reasons.append("clocks fell without heat (power cap or governor?): " + "; ".join(clock_text))
            return VerdictResult("slowdown_not_thermal", evidence)
        if heat and clock_status == "steady":
            reasons.append(drift_text)
            reasons.append("temperatures rose but every measured clock held: not clock throttling")
            return VerdictResult("slowdown_not_thermal", evidence)
        if heat and clock_status == "unknown" and rho is not None and rho <= -th.rank_correlation:
            signals += ["drift", "temperature"]
            reasons.append(drift_text)
            reasons += temp_text
            reasons.append("clocks not measured; speed falls as temperature rises")
            return VerdictResult("throttled", evidence)
        reasons.append(drift_text)
        reasons.append(
            "not enough telemetry to attribute the slowdown"
            if temp_status == "unknown"
            else "temperature rose but the clocks were not measured and speed does not track temperature"
        )
        return VerdictResult("inconclusive", evidence)

    if drift_status == "unknown" or n_load < th.min_load_samples:
        if drift_status == "unknown":
            reasons.append(
                f"{drift_detail['n_reps']} steady rep(s) with tg_tps; "
                f"need {th.min_steady_reps} to see a drift"
            )
        if n_load < th.min_load_samples:
            reasons.append(
                f"{n_load} temperature/clock reading(s) under load; need {th.min_load_samples} "
                "(run longer or sample faster)"
            )
        return VerdictResult("inconclusive", evidence)

    reasons.append("no hardware throttle flag, no clock drop under heat, steady tg_tps across reps")
    if temp_status == "unknown":
        notes.append("no temperature sensor: judged from clocks and tokens/s only")
    if temp_status == "near_trip":
        notes.append("close to a trip point without throttling yet: " + "; ".join(temp_text))
    if clock_status == "dropped":
        notes.append("clock below reference without heat (governor or power cap?): " + "; ".join(clock_text))
    return VerdictResult("not_throttled", evidence)


# -- stability -----------------------------------------------------------------------------------------
def stability(values: Iterable[float | None], thresholds: StabilityThresholds | None = None) -> VerdictResult:
    """``stable``/``unstable`` (or ``inconclusive`` for < 3 values), pyperf style.

    Unstable when the coefficient of variation (sample stdev / mean) exceeds 10 %, or one value lies
    more than 25 % above the median (max/median > 1.25) or as far below it (min/median < 1/1.25).
    """
    th = thresholds or StabilityThresholds()
    xs = [float(v) for v in values if v is not None and math.isfinite(v)]
    evidence: dict[str, Any] = {"n": len(xs), "thresholds": asdict(th), "reasons": []}
    if len(xs) < th.min_n:
        evidence["reasons"].append(f"{len(xs)} value(s); need {th.min_n} to judge the spread")
        return VerdictResult("inconclusive", evidence)
    mean = math.fsum(xs) / len(xs)
    stdev = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
    med = median(xs) or 0.0
    cv = stdev / mean if mean > 0 else None
    hi = max(xs) / med if med > 0 else None
    lo = min(xs) / med if med > 0 else None
    evidence.update(
        {
            "mean": _r(mean, 4),
            "stdev": _r(stdev, 4),
            "cv": _r(cv, 4),
            "median": _r(med, 4),
            "min": _r(min(xs), 4),
            "max": _r(max(xs), 4),
            "max_over_median": _r(hi, 4),
            "min_over_median": _r(lo, 4),
        }
    )
    reasons: list[str] = evidence["reasons"]
    if cv is None or hi is None or lo is None:
        reasons.append("mean or median not positive: spread cannot be judged")
        return VerdictResult("inconclusive", evidence)
    if cv > th.max_cv:
        reasons.append(f"stdev is {100 * cv:.1f}% of the mean (limit {100 * th.max_cv:.0f}%)")
    if hi > th.max_over_median:
        reasons.append(f"max is {hi:.2f}x the median (limit {th.max_over_median:.2f}x)")
    if lo < 1.0 / th.max_over_median:
        reasons.append(f"min is {lo:.2f}x the median (limit {1.0 / th.max_over_median:.2f}x)")
    return VerdictResult("unstable" if reasons else "stable", evidence)


# -- database ------------------------------------------------------------------------------------------
def trip_points_from(collectors: Iterable[Any]) -> dict[str, list[tuple[str, float]]]:
    """Trip points of the ``sysfs_thermal`` collector among ``collectors`` ({} if none or unreadable)."""
    for collector in collectors:
        if getattr(collector, "name", None) == "sysfs_thermal" and hasattr(collector, "trip_points"):
            try:
                return dict(collector.trip_points())
            except Exception:  # noqa: BLE001 - no trip points is a weaker verdict, never a failed run
                return {}
    return {}


def stored_roles(session: Session, sweep_id: int) -> dict[str, MetricRole]:
    """Metric roles as the collectors declared them when the sweep ran (stored with their status), so a
    sweep measured with a collector this installation lacks is still judged by what its metrics were."""
    from edgeprof.storage.models import CollectorStatus

    out: dict[str, MetricRole] = {}
    query = select(CollectorStatus.metrics_json).where(CollectorStatus.sweep_id == sweep_id)
    for raw in session.scalars(query):
        try:
            entries = json.loads(raw)
        except (TypeError, ValueError):
            continue
        for entry in entries if isinstance(entries, list) else []:
            role = entry.get("role") if isinstance(entry, dict) else None
            parsed = MetricRole.from_json(role) if isinstance(role, dict) else None
            if parsed is not None:
                out.setdefault(str(entry.get("name")), parsed)
    return out


def stored_trip_points(session: Session, sweep_id: int) -> dict[str, list[tuple[str, float]]]:
    """Trip points stored with the sweep's collector status: a later ``analyse`` needs no live device."""
    from edgeprof.storage.models import CollectorStatus

    out: dict[str, list[tuple[str, float]]] = {}
    for raw in session.scalars(
        select(CollectorStatus.metrics_json).where(
            CollectorStatus.sweep_id == sweep_id, CollectorStatus.name == "sysfs_thermal"
        )
    ):
        try:
            entries = json.loads(raw)
        except ValueError:
            continue
        for entry in entries if isinstance(entries, list) else []:
            trips = entry.get("trip_points") if isinstance(entry, dict) else None
            if trips:
                out[str(entry["name"])] = [(str(t), float(c)) for t, c in trips]
    return out


def _load_span(phases: Sequence[Phase]) -> tuple[float, float] | None:
    working = [p for p in phases if p.name in LOAD_PHASES]
    if not working:
        return None
    return min(p.t_start_mono for p in working), max(p.t_end_mono for p in working)


def _series_of(
    session: Session, run_ids: Sequence[int], metrics: Sequence[str] | None = None
) -> dict[int, dict[str, list[tuple[float, float | None]]]]:
    out: dict[int, dict[str, list[tuple[float, float | None]]]] = {}
    owner: dict[tuple[int, str], str] = {}
    for r in read_samples(session, None, metrics=metrics, run_ids=run_ids):
        run_id, metric, t, value, source = r.run_id, r.metric, r.t_mono, r.value, r.source
        if run_id is None:
            continue
        # Two collectors may report one metric (tegrastats and jtop both give temp.* on a Jetson): keep
        # the first source's readings only, as Telemetry does, so two samplers are never interleaved.
        if owner.setdefault((run_id, metric), source) != source:
            continue
        out.setdefault(run_id, {}).setdefault(metric, []).append((t, value))
    return out


def reference_clocks(session: Session, run: Run) -> dict[str, float]:
    """Reference maxima per clock domain for ``run``, from the sweep (computed by SQL aggregates: cheap even
    when the sweep holds millions of samples).

    - ``cpu``/``gpu``: the highest reading under load (load, prefill and decode phases) in runs of the sweep
      with the same thread count and GPU offload (the same load shape), this run included. Not the
      hardware maximum: an x86 CPU's ``cpuinfo_max_freq`` is a single-core turbo that an all-core load never
      reaches, and a Jetson GPU's DVFS follows utilisation; comparing with them would call every run
      throttled. (The pointwise max over policies that ``throttle_verdict`` uses has the same maximum as
      the readings themselves, so a plain MAX is the right aggregate.)
    - ``cpu_cap.policyN``: the highest cap (scaling_max_freq) seen anywhere in the sweep, so a power mode
      that caps clocks for the whole sweep is not a "drop", but a cap lowered mid-sweep is.
    """
    own_metrics = sorted(sample_metrics(session, run.id))
    domains = _clock_domains({m: () for m in own_metrics}, gpu_in_use=True)
    if not domains:
        return {}
    sweep_runs = select(Run.id).where(Run.sweep_id == run.sweep_id)
    same_shape = sweep_runs.where(Run.n_threads == run.n_threads, Run.n_gpu_layers == run.n_gpu_layers)
    spans_q = (
        select(Phase.run_id, func.min(Phase.t_start_mono), func.max(Phase.t_end_mono))
        .where(Phase.run_id.in_(same_shape), Phase.name.in_(LOAD_PHASES))
        .group_by(Phase.run_id)
    )
    spans = {int(r): (float(a), float(b)) for r, a, b in session.execute(spans_q)}
    all_runs = list(session.scalars(sweep_runs))
    refs: dict[str, float] = {}
    for name, metrics in domains.items():
        # storage.samples.max_value: numpy over the blocks (cached per block), no rows built
        if name.startswith("cpu_cap."):
            top = max_value(session, all_runs, metrics)
        else:
            top = max_value(session, list(spans), metrics, spans)
        if top is not None and math.isfinite(top) and top > 0:
            refs[name] = float(top)
    return refs


def inputs_for_run(
    session: Session, run: Run, trip_points: Mapping[str, Sequence[tuple[str, float]]] | None = None
) -> ThrottleInputs:
    """Gather a run's throttle inputs from the database."""
    phases = list(session.scalars(select(Phase).where(Phase.run_id == run.id)))
    steady = list(
        session.scalars(select(Measurement).where(Measurement.run_id == run.id, Measurement.kind == "steady"))
    )
    reps = [
        RepSample(m.rep, m.t_start_mono, m.t_end_mono, m.tg_tps)
        for m in steady
        if m.t_start_mono is not None and m.t_end_mono is not None
    ]
    span = _load_span(phases)
    if span is None and reps:
        span = (min(r.t_start for r in reps), max(r.t_end for r in reps))
    series = _series_of(session, [run.id]).get(run.id, {})
    return ThrottleInputs(
        reps=reps,
        series=series,
        load_start=span[0] if span else None,
        load_end=span[1] if span else None,
        trip_points=dict(trip_points or {}),
        max_freq_mhz=reference_clocks(session, run),
        gpu_in_use=gpu_in_use(run),
        roles=stored_roles(session, run.sweep_id),
    )


def analyse_run(
    session: Session,
    run_id: int,
    trip_points: Mapping[str, Sequence[tuple[str, float]]] | None = None,
    thresholds: ThrottleThresholds | None = None,
    stability_thresholds: StabilityThresholds | None = None,
    *,
    commit: bool = True,
) -> list[Verdict]:
    """Judge a stored run (throttle from its telemetry, stability of its steady tg_tps), replace its
    ``throttle``/``stability`` verdict rows with the new ones and return them (committed unless
    ``commit`` is False)."""
    run = session.get(Run, run_id)
    if run is None:
        raise ValueError(f"no run with id {run_id}")
    if trip_points is None:
        trip_points = stored_trip_points(session, run.sweep_id)
    inputs = inputs_for_run(session, run, trip_points)
    throttle = throttle_verdict(inputs, thresholds)
    steady = sorted(inputs.reps, key=lambda r: r.rep)
    stable = stability([r.tg_tps for r in steady], stability_thresholds)
    stable.evidence["metric"] = "tg_tps"
    pp = [
        m.pp_tps
        for m in session.scalars(
            select(Measurement).where(Measurement.run_id == run.id, Measurement.kind == "steady")
        )
    ]
    pp_check = stability(pp, stability_thresholds)
    contention = interference_verdict(
        [IRep(r.rep, r.t_start, r.t_end) for r in steady], inputs.series, inputs.roles, run.n_threads
    )
    stable.evidence["pp_tps"] = {"value": pp_check.value} | {
        k: pp_check.evidence.get(k) for k in ("n", "cv", "max_over_median", "min_over_median")
    }
    session.execute(delete(Verdict).where(Verdict.run_id == run_id, Verdict.kind.in_(VERDICT_KINDS)))
    rows = [
        Verdict(
            run_id=run_id,
            kind=kind,
            value=result.value,
            evidence_json=json.dumps(result.evidence, allow_nan=False, default=str),
        )
        for kind, result in (
            ("throttle", throttle),
            ("stability", stable),
            ("interference", VerdictResult(*contention)),
        )
    ]
    session.add_all(rows)
    if commit:
        session.commit()
    else:
        session.flush()
    return rows


def analyse_sweep(
    session: Session,
    sweep_id: int,
    trip_points: Mapping[str, Sequence[tuple[str, float]]] | None = None,
    thresholds: ThrottleThresholds | None = None,
) -> dict[int, list[Verdict]]:
    """``analyse_run`` for every run of a sweep (for sweeps recorded before verdicts existed)."""
    out: dict[int, list[Verdict]] = {}
    for run_id in session.scalars(select(Run.id).where(Run.sweep_id == sweep_id).order_by(Run.id)):
        out[run_id] = analyse_run(session, run_id, trip_points, thresholds, commit=False)
    session.commit()
    return out


# -- aggregation for reports -----------------------------------------------------------------------------
# Worst first: what a config's verdict is when its runs disagree.
_SEVERITY: dict[str, tuple[str, ...]] = {
    "throttle": ("throttled", "slowdown_not_thermal", "inconclusive", "not_throttled"),
    "stability": ("unstable", "inconclusive", "stable"),
    "interference": ("contended", "inconclusive", "quiet"),
}


def config_verdict(verdicts: Iterable[Verdict | VerdictLikeRow]) -> dict[str, str | None]:
    """One value per kind for a config measured by several runs (attempts): the worst of them."""
    out: dict[str, str | None] = {kind: None for kind in VERDICT_KINDS}
    for v in verdicts:
        order = _SEVERITY.get(v.kind)
        if order is None:
            continue
        cur = out.get(v.kind)
        rank = order.index(v.value) if v.value in order else len(order)
        if cur is None or rank < (order.index(cur) if cur in order else len(order)):
            out[v.kind] = v.value
    return out


@dataclass(frozen=True)
class VerdictLikeRow:
    """A verdict not (yet) stored: the same fields ``config_verdict`` reads from ``Verdict``."""

    kind: str
    value: str
    evidence_json: str = "{}"


def verdicts_by_run(session: Session, run_ids: Sequence[int]) -> dict[int, dict[str, Verdict]]:
    """run id -> kind -> its stored verdict (latest row per kind)."""
    out: dict[int, dict[str, Verdict]] = {}
    if not run_ids:
        return out
    for v in session.scalars(select(Verdict).where(Verdict.run_id.in_(run_ids)).order_by(Verdict.id)):
        out.setdefault(v.run_id, {})[v.kind] = v
    return out


def summary_line(verdict: Verdict | VerdictLikeRow) -> str:
    """``value: first reasons`` for tables and HTML."""
    try:
        evidence = json.loads(verdict.evidence_json)
    except ValueError:
        evidence = {}
    reasons = evidence.get("reasons") if isinstance(evidence, dict) else None
    text = "; ".join(str(r) for r in reasons[:3]) if isinstance(reasons, list) else ""
    return f"{verdict.value}: {text}" if text else verdict.value


def attach_verdicts(session: Session, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add ``throttle_verdict`` and ``stability_verdict`` (None where not judged) to report rows in place."""
    found = verdicts_by_run(session, [int(r["run_id"]) for r in rows])
    for row in rows:
        mine = found.get(int(row["run_id"]), {})
        row["throttle_verdict"] = mine["throttle"].value if "throttle" in mine else None
        row["stability_verdict"] = mine["stability"].value if "stability" in mine else None
        row["interference_verdict"] = mine["interference"].value if "interference" in mine else None
    return rows
