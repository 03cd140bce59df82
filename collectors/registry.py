"""Which collectors exist, building them by name, and the ``doctor`` view of what this machine offers.

To add a source (tegrastats, jtop, nvml, ...): write ``collectors/<source>.py`` with a ``Collector``
subclass whose ``name`` is unique, whose constructor takes only ``root`` and whose ``role_of`` says what
each of its metrics is (``collectors/roles.py``: temperature, clock, power gauge, energy counter, ...), then
list the class in ``PLATFORM_COLLECTORS`` below. Nothing else changes: energy and J/token, phase
aggregates, verdicts and plots find its metrics by role (``roles_for`` here gives the mapping they take).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from edgeprof.collectors.base import Collector
from edgeprof.collectors.jetson_gpu_devfreq import JetsonGpuDevfreqCollector
from edgeprof.collectors.jetson_oc import JetsonOcEventsCollector
from edgeprof.collectors.jtop import JtopCollector
from edgeprof.collectors.nvml import NvmlCollector
from edgeprof.collectors.procstat import ProcStatCollector
from edgeprof.collectors.psutil_host import PsutilHostCollector
from edgeprof.collectors.rapl import RaplCollector
from edgeprof.collectors.roles import MetricRole
from edgeprof.collectors.rpi_firmware import RpiFirmwareCollector
from edgeprof.collectors.sysfs_cpufreq import CpuFreqCollector
from edgeprof.collectors.sysfs_thermal import ThermalZonesCollector
from edgeprof.collectors.tegrastats import TegrastatsCollector
from edgeprof.collectors.x86_throttle import ThrottleCountersCollector

# Sources any Linux box may have; each reports itself unavailable where its hardware is missing.
ALL_HOST_COLLECTORS: list[type[Collector]] = [
    PsutilHostCollector,
    ThermalZonesCollector,
    CpuFreqCollector,
    RaplCollector,
    ThrottleCountersCollector,
    ProcStatCollector,
]

# Device-specific sources go here, in the order doctor should list them:
#   Jetson: tegrastats (power rails, GPU/EMC load), jtop, the GPU's devfreq clock and the OC throttle
#   counters; NVIDIA dGPU: nvml; Raspberry Pi: the firmware's clock, temperature and throttle word.
# Import them at the top of this module like the host collectors; keep optional third-party imports
# (jtop, pynvml) inside the collector module so this registry imports everywhere.
PLATFORM_COLLECTORS: list[type[Collector]] = [
    TegrastatsCollector,
    JtopCollector,
    JetsonGpuDevfreqCollector,
    JetsonOcEventsCollector,
    NvmlCollector,
    RpiFirmwareCollector,
]


def collector_classes() -> list[type[Collector]]:
    """Every registered collector class, host ones first; raises if two share a ``name``."""
    classes = [*ALL_HOST_COLLECTORS, *PLATFORM_COLLECTORS]
    seen: dict[str, type[Collector]] = {}
    for cls in classes:
        if cls.name in seen:
            raise ValueError(
                f"collector name {cls.name!r} used by both {seen[cls.name].__name__} and {cls.__name__}"
            )
        seen[cls.name] = cls
    return classes


def role_of(metric: str, source: str | None = None) -> MetricRole | None:
    """The role of ``metric`` as the collector named ``source`` declares it; without a source (or for a
    source no longer registered), the first registered collector that claims the name. None: unknown."""
    classes = collector_classes()
    if source is not None:
        for cls in classes:
            if cls.name == source:
                role = cls.role_of(metric)
                if role is not None:
                    return role
    for cls in classes:
        role = cls.role_of(metric)
        if role is not None:
            return role
    return None


def roles_for(
    metrics: Iterable[str],
    sources: Mapping[str, str] | None = None,
    declared: Mapping[str, MetricRole] | None = None,
) -> dict[str, MetricRole]:
    """metric -> role for every metric that has one: ``declared`` first (the roles stored with a sweep),
    then the registry by ``sources`` (metric -> collector name) or by name alone."""
    out: dict[str, MetricRole] = {}
    for metric in metrics:
        role = (declared or {}).get(metric) or role_of(metric, (sources or {}).get(metric))
        if role is not None:
            out[metric] = role
    return out


def collector_names() -> list[str]:
    return [cls.name for cls in collector_classes()]


def build_collectors(root: Path, names: list[str] | None = None) -> list[Collector]:
    """Instantiate the named collectors (all when ``names`` is None), in registry order.

    Unknown names raise ``ValueError`` listing the known ones, so a typo in a plan fails before a sweep
    starts. Collectors are returned whether or not they are available: callers ask ``available()``.
    """
    classes = collector_classes()
    if names is not None:
        known = {cls.name for cls in classes}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"unknown collector(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        wanted = set(names)
        classes = [cls for cls in classes if cls.name in wanted]
    return [cls(root) for cls in classes]


def describe(root: Path) -> list[dict[str, Any]]:
    """For ``doctor``: per collector ``name``, ``ok``, ``reason`` and its ``metrics`` (name, unit, kind).

    A collector that raises while probing is reported as not ok with the error as reason, so one broken
    source cannot hide what the others found.
    """
    report: list[dict[str, Any]] = []
    for collector in build_collectors(root):
        entry: dict[str, Any] = {"name": collector.name, "ok": False, "reason": "", "metrics": []}
        try:
            ok, reason = collector.available()
            entry["ok"], entry["reason"] = ok, reason
            if ok:
                entry["metrics"] = [
                    {"name": m.name, "unit": m.unit, "kind": m.kind} for m in collector.metrics()
                ]
        except Exception as exc:  # noqa: BLE001 - a probe bug must not abort doctor; it is reported instead
            entry["ok"] = False
            entry["reason"] = f"probe failed: {type(exc).__name__}: {exc}"
            entry["metrics"] = []
        finally:
            try:
                collector.close()
            except Exception as exc:  # noqa: BLE001 - a failing close is worth a line, not a crash
                entry["reason"] += f" (close failed: {type(exc).__name__}: {exc})"
        report.append(entry)
    return report
