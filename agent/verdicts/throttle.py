"""The throttle verdict: was a run held down by heat or power?

``throttle_verdict`` is pure: it takes plain data (series of ``(t_mono, value)`` readings, per-rep tokens/s,
the roles of the metrics) and returns a value with the evidence behind it, so every rule can be checked on a
synthetic series whose answer is known. Evidence comes in three kinds, strongest first:

(a) hardware flags: a flag word's throttle bit set while the model ran (NVML's clock-event reasons for heat
    or power, a Raspberry Pi firmware's capping/throttling bits: each word decoded by its source's decoder,
    ``edgeprof.collectors.flags``), or an x86 thermal-throttle counter that went up (the silicon saying it
    throttled, no inference needed). Each flag names its cause: heat, power, or under-voltage (a sagging
    supply, never called heat);
(b) clocks: a CPU/GPU clock under load below a fraction of the highest this clock reached in comparable runs
    of the sweep (or a cpufreq cap lowered), *while* a thermal zone was near its trip point or rising;
(c) drift: steady tokens/s falling across repetitions (last third vs first third, and the rank correlation
    with temperature).

A slowdown the heat cannot explain (flat temperatures, or clocks that held) is ``slowdown_not_thermal``:
something else (a background task, memory pressure, a power cap) is at work. Too little data to say
anything either way is ``inconclusive`` — never a guess of "fine".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from edgeprof.collectors import MetricRole
from edgeprof.collectors.evidence import Evidence, judge_evidence
from edgeprof.stats import median
from edgeprof.telemetry import SeriesLike, slope_per_s
from edgeprof.verdicts.hardware_signals import hardware_flags, measured_clocks, requested_not_ran
from edgeprof.verdicts.result import VerdictResult, rounded
from edgeprof.verdicts.series import per_time_max, spearman, thirds, value_at, within

ThrottleValue = Literal["throttled", "not_throttled", "inconclusive", "slowdown_not_thermal"]

# NVML clock-event ("throttle") reasons that mean "clocks held down by heat or power": the bits NVML's
# decoder marks ``throttles`` (``edgeprof.collectors.nvml.CLOCK_EVENT_FLAGS``). GpuIdle, application-clock
# settings, SyncBoost and display clocks are normal operation, not throttling.
NVML_THROTTLE_REASONS = frozenset(
    {"SwPowerCap", "HwSlowdown", "SwThermalSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown"}
)

# Trip types at which the kernel starts taking clock away ("active" trips only switch fans on, and
# "critical" shuts the board down, far above where throttling starts).
THROTTLING_TRIP_TYPES = ("passive", "hot")


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
    - ``roles``: metric -> what it is, as its collector declared it (``edgeprof.collectors.roles``; for a
      stored run ``edgeprof.verdicts.run_roles``). A metric without a role is no evidence.
    """

    reps: Sequence[RepSample] = ()
    series: Mapping[str, SeriesLike] = field(default_factory=dict)
    load_start: float | None = None
    load_end: float | None = None
    trip_points: Mapping[str, Sequence[tuple[str, float]]] = field(default_factory=dict)
    max_freq_mhz: Mapping[str, float] = field(default_factory=dict)
    gpu_in_use: bool = False
    roles: Mapping[str, MetricRole] = field(default_factory=dict)


# -- what a metric is --------------------------------------------------------------------------------------
def is_temperature(metric: str, gpu_in_use: bool, roles: Mapping[str, MetricRole]) -> bool:
    """A real thermometer (not a fixed-value zone); one on a discrete GPU only when the run used it."""
    role = roles.get(metric)
    if role is None or role.role != "temperature" or not role.thermometer:
        return False
    return gpu_in_use or not role.discrete


def is_clock(role: MetricRole | None, gpu_in_use: bool = True) -> bool:
    """A CPU or GPU clock the throttle verdict judges (not a memory-controller clock, not a cap, not a
    clock that never moved: ``edgeprof.collectors.evidence``)."""
    if role is None or role.role != "clock" or role.domain not in ("cpu", "gpu") or not role.observable:
        return False
    return gpu_in_use or role.domain != "gpu"


def is_cap_domain(name: str) -> bool:
    """A domain of ``clock_domains`` that is a cap (``cpu_cap.policy0``, ``gpu_cap.gpu_devfreq``)."""
    return name.startswith(("cpu_cap.", "gpu_cap."))


def _domain_clocks(
    of: Mapping[str, MetricRole | None], clocks: Mapping[str, MetricRole], domain: str
) -> list[str]:
    """The judged clocks of ``domain``: where the hardware measured the clock that ran (a Pi's firmware),
    those alone, even when none of them can be judged (the kernel's requested figure is still not what
    ran); otherwise every clock of the domain."""
    declared = {m: r for m, r in of.items() if r is not None and r.role == "clock"}
    if measured_clocks(declared, domain):
        return measured_clocks(clocks, domain)
    return [m for m, r in clocks.items() if r.domain == domain]


def clock_domains(
    metrics: Sequence[str], gpu_in_use: bool, roles: Mapping[str, MetricRole]
) -> dict[str, list[str]]:
    """Clock domain (``cpu``, ``gpu``, ``cpu_cap.<policy>``, ``gpu_cap.<node>``) -> the metrics that give
    its clock."""
    of = {m: roles.get(m) for m in sorted(metrics)}
    clocks = {m: r for m, r in of.items() if r is not None and is_clock(r)}
    cpu_all = _domain_clocks(of, clocks, "cpu")
    cpu_clusters = [m for m in cpu_all if not clocks[m].per_core]
    domains: dict[str, list[str]] = {}
    if cpu_all:
        # The busiest CPU runs at the top clock: a pointwise max over policies follows it wherever the
        # scheduler puts the thread, and idle policies at a low clock do not read as a "drop". Single
        # cores' clocks stand in only where no per-cluster clock was read.
        domains["cpu"] = cpu_clusters or cpu_all
    gpus = _domain_clocks(of, clocks, "gpu")
    if gpus and gpu_in_use:
        domains["gpu"] = gpus
    for metric, role in of.items():
        if role is not None and role.role == "clock_cap":
            if role.component == "gpu":
                if gpu_in_use:
                    domains[f"gpu_cap.{role.domain or metric}"] = [metric]
            else:
                domains[f"cpu_cap.{role.domain or metric}"] = [metric]
    return domains


# -- (b) clocks and temperatures ---------------------------------------------------------------------------
def _clock_domain(
    name: str, values: list[float], given: float | None, th: ThrottleThresholds
) -> tuple[dict[str, Any], float]:
    """The figures of one clock domain's readings under load against its reference: (entry, reference)."""
    own_max = max(values)
    if given is not None and given > 0:
        # The reference is at least what this run itself reached.
        ref, ref_source = max(given, own_max), "comparable runs of the sweep"
    else:
        ref, ref_source = own_max, "this run"
    if is_cap_domain(name):
        # A cap is a kernel decision, not a noisy reading: its lowest value under load is the evidence.
        observed, observed_what = min(values), "min cap under load"
    else:
        observed, observed_what = median(thirds(values)[1]) or 0.0, "median of the last third under load"
    fraction = observed / ref if ref > 0 else None
    entry = {
        "reference_mhz": rounded(ref, 1),
        "reference_source": ref_source,
        "observed_mhz": rounded(observed, 1),
        "observed": observed_what,
        "min_mhz": rounded(min(values), 1),
        "max_mhz": rounded(own_max, 1),
        "fraction": rounded(fraction),
        "first_below_t": None,
        "status": "dropped" if fraction is not None and fraction < th.clock_drop_fraction else "steady",
    }
    return entry, ref


def _clocks(
    inputs: ThrottleInputs, t0: float, t1: float, th: ThrottleThresholds
) -> tuple[str, dict[str, Any]]:
    """('dropped'|'steady'|'unknown', per-domain detail)."""
    domains = clock_domains(list(inputs.series), inputs.gpu_in_use, inputs.roles)
    detail: dict[str, Any] = {}
    evaluated = 0
    dropped: list[str] = []
    for name, metrics in domains.items():
        readings = within(per_time_max(inputs.series[m] for m in metrics), t0, t1)
        entry: dict[str, Any] = {"metrics": metrics, "n": len(readings)}
        detail[name] = entry
        if len(readings) < th.min_load_samples:
            entry["status"] = "too_few_samples"
            continue
        figures, ref = _clock_domain(name, [v for _, v in readings], inputs.max_freq_mhz.get(name), th)
        entry.update(figures)
        evaluated += 1
        if entry["status"] == "dropped":
            limit = th.clock_drop_fraction * ref
            entry["first_below_t"] = next((t for t, v in readings if v < limit), None)
            dropped.append(name)
    gpu_unseen = inputs.gpu_in_use and "gpu" not in domains
    if gpu_unseen:
        detail["gpu"] = {"status": "not_measured"}
    if dropped:
        return "dropped", detail
    if evaluated == 0 or gpu_unseen:  # (a GPU run whose own clock was not seen: the CPU holding says little)
        return "unknown", detail
    return "steady", detail


def _lowest_throttling_trip(trips: Sequence[tuple[str, float]]) -> tuple[str, float] | None:
    candidates = [(kind, temp) for kind, temp in trips if kind in THROTTLING_TRIP_TYPES]
    return min(candidates, key=lambda kt: kt[1]) if candidates else None


def zone_figures(
    readings: list[tuple[float, float]], trips: Sequence[tuple[str, float]], th: ThrottleThresholds
) -> dict[str, Any]:
    """The figures of one thermometer's readings under load: peak, trend and margin to its trip point."""
    hottest = max(v for _, v in readings)
    slope = slope_per_s(readings)
    rise = slope * (readings[-1][0] - readings[0][0]) if slope is not None else None
    entry: dict[str, Any] = {
        "n": len(readings),
        "start_c": rounded(readings[0][1], 2),
        "max_c": rounded(hottest, 2),
        "slope_c_per_min": rounded(slope * 60.0 if slope is not None else None),
        "fitted_rise_c": rounded(rise),
    }
    trip = _lowest_throttling_trip(trips)
    if trip is not None:
        entry["trip"] = {"type": trip[0], "c": trip[1]}
        entry["margin_c"] = rounded(trip[1] - hottest, 2)
    entry["near_trip"] = trip is not None and hottest >= trip[1] - th.near_trip_c
    entry["rising"] = (
        slope is not None
        and rise is not None
        and slope * 60.0 > th.rising_c_per_min
        and rise >= th.min_rise_c
    )
    entry["status"] = "near_trip" if entry["near_trip"] else "rising" if entry["rising"] else "flat"
    return entry


def _temperatures(
    inputs: ThrottleInputs, t0: float, t1: float, th: ThrottleThresholds
) -> tuple[str, dict[str, Any]]:
    """('near_trip'|'rising'|'flat'|'unknown', per-zone detail)."""
    detail: dict[str, Any] = {}
    for metric in sorted(inputs.series):
        if not is_temperature(metric, inputs.gpu_in_use, inputs.roles):
            continue
        readings = within(inputs.series[metric], t0, t1)
        if len(readings) < th.min_load_samples:
            detail[metric] = {"n": len(readings), "status": "too_few_samples"}
        else:
            detail[metric] = zone_figures(readings, inputs.trip_points.get(metric, ()), th)
    judged = [e for e in detail.values() if e["status"] != "too_few_samples"]
    if any(e["near_trip"] for e in judged):
        return "near_trip", detail
    if any(e["rising"] for e in judged):
        return "rising", detail
    return ("flat" if judged else "unknown"), detail


# -- (c) drift ---------------------------------------------------------------------------------------------
def _drift(inputs: ThrottleInputs, th: ThrottleThresholds) -> tuple[str, dict[str, Any]]:
    """('falling'|'steady'|'unknown', detail) from the steady reps' tg_tps in time order."""
    reps = sorted((r for r in inputs.reps if r.tg_tps is not None), key=lambda r: (r.t_start, r.rep))
    tps = [float(r.tg_tps) for r in reps if r.tg_tps is not None]
    detail: dict[str, Any] = {"n_reps": len(tps), "tg_tps": [rounded(v, 2) for v in tps]}
    if len(tps) < th.min_steady_reps:
        detail["status"] = "too_few_reps"
        return "unknown", detail
    first, last = thirds(tps)
    first_med, last_med = median(first), median(last)
    drop = 1.0 - last_med / first_med if first_med and last_med is not None else None
    hottest = per_time_max(
        s for m, s in inputs.series.items() if is_temperature(m, inputs.gpu_in_use, inputs.roles)
    )
    temps = [value_at(hottest, (r.t_start + r.t_end) / 2.0) for r in reps]
    pairs = [(v, t) for v, t in zip(tps, temps, strict=True) if t is not None]
    rho_temp = spearman([p[0] for p in pairs], [p[1] for p in pairs]) if pairs else None
    detail.update(
        {
            "first_third_median": rounded(first_med, 2),
            "last_third_median": rounded(last_med, 2),
            "drop_fraction": rounded(drop, 4),
            "spearman_tps_vs_temp": rounded(rho_temp),
            "spearman_tps_vs_rep": rounded(spearman(list(range(len(tps))), tps)),
            "rep_temps_c": [rounded(t, 2) for t in temps],
        }
    )
    falling = drop is not None and drop > th.tps_drop_fraction
    detail["status"] = "falling" if falling else "steady"
    return ("falling" if falling else "steady"), detail


# -- the window and the readings in it ---------------------------------------------------------------------
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
        if is_temp or is_clock(inputs.roles.get(metric)):
            times.update(t for t, _ in within(series, t0, t1))
    return len(times)


# -- the decision ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Signals:
    """What the three kinds of evidence said over one load window."""

    n_load: int
    flags: list[str]
    hardware: dict[str, Any]
    clock_status: str
    clocks: dict[str, Any]
    temp_status: str
    temps: dict[str, Any]
    drift_status: str
    drift: dict[str, Any]

    @property
    def heat(self) -> bool:
        return self.temp_status in ("near_trip", "rising")

    def flag_causes(self) -> list[str]:
        """The causes the flags that fired name (heat, power, under-voltage)."""
        return sorted(
            {c for e in self.hardware.values() if "ignored" not in e and e.get("throttle_reasons")
             for c in e.get("causes", ())}
        )

    def under_voltage(self) -> list[str]:
        """The flag words that saw the supply sag during load."""
        return [m for m, e in self.hardware.items() if e.get("under_voltage")]

    def power_notes(self) -> list[str]:
        words = self.under_voltage()
        if not words:
            return []
        return [
            f"under-voltage during load ({', '.join(words)}): the power supply sagged; a power fault, "
            "not heat"
        ]

    def clock_text(self) -> list[str]:
        return [
            f"{name} clock {e['observed_mhz']:g} MHz under load = {100 * e['fraction']:.0f}% of "
            f"{e['reference_mhz']:g} MHz ({e['reference_source']})"
            for name, e in self.clocks.items()
            if e.get("status") == "dropped"
        ]

    def temp_text(self) -> list[str]:
        out = []
        for metric, e in self.temps.items():
            if e.get("status") == "near_trip":
                trip = e["trip"]
                out.append(
                    f"{metric} reached {e['max_c']:g} °C, {e['margin_c']:g} °C below its {trip['type']} "
                    f"trip at {trip['c']:g} °C"
                )
            elif e.get("status") == "rising":
                out.append(f"{metric} rising {e['slope_c_per_min']:g} °C/min to {e['max_c']:g} °C")
        return out

    def drift_text(self) -> str:
        if self.drift_status != "falling":
            return ""
        d = self.drift
        text = (
            f"steady tg_tps fell {100 * d['drop_fraction']:.1f}% "
            f"({d['first_third_median']:g} -> {d['last_third_median']:g} t/s, "
            "first vs last third of the reps)"
        )
        rho = d.get("spearman_tps_vs_temp")
        return text + (f"; Spearman(tg_tps, temperature) = {rho:.2f}" if rho is not None else "")


def _gather(inputs: ThrottleInputs, t0: float, t1: float, th: ThrottleThresholds) -> _Signals:
    flags, hardware = hardware_flags(inputs.series, inputs.roles, inputs.gpu_in_use, t0, t1)
    clock_status, clocks = _clocks(inputs, t0, t1, th)
    temp_status, temps = _temperatures(inputs, t0, t1, th)
    drift_status, drift = _drift(inputs, th)
    n_load = _load_sample_count(inputs, t0, t1)
    return _Signals(n_load, flags, hardware, clock_status, clocks, temp_status, temps, drift_status, drift)


def _evidence_of(sig: _Signals, t0: float, t1: float) -> dict[str, Any]:
    return {
        "load_window": {"t_start": t0, "t_end": t1, "duration_s": rounded(t1 - t0)},
        "samples_under_load": sig.n_load,
        "steady_reps": sig.drift["n_reps"],
        "hardware": {"flags": sig.flags, "detail": sig.hardware},
        "clocks": {"status": sig.clock_status, "domains": sig.clocks},
        "temperature": {"status": sig.temp_status, "zones": sig.temps},
        "drift": sig.drift | {"status": sig.drift_status},
    }


def _slowdown(sig: _Signals, th: ThrottleThresholds, signals: list[str], reasons: list[str]) -> ThrottleValue:
    """Tokens/s fell with no hardware flag and no clock drop under heat: what can it be put down to?"""
    reasons.append(sig.drift_text())
    if sig.temp_status == "flat":
        reasons.append("temperatures stayed flat under load: heat did not cause the slowdown")
        reasons.extend(sig.power_notes())
        if sig.clock_status == "dropped":
            reasons.append(
                "clocks fell without heat (power cap or governor?): " + "; ".join(sig.clock_text())
            )
        return "slowdown_not_thermal"
    if sig.heat and sig.clock_status == "steady":
        reasons.append("temperatures rose but every measured clock held: not clock throttling")
        return "slowdown_not_thermal"
    rho = sig.drift.get("spearman_tps_vs_temp")
    if sig.heat and sig.clock_status == "unknown" and rho is not None and rho <= -th.rank_correlation:
        signals += ["drift", "temperature"]
        reasons += sig.temp_text()
        reasons.append("clocks not measured; speed falls as temperature rises")
        return "throttled"
    reasons.append(
        "not enough telemetry to attribute the slowdown"
        if sig.temp_status == "unknown"
        else "temperature rose but the clocks were not measured and speed does not track temperature"
    )
    return "inconclusive"


def _too_little_data(sig: _Signals, th: ThrottleThresholds, reasons: list[str]) -> bool:
    few_reps, few_samples = sig.drift_status == "unknown", sig.n_load < th.min_load_samples
    if few_reps:
        reasons.append(
            f"{sig.drift['n_reps']} steady rep(s) with tg_tps; need {th.min_steady_reps} to see a drift"
        )
    if few_samples:
        reasons.append(
            f"{sig.n_load} temperature/clock reading(s) under load; need {th.min_load_samples} "
            "(run longer or sample faster)"
        )
    return few_reps or few_samples


def excluded_notes(found: Evidence) -> list[str]:
    """One note per zone left out as no thermometer, with the reason (shown wherever the verdict is)."""
    return [f"{m} is no thermometer: {r}" for m, r in found.excluded_zones.items()]


def _no_evidence(found: Evidence, reasons: list[str]) -> bool:
    """Neither a thermometer nor an observable clock: no claim about heat or clocks can be made."""
    missing = found.missing()
    if missing is None:
        return False
    reasons.append(missing)
    reasons.extend(f"{m}: {r}" for m, r in found.excluded_zones.items())
    reasons.extend(found.unobservable_domains.values())
    return True


def _not_throttled_notes(sig: _Signals) -> list[str]:
    notes = []
    if sig.temp_status == "unknown":
        notes.append("no temperature sensor: judged from clocks and tokens/s only")
    if sig.temp_status == "near_trip":
        notes.append("close to a trip point without throttling yet: " + "; ".join(sig.temp_text()))
    if sig.clock_status == "dropped":
        notes.append(
            "clock below reference without heat (governor or power cap?): " + "; ".join(sig.clock_text())
        )
    return notes


def _direct_signals(sig: _Signals, signals: list[str], reasons: list[str]) -> list[str]:
    """Signals (a) and (b), a hardware flag and a clock drop under heat, added to ``signals`` and
    ``reasons``; returns the causes they name (under-voltage alone: said to be the supply, not heat)."""
    causes = sig.flag_causes()
    if sig.flags:
        signals.append("hardware")
        reasons.extend(sig.flags)
    if sig.clock_status == "dropped" and sig.heat:
        signals += ["clock", "temperature"]
        reasons += sig.clock_text() + sig.temp_text()
        causes = sorted({*causes, "heat"})
    if signals and causes == ["under-voltage"]:
        reasons.append("held down by under-voltage (the power supply), not by heat")
    return causes


def throttle_verdict(inputs: ThrottleInputs, thresholds: ThrottleThresholds | None = None) -> VerdictResult:
    """Judge one run: ``throttled``, ``not_throttled``, ``slowdown_not_thermal`` or ``inconclusive``.

    Decision, in order:

    1. a hardware flag (a flag word's throttle bit, decoded by its source: NVML's heat/power reasons with the
       GPU in use, a Pi firmware's capping/throttling; an x86 throttle counter up) -> throttled, its cause
       named (``evidence["causes"]``: heat, power, under-voltage; under-voltage alone is "not by heat");
    2. a clock drop while a zone is near its trip point or rising -> throttled;
    3. tokens/s falling across steady reps:
       - temperatures flat -> slowdown_not_thermal (whatever the clocks did, heat did not cause it);
       - temperatures up but every measured clock held -> slowdown_not_thermal (no throttling mechanism);
       - temperatures up, clocks not measured, tg_tps rank-correlated with temperature -> throttled;
       - otherwise -> inconclusive;
    4. too few steady reps or readings under load -> inconclusive;
    5. otherwise not_throttled (with notes: near a trip point, or a clock drop without heat).

    Wherever the supply sagged (an under-voltage bit) a note says so, as a power fault, never as heat; where a
    measured clock (a Pi's firmware) is read, it is the clock, and a note names the kernel's requested figure
    that differs from it.
    """
    th = thresholds or ThrottleThresholds()
    window = _load_window(inputs)
    evidence: dict[str, Any] = {"thresholds": asdict(th), "signals": [], "reasons": [], "notes": []}
    signals: list[str] = evidence["signals"]
    reasons: list[str] = evidence["reasons"]
    if window is None:
        reasons.append("no load window: no steady reps and no load phases")
        return VerdictResult("inconclusive", evidence)
    found = judge_evidence(inputs.series, inputs.roles, inputs.max_freq_mhz)
    inputs = replace(inputs, roles=found.apply(inputs.roles))
    sig = _gather(inputs, *window, th)
    evidence.update(_evidence_of(sig, *window))
    evidence["evidence"] = found.as_json()
    evidence["notes"].extend(excluded_notes(found) + requested_not_ran(inputs.series, inputs.roles, *window))
    evidence["causes"] = _direct_signals(sig, signals, reasons)
    evidence["notes"].extend(sig.power_notes())
    if signals:
        if sig.drift_status == "falling":
            signals.append("drift")
            reasons.append(sig.drift_text())
        return VerdictResult("throttled", evidence)
    if _no_evidence(found, reasons):
        if sig.drift_status == "falling":
            reasons.append(sig.drift_text())
        return VerdictResult("inconclusive", evidence)
    if sig.drift_status == "falling":
        return VerdictResult(_slowdown(sig, th, signals, reasons), evidence)
    if _too_little_data(sig, th, reasons):
        return VerdictResult("inconclusive", evidence)
    reasons.append("no hardware throttle flag, no clock drop under heat, steady tg_tps across reps")
    evidence["notes"].extend(_not_throttled_notes(sig))
    return VerdictResult("not_throttled", evidence)
