"""The evidence rule: which temperature and clock readings can support a claim about heat and throttling.

A verdict is a claim, and two kinds of reading look like evidence without being any:

- **a zone that is no thermometer**: a known pseudo-sensor by its name (Tegra's PMIC zone prints a constant:
  ``PMIC@100C`` on TX2, ``PMIC@50C`` on Nano, sysfs type ``PMIC-Die``), a reading at or below -256 °C
  (Tegra's "sensor off"), or a zone whose readings do not move over a run while another thermometer's do
  (a fixed value). Such a zone is never "the hottest", never "the board's temperature";
- **a clock that is not observable**: a series that never changes over a run in which the work did (psutil's
  static ``/proc/cpuinfo`` figure on a machine without cpufreq, a fixed governor) cannot show a clock
  falling, so it is no evidence that a clock "held". A clock its source reads from the hardware as it runs
  (``MetricRole.measured``: tegrastats, NVML, the Raspberry Pi firmware) is observable however flat: held
  under load, it *held* ("held at 1510 MHz"); so is a clock that moved anywhere in the run or that the
  sweep saw at another value. Where clocks are not observable it is said once per clock domain.

This module is the one place the rule lives. The collectors name their temperature metrics through
``thermometer_role`` and read values through ``celsius_or_none``; the verdicts, the importers, the cooldown,
the figures and the Prometheus output ask ``judge_evidence`` (over a run or a log) and ``hottest_c`` (over
one sample). Pure: plain names and ``(t, value)`` readings in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from edgeprof.collectors.roles import Component, MetricRole, component_of_sensor

# Tegra prints -256C for a power-gated sensor (GPU/CV zones on Orin with the GPU idle) and its thermal
# driver and jtop return the same sentinel: anything at or below it is "sensor off", never a temperature.
OFFLINE_C = -256.0

# Pseudo-sensors known by name: Tegra's PMIC zone ("PMIC" in tegrastats and jtop, "PMIC-Die" in sysfs)
# reports a fixed value (100 °C on TX1/TX2/Xavier, 50 °C on Nano and Orin) whatever the board does.
# Matched as a word of the sanitised name, so every spelling is caught and "pmic2" or "pmic_die" too.
PSEUDO_SENSORS: dict[str, str] = {
    "pmic": "Tegra's PMIC zone reports a fixed value, not a temperature",
}

# A zone is "fixed" when every reading of the run is the same value (a range of 0 °C: real sensors
# quantise to 0.25-1 °C and flicker by a step even on a settled board) ...
FIXED_RANGE_C = 0.0
# ... while another thermometer moved by at least 1 °C (two steps of the common 0.5 °C quantum): on a
# board that did not warm at all, every zone may read one value, and none of them is then proven false.
MOVED_RANGE_C = 1.0
# Fewer readings than this say nothing of whether a series moves (the throttle verdict's minimum for a
# trend, ``ThrottleThresholds.min_load_samples``).
MIN_READINGS = 5
# A clock reading within this fraction of its first reading has "not changed": psutil's /proc/cpuinfo
# figure repeats to the last digit, while a real clock read twice under DVFS differs by MHz.
CLOCK_SAME_FRACTION = 1e-6

_WORD_RE = re.compile(r"[a-z]+")
_METRIC_RE = re.compile(r"^temp\.(.+?)(?:_zone\d+)?_c$")

Readings = Iterable[tuple[float, float | None]]


def pseudo_sensor_reason(name: str) -> str | None:
    """Why the zone ``name`` (a zone type, a tegrastats name or a ``temp.<zone>_c`` metric) is a known
    pseudo-sensor; None for any other name."""
    match = _METRIC_RE.match(name)
    zone = (match.group(1) if match else name).lower()
    for word in _WORD_RE.findall(zone.replace("_", " ")):
        for known, reason in PSEUDO_SENSORS.items():
            if word == known or word.startswith(known):
                return reason
    return None


def is_thermometer_name(name: str) -> bool:
    """False for the zones ``pseudo_sensor_reason`` names."""
    return pseudo_sensor_reason(name) is None


def celsius_or_none(value: float | None) -> float | None:
    """A sensor's reading as a temperature, None for "sensor off" (-256 °C and below) or a non-number."""
    if value is None or not math.isfinite(value) or value <= OFFLINE_C:
        return None
    return float(value)


def thermometer_role(name: str, component: Component | None = None, *, discrete: bool = False) -> MetricRole:
    """The role of a temperature metric, as every collector declares it: a temperature of the part its
    name says (or ``component``), and no thermometer where its name is a known pseudo-sensor."""
    part = component if component is not None else component_of_sensor(name)
    return MetricRole("temperature", "C", part, discrete=discrete, thermometer=is_thermometer_name(name))


def hottest_c(sample: Mapping[str, float | None], excluded: Iterable[str] = ()) -> float | None:
    """The highest thermometer reading of one sample (``temp.*`` metrics), leaving out pseudo-sensors by
    name and the ``excluded`` zones (found fixed by ``judge_evidence``); None where there is none."""
    skip = set(excluded)
    values = [
        v
        for name, raw in sample.items()
        if name.startswith("temp.")
        and name not in skip
        and is_thermometer_name(name)
        and (v := celsius_or_none(raw)) is not None
    ]
    return max(values) if values else None


def _values(readings: Readings) -> list[float]:
    return [float(v) for _t, v in readings if v is not None and math.isfinite(v)]


def value_range(values: list[float]) -> float | None:
    return max(values) - min(values) if values else None


def clock_unobservable_reason(
    metric: str, values: list[float], reference_mhz: float | None = None, *, measured: bool = False
) -> str | None:
    """Why a clock's readings over a run are no evidence (they never changed, no comparable run saw it
    elsewhere, and its source does not read it from the hardware); None for a clock that moved, a
    ``measured`` one, or with too few readings to tell."""
    if measured or len(values) < MIN_READINGS:
        return None
    first = values[0]
    tol = abs(first) * CLOCK_SAME_FRACTION
    if any(abs(v - first) > tol for v in values):
        return None
    if reference_mhz is not None and abs(reference_mhz - first) > max(tol, 0.5):
        return None  # the sweep saw this clock at another value: it is a real clock, held here
    return (
        f"{metric} read {first:g} MHz in every one of {len(values)} samples: a clock that never moves is "
        "not observable (a static /proc/cpuinfo figure or a fixed governor)"
    )


@dataclass(frozen=True)
class Evidence:
    """What ``judge_evidence`` found: the zones that are no thermometer and the clocks that cannot be
    observed, each with the reason; ``thermometers`` and ``clocks`` are the ones that remain."""

    thermometers: tuple[str, ...] = ()
    excluded_zones: dict[str, str] = field(default_factory=dict)
    clocks: tuple[str, ...] = ()
    unobservable_clocks: dict[str, str] = field(default_factory=dict)
    # the same, said once per clock domain (``cpu``, ``gpu``): six cores of one cluster are one statement
    unobservable_domains: dict[str, str] = field(default_factory=dict)

    def apply(self, roles: Mapping[str, MetricRole]) -> dict[str, MetricRole]:
        """``roles`` with the excluded zones no thermometer and the unobservable clocks ``observable``
        False: everything that reads roles then leaves them out."""
        out = dict(roles)
        for metric in self.excluded_zones:
            if metric in out:
                out[metric] = replace(out[metric], thermometer=False)
        for metric in self.unobservable_clocks:
            if metric in out:
                out[metric] = replace(out[metric], observable=False)
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "thermometers": list(self.thermometers),
            "excluded_zones": dict(self.excluded_zones),
            "clocks": list(self.clocks),
            "unobservable_clocks": dict(self.unobservable_clocks),
            "unobservable_domains": dict(self.unobservable_domains),
        }

    def missing(self) -> str | None:
        """What a "not throttled" or "not thermal" claim lacks here; None when it has a thermometer or an
        observable clock."""
        if self.thermometers or self.clocks:
            return None
        return "no thermometer and no observable clock on this machine"


def _is_temperature(role: MetricRole | None) -> bool:
    return role is not None and role.role == "temperature"


def _is_clock(role: MetricRole | None) -> bool:
    """A CPU or GPU clock (a memory-controller clock shows no throttle of the cores)."""
    return role is not None and role.role == "clock" and role.domain in ("cpu", "gpu")


def judge_evidence(
    series: Mapping[str, Readings],
    roles: Mapping[str, MetricRole],
    reference_mhz: Mapping[str, float] | None = None,
) -> Evidence:
    """The evidence rule over one run or log: ``series`` (metric -> ``(t, value)`` readings), the
    metrics' roles as their collectors declared them, and where known the reference clock of each clock
    domain (``cpu``, ``gpu``: the highest comparable runs saw; a clock flat at another value is real)."""
    temps = {
        m: [v for v in _values(series[m]) if v > OFFLINE_C]
        for m in sorted(series)
        if _is_temperature(roles.get(m))
    }
    excluded: dict[str, str] = {}
    for metric in temps:
        role = roles[metric]
        reason = pseudo_sensor_reason(metric)
        if reason is None and not role.thermometer:
            reason = "declared a fixed-value sensor by its collector"
        if reason is not None:
            excluded[metric] = reason
    candidates = {m: vs for m, vs in temps.items() if m not in excluded and vs}
    ranges = {m: value_range(vs) or 0.0 for m, vs in candidates.items()}
    for metric, values in candidates.items():
        others = [r for m, r in ranges.items() if m != metric]
        if (
            len(values) >= MIN_READINGS
            and ranges[metric] <= FIXED_RANGE_C
            and any(r >= MOVED_RANGE_C for r in others)
        ):
            moved = max(others)
            excluded[metric] = (
                f"read {values[0]:g} °C in every one of {len(values)} samples while other zones moved "
                f"{moved:g} °C: a fixed value, not a temperature"
            )
    thermometers = tuple(m for m in temps if m not in excluded and temps[m])
    unobservable: dict[str, str] = {}
    clocks: list[str] = []
    for metric in sorted(series):
        if not _is_clock(roles.get(metric)):
            continue
        values = _values(series[metric])
        domain = roles[metric].domain
        ref = (reference_mhz or {}).get(domain) if domain is not None else None
        reason = clock_unobservable_reason(metric, values, ref, measured=roles[metric].measured)
        if reason is not None:
            unobservable[metric] = reason
        elif values:
            clocks.append(metric)
    domains = unobservable_by_domain(unobservable, roles, series)
    return Evidence(thermometers, excluded, tuple(clocks), unobservable, domains)


def _metric_span(metrics: list[str]) -> str:
    return metrics[0] if len(metrics) == 1 else f"{metrics[0]} … {metrics[-1]}"


def unobservable_by_domain(
    unobservable: Mapping[str, str], roles: Mapping[str, MetricRole], series: Mapping[str, Readings]
) -> dict[str, str]:
    """One statement per clock domain for the clocks ``unobservable`` names: which metrics, the value(s)
    they read, and why that is no evidence."""
    by_domain: dict[str, list[str]] = {}
    for metric in unobservable:
        by_domain.setdefault(roles[metric].domain or "other", []).append(metric)
    out: dict[str, str] = {}
    for domain, metrics in sorted(by_domain.items()):
        if len(metrics) == 1:
            out[domain] = unobservable[metrics[0]]
            continue
        firsts = sorted({v for m in metrics for v in _values(series[m])[:1]})
        read = f"{firsts[0]:g} MHz" if len(firsts) == 1 else f"{firsts[0]:g}–{firsts[-1]:g} MHz"
        out[domain] = (
            f"{_metric_span(metrics)} ({len(metrics)} clocks) each read one value ({read}) in every sample: "
            "a clock that never moves is not observable (a static /proc/cpuinfo figure or a fixed governor)"
        )
    return out


def is_board_thermometer(role: MetricRole | None) -> bool:
    """A temperature of the board itself that is a thermometer (not a pseudo-sensor, not a discrete GPU's
    die, which says nothing of the board a run heats)."""
    return role is not None and role.role == "temperature" and role.thermometer and not role.discrete


def thermometer_sources(declared: Mapping[str, Iterable[MetricRole | None]]) -> list[str]:
    """The sources to read the board's temperature from (the cooldown, the live progress line), in the
    order given (the registry's: thermal zones first): each source whose declared metrics include a board
    thermometer. ``declared``: source name -> the roles of the metrics it declares."""
    return [name for name, roles in declared.items() if any(is_board_thermometer(r) for r in roles)]
