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
    MetricKind,
    SampleResult,
    SampleValues,
    counter_delta,
    numbered_names,
    read_int,
    read_text,
)
from edgeprof.collectors.roles import (
    OTHER,
    Component,
    MetricRole,
    PowerScope,
    Role,
    component_of_sensor,
    temperature,
)

if TYPE_CHECKING:
    from edgeprof.collectors.jtop import JtopCollector
    from edgeprof.collectors.nvml import NvmlCollector, decode_clock_event_reasons
    from edgeprof.collectors.procstat import ProcStatCollector, parse_pid_cpu_ticks
    from edgeprof.collectors.psutil_host import PsutilHostCollector
    from edgeprof.collectors.rapl import RaplCollector
    from edgeprof.collectors.registry import (
        ALL_HOST_COLLECTORS,
        PLATFORM_COLLECTORS,
        build_collectors,
        collector_classes,
        collector_names,
        describe,
        role_of,
        roles_for,
    )
    from edgeprof.collectors.sysfs_cpufreq import CpuFreqCollector
    from edgeprof.collectors.sysfs_thermal import ThermalZonesCollector, hottest_c
    from edgeprof.collectors.tegrastats import TegrastatsCollector, has_data
    from edgeprof.collectors.tegrastats_parse import (
        TegrastatsRecord,
        parse_line,
        record_to_json,
        record_to_metrics,
    )
    from edgeprof.collectors.x86_throttle import ThrottleCountersCollector

# name -> the module that defines it, imported when the name is first asked for
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        (
            "ALL_HOST_COLLECTORS",
            "PLATFORM_COLLECTORS",
            "build_collectors",
            "collector_classes",
            "collector_names",
            "describe",
            "role_of",
            "roles_for",
        ),
        "registry",
    ),
    "JtopCollector": "jtop",
    "NvmlCollector": "nvml",
    "decode_clock_event_reasons": "nvml",
    "ProcStatCollector": "procstat",
    "parse_pid_cpu_ticks": "procstat",
    "PsutilHostCollector": "psutil_host",
    "RaplCollector": "rapl",
    "CpuFreqCollector": "sysfs_cpufreq",
    "ThermalZonesCollector": "sysfs_thermal",
    "hottest_c": "sysfs_thermal",
    "TegrastatsCollector": "tegrastats",
    "has_data": "tegrastats",
    **dict.fromkeys(
        ("TegrastatsRecord", "parse_line", "record_to_json", "record_to_metrics"), "tegrastats_parse"
    ),
    "ThrottleCountersCollector": "x86_throttle",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "ALL_HOST_COLLECTORS",
    "OTHER",
    "PLATFORM_COLLECTORS",
    "Availability",
    "Collector",
    "Component",
    "CpuFreqCollector",
    "JtopCollector",
    "Metric",
    "MetricKind",
    "MetricRole",
    "NvmlCollector",
    "PowerScope",
    "ProcStatCollector",
    "PsutilHostCollector",
    "RaplCollector",
    "Role",
    "SampleResult",
    "SampleValues",
    "TegrastatsCollector",
    "TegrastatsRecord",
    "ThermalZonesCollector",
    "ThrottleCountersCollector",
    "build_collectors",
    "collector_classes",
    "collector_names",
    "component_of_sensor",
    "counter_delta",
    "decode_clock_event_reasons",
    "describe",
    "has_data",
    "hottest_c",
    "numbered_names",
    "parse_line",
    "parse_pid_cpu_ticks",
    "read_int",
    "read_text",
    "record_to_json",
    "record_to_metrics",
    "role_of",
    "roles_for",
    "temperature",
]
