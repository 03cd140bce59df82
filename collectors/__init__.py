"""Telemetry sources: the collector contract, the metric roles, and one driver per hardware interface.

The contract (``Collector``, ``Metric``, ``MetricRole``, ``counter_delta`` ...) loads with the package. The
registry and the drivers load on first use of one of their names: the registry imports every driver, and
code that only needs to know what a metric *is* (verdicts, analysis, reports of a stored sweep) must not pay
for that, nor for a driver's probing helpers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from edgeprof.collectors.base import (
    Availability,
    Collector,
    Metric,
    SampleValues,
    counter_delta,
)
from edgeprof.collectors.roles import MetricRole, component_of_sensor

if TYPE_CHECKING:
    from edgeprof.collectors.nvml import NvmlCollector, decode_clock_event_reasons
    from edgeprof.collectors.procstat import ProcStatCollector, parse_pid_cpu_ticks
    from edgeprof.collectors.psutil_host import PsutilHostCollector
    from edgeprof.collectors.rapl import RaplCollector
    from edgeprof.collectors.registry import (
        build_collectors,
        describe,
        role_of,
        roles_for,
    )
    from edgeprof.collectors.sysfs_cpufreq import CpuFreqCollector
    from edgeprof.collectors.sysfs_thermal import ThermalZonesCollector, hottest_c
    from edgeprof.collectors.tegrastats import has_data
    from edgeprof.collectors.tegrastats_parse import (
        TegrastatsRecord,
        parse_line,
        record_to_json,
        record_to_metrics,
    )

# name -> the module that defines it, imported when the name is first asked for
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        (
            "build_collectors",
            "describe",
            "role_of",
            "roles_for",
        ),
        "registry",
    ),
    "NvmlCollector": "nvml",
    "decode_clock_event_reasons": "nvml",
    "ProcStatCollector": "procstat",
    "parse_pid_cpu_ticks": "procstat",
    "PsutilHostCollector": "psutil_host",
    "RaplCollector": "rapl",
    "CpuFreqCollector": "sysfs_cpufreq",
    "ThermalZonesCollector": "sysfs_thermal",
    "hottest_c": "sysfs_thermal",
    "has_data": "tegrastats",
    **dict.fromkeys(
        ("TegrastatsRecord", "parse_line", "record_to_json", "record_to_metrics"), "tegrastats_parse"
    ),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "Availability",
    "Collector",
    "CpuFreqCollector",
    "Metric",
    "MetricRole",
    "NvmlCollector",
    "ProcStatCollector",
    "PsutilHostCollector",
    "RaplCollector",
    "SampleValues",
    "TegrastatsRecord",
    "ThermalZonesCollector",
    "build_collectors",
    "component_of_sensor",
    "counter_delta",
    "decode_clock_event_reasons",
    "describe",
    "has_data",
    "hottest_c",
    "parse_line",
    "parse_pid_cpu_ticks",
    "record_to_json",
    "record_to_metrics",
    "role_of",
    "roles_for",
]
