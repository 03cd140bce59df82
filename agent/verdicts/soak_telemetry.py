"""A soak's windows joined with the telemetry read in them: what the soak verdict judges and what is stored
per window.

``WindowSpeed`` is what the worker measured in a window (llama.cpp's counters); ``soak_windows`` adds, by
the metrics' roles, the hottest zone and each zone's peak, the clocks and their caps (medians), power and
energy from the run's energy source, hardware throttle signals (NVML heat/power reasons, throttle-event
counters, a clock cap lowered below its highest reading so far) and other processes' CPU time (the
interference counters). Pure.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from edgeprof.collectors import MetricRole, counter_delta
from edgeprof.collectors.evidence import Evidence, judge_evidence
from edgeprof.collectors.flags import decoder_for, news
from edgeprof.stats import median
from edgeprof.telemetry import EnergySource, SeriesLike, choose_energy_source, energy_j, energy_per_token
from edgeprof.verdicts.interference import Rep, judge_rep
from edgeprof.verdicts.series import Point, per_time_max, points
from edgeprof.verdicts.throttle import clock_domains, is_temperature


@dataclass(frozen=True)
class WindowSpeed:
    """What the worker measured in one window (llama.cpp's counters), on the telemetry's monotonic clock."""

    index: int
    t_start: float
    t_end: float
    tokens: int  # decode steps finished in the window
    decode_s: float | None  # llama.cpp's eval time of those steps
    tg_tps: float | None  # tokens / decode_s (None under 2 tokens)
    pp_tps: float | None  # prefill t/s of the requests that started in the window (None if none did)


@dataclass(frozen=True)
class SoakWindow:
    """One window with its telemetry: what is stored per window."""

    index: int
    t_start: float
    t_end: float
    tokens: int
    tg_tps: float | None
    pp_tps: float | None
    temp_max_c: float | None  # the hottest zone's highest reading in the window
    temps_c: dict[str, float]  # zone metric -> its highest reading in the window
    cpu_mhz: float | None  # medians over the window (the busiest policy's clock, the caps, GPU, EMC)
    cpu_cap_mhz: float | None
    gpu_mhz: float | None
    gpu_cap_mhz: float | None
    emc_mhz: float | None
    power_mw: float | None  # mean power of the run's energy source over the window
    energy_j: float | None
    j_per_token: float | None
    throttle_signals: list[str]  # hardware signals seen in the window
    other_cores: float | None  # other processes' CPU in cores over the window (interference counters)
    signal_t: float | None = None  # when the window's first hardware signal was read


# -- readings sliced by time -------------------------------------------------------------------------------
class Readings:
    """One series' readings sorted once and sliced with bisect: a night's soak has thousands of windows,
    and a linear scan of every series per window would make a report of it take minutes."""

    def __init__(self, readings: Sequence[Point]) -> None:
        self.pts = list(readings)
        self.ts = [t for t, _ in self.pts]

    def inside(self, t0: float, t1: float) -> list[Point]:
        return self.pts[bisect_left(self.ts, t0) : bisect_right(self.ts, t1)]

    def around(self, t0: float, t1: float) -> list[Point]:
        """The readings inside plus the last one before and the first one after (a counter's delta and an
        energy integral need the readings either side of the window)."""
        lo = max(0, bisect_right(self.ts, t0) - 1)
        return self.pts[lo : bisect_left(self.ts, t1) + 1]

    def values(self, t0: float, t1: float) -> list[float]:
        return [v for _, v in self.inside(t0, t1)]


def _merged(series: Mapping[str, SeriesLike], metrics: Sequence[str]) -> Readings | None:
    return Readings(per_time_max(series[m] for m in metrics)) if metrics else None


@dataclass
class SoakTelemetry:
    """The series a soak reads, found by role and sorted once."""

    zones: dict[str, Readings]
    hottest: Readings | None
    cpu: Readings | None
    gpu: Readings | None
    emc: Readings | None
    caps: dict[str, tuple[str, Readings]]  # metric -> (component, readings)
    flags: dict[str, tuple[MetricRole, Readings]]  # metric -> (its role: whose bits, Readings)
    counters: dict[str, Readings]
    cpu_time: dict[str, Readings]  # the interference counters
    energy: dict[str, Readings]
    source: EnergySource | None
    evidence: Evidence  # the zones that are no thermometer and the clocks that never moved, left out above


def soak_telemetry(
    series: Mapping[str, SeriesLike], roles: Mapping[str, MetricRole], gpu: bool
) -> SoakTelemetry:
    found = judge_evidence(series, roles)
    roles = found.apply(roles)
    of = {m: roles[m] for m in sorted(series) if m in roles}
    zones = {m: Readings(points(series[m])) for m in of if is_temperature(m, gpu, roles)}
    domains = clock_domains(list(of), gpu, roles)
    source = choose_energy_source(of)
    usable = {m: r for m, r in of.items() if gpu or not r.discrete}
    return SoakTelemetry(
        zones=zones,
        hottest=_merged(series, list(zones)),
        cpu=_merged(series, domains.get("cpu", [])),
        gpu=_merged(series, domains.get("gpu", [])),
        emc=_merged(series, [m for m, r in usable.items() if r.role == "clock" and r.component == "dram"]),
        caps={
            m: (r.component, Readings(points(series[m]))) for m, r in usable.items() if r.role == "clock_cap"
        },
        flags={m: (r, Readings(points(series[m]))) for m, r in usable.items() if r.role == "throttle_flags"},
        counters={m: Readings(points(series[m])) for m, r in usable.items() if r.role == "throttle_counter"},
        cpu_time={
            m: Readings(points(series[m])) for m, r in of.items() if r.role in ("cpu_time", "run_queue")
        },
        energy={p.metric: Readings(points(series[p.metric])) for p in (source.parts if source else ())},
        source=source,
        evidence=found,
    )


# -- one window --------------------------------------------------------------------------------------------
def _hardware_signals(
    tel: SoakTelemetry, t0: float, t1: float, cap_ref: dict[str, float]
) -> tuple[list[str], float | None]:
    """(signals, time of the first) of NVML reasons, throttle counters and lowered caps in [t0, t1].
    ``cap_ref``: each cap's highest reading so far in the soak, carried from window to window."""
    found: list[tuple[float, str]] = []
    for role, readings in tel.flags.values():
        for t, name in _flag_hits(role, readings, t0, t1):
            found.append((t, name))
    for metric, readings in tel.counters.items():
        # from the last reading before the window to its last one inside: an increase belongs to the
        # window whose reading saw it, never to both windows either side of a boundary
        span = [p for p in readings.around(t0, t1) if p[0] <= t1]
        delta = counter_delta(span[0][1], span[-1][1], None) if len(span) >= 2 else None
        if delta is not None and delta > 0:
            first = next(t for t, v in span if v > span[0][1])
            found.append((first, f"{metric} +{delta:g}"))
    for metric, (component, readings) in tel.caps.items():
        before = readings.around(t0, t0)
        ref = cap_ref.get(metric, max((v for t, v in before if t <= t0), default=float("-inf")))
        drop: tuple[float, float, float] | None = None
        for t, v in readings.inside(t0, t1):
            if v < ref and drop is None:
                drop = (t, ref, v)
            elif drop is not None and v < drop[2]:
                drop = (drop[0], drop[1], v)
            ref = max(ref, v)
        cap_ref[metric] = ref
        if drop is not None:
            found.append((drop[0], f"{component} cap {drop[1]:.0f}->{drop[2]:.0f} MHz"))
    found.sort(key=lambda p: p[0])
    return [text for _, text in found], (found[0][0] if found else None)


def flag_signal(name: str, cause: str | None) -> str:
    """A flag as a soak signal: its bit name, with its cause where that is not heat or power (a Pi's
    ``Throttled [under-voltage]``: a weak supply, never to be read as heat)."""
    return f"{name} [{cause}]" if cause == "under-voltage" else name


def _flag_hits(role: MetricRole, readings: Readings, t0: float, t1: float) -> list[tuple[float, str]]:
    """(first time, signal) of each throttling bit of a flag word in [t0, t1], decoded by its source; a
    sticky "since boot" bit counts where it appears, never where it was already set."""
    decoder = decoder_for(role)
    if decoder is None:
        return []
    span = readings.around(t0, t1)
    first: dict[str, float] = {}
    previous: int | None = None
    for t, v in span:
        word = int(v)
        if t >= t0 and t <= t1:
            for flag in news(decoder, previous, word):
                if flag.throttles:
                    first.setdefault(flag_signal(flag.name, flag.cause), t)
        previous = word
    return [(t, name) for name, t in first.items()]


def _median_in(readings: Readings | None, t0: float, t1: float) -> float | None:
    return median(readings.values(t0, t1)) if readings is not None else None


def _window(
    speed: WindowSpeed, tel: SoakTelemetry, roles: Mapping[str, MetricRole], cap_ref: dict[str, float]
) -> SoakWindow:
    t0, t1 = speed.t_start, speed.t_end
    temps = {m: max(vs) for m, r in tel.zones.items() if (vs := r.values(t0, t1))}
    hottest = tel.hottest.values(t0, t1) if tel.hottest is not None else []
    caps = {
        c: [v for cc, r in tel.caps.values() if cc == c for v in r.values(t0, t1)] for c in ("cpu", "gpu")
    }
    joules = energy_j(tel.source, {m: r.around(t0, t1) for m, r in tel.energy.items()}, t0, t1)
    signals, signal_t = _hardware_signals(tel, t0, t1, cap_ref)
    counters = {m: r.around(t0, t1) for m, r in tel.cpu_time.items()}
    other = judge_rep(Rep(speed.index, t0, t1), counters, roles).get("other_cores") if counters else None
    return SoakWindow(
        index=speed.index,
        t_start=t0,
        t_end=t1,
        tokens=speed.tokens,
        tg_tps=speed.tg_tps,
        pp_tps=speed.pp_tps,
        temp_max_c=max(hottest) if hottest else None,
        temps_c=temps,
        cpu_mhz=_median_in(tel.cpu, t0, t1),
        cpu_cap_mhz=median(caps["cpu"]),
        gpu_mhz=_median_in(tel.gpu, t0, t1),
        gpu_cap_mhz=median(caps["gpu"]),
        emc_mhz=_median_in(tel.emc, t0, t1),
        power_mw=joules / (t1 - t0) * 1000.0 if joules is not None and t1 > t0 else None,
        energy_j=joules,
        j_per_token=energy_per_token(joules, speed.tokens),
        throttle_signals=signals,
        other_cores=other,
        signal_t=signal_t,
    )


def soak_windows(
    speeds: Sequence[WindowSpeed],
    series: Mapping[str, SeriesLike],
    roles: Mapping[str, MetricRole],
    *,
    gpu_in_use: bool = True,
) -> list[SoakWindow]:
    """Each window, in time order, with the telemetry read in it. ``gpu_in_use``: False for a CPU-only
    soak (ngl = 0), so that a discrete GPU's temperature, clocks and NVML reasons are left out."""
    return windows_of(speeds, soak_telemetry(series, roles, gpu_in_use), roles)


def windows_of(
    speeds: Sequence[WindowSpeed], tel: SoakTelemetry, roles: Mapping[str, MetricRole]
) -> list[SoakWindow]:
    cap_ref: dict[str, float] = {}
    return [_window(s, tel, roles, cap_ref) for s in sorted(speeds, key=lambda s: (s.t_start, s.index))]
