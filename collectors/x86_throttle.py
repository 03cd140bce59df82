"""Intel thermal-throttle event counters: ``/sys/devices/system/cpu/cpu*/thermal_throttle/``.

Any increase during a run is direct evidence the CPU throttled, independent of temperature guesses. Per-core
counters are per logical CPU; the package counters are the same on every CPU of a package, so they are read
once per package (``topology/physical_package_id``), from whichever of its CPUs is online at the time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from edgeprof.collectors.base import (
    Availability,
    Collector,
    Metric,
    SampleValues,
    count_of,
    numbered_entries,
    read_int,
)
from edgeprof.collectors.roles import MetricRole

CPU_DIR = "/sys/devices/system/cpu"

# sysfs file -> (metric leaf, unit, description)
_CORE_FILES = {
    "core_throttle_count": ("core_count", "count", "core thermal-throttle events"),
    "core_throttle_total_time_ms": ("core_time_ms", "ms", "time spent core-throttled"),
}
_PACKAGE_FILES = {
    "package_throttle_count": ("count", "count", "package thermal-throttle events"),
    "package_throttle_total_time_ms": ("time_ms", "ms", "time spent package-throttled"),
}


@dataclass
class _Cpu:
    index: int
    directory: Path  # .../cpuN/thermal_throttle
    core_files: list[str] = field(default_factory=list)


@dataclass
class _Package:
    package_id: int
    cpus: list[_Cpu] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


class ThrottleCountersCollector(Collector):
    name = "x86_throttle"

    @classmethod
    def role_of(cls, metric: str) -> MetricRole | None:
        return throttle_counter_role(metric)

    def __init__(self, root: Path | str = "/") -> None:
        super().__init__(root)
        self._cpus: list[_Cpu] | None = None
        self._packages: list[_Package] = []
        self._no_topology: list[int] = []

    def _discover(self) -> list[_Cpu]:
        cpus: list[_Cpu] = []
        packages: dict[int, _Package] = {}
        self._no_topology = []
        for index, cpu_dir in numbered_entries(self.path(CPU_DIR), "cpu"):
            throttle = cpu_dir / "thermal_throttle"
            if not throttle.is_dir():
                continue
            cpu = _Cpu(index, throttle, [f for f in _CORE_FILES if (throttle / f).exists()])
            cpus.append(cpu)
            package_files = [f for f in _PACKAGE_FILES if (throttle / f).exists()]
            if not package_files:
                continue
            package_id = read_int(cpu_dir / "topology" / "physical_package_id")
            if package_id is None:
                # Without a package id, counters of different sockets could not be told apart; leaving
                # them out is better than reporting one socket's events as another's.
                self._no_topology.append(cpu.index)
                continue
            package = packages.setdefault(package_id, _Package(package_id))
            package.cpus.append(cpu)
            package.files.extend(f for f in package_files if f not in package.files)
        self._cpus = cpus
        self._packages = [packages[k] for k in sorted(packages)]
        return cpus

    def _get_cpus(self) -> list[_Cpu]:
        return self._cpus if self._cpus is not None else self._discover()

    def available(self) -> Availability:
        cpus = self._discover()
        if not cpus:
            return Availability(
                False,
                f"no thermal_throttle counters under {CPU_DIR}/cpu*/ (only Intel CPUs have them; "
                "VMs usually hide them)",
            )
        reason = (
            f"{count_of(len(cpus), 'CPU')}, {count_of(len(self._packages), 'package')} "
            "with thermal-throttle counters"
        )
        if self._no_topology:
            reason += f"; package counters skipped for cpu {self._no_topology} (no physical_package_id)"
        return Availability(True, reason)

    def metrics(self) -> list[Metric]:
        metrics: list[Metric] = []
        for cpu in self._get_cpus():
            for file_name in cpu.core_files:
                leaf, unit, text = _CORE_FILES[file_name]
                metrics.append(
                    Metric(f"throttle.cpu{cpu.index}.{leaf}", unit, "counter", f"cpu{cpu.index} {text}")
                )
        for package in self._packages:
            for file_name in package.files:
                leaf, unit, text = _PACKAGE_FILES[file_name]
                metrics.append(
                    Metric(
                        f"throttle.package{package.package_id}.{leaf}",
                        unit,
                        "counter",
                        f"package {package.package_id} {text}",
                    )
                )
        return metrics

    def sample(self) -> SampleValues:
        values: SampleValues = {}
        for cpu in self._get_cpus():
            for file_name in cpu.core_files:
                raw = read_int(cpu.directory / file_name)
                values[f"throttle.cpu{cpu.index}.{_CORE_FILES[file_name][0]}"] = (
                    None if raw is None else float(raw)
                )
        for package in self._packages:
            for file_name in package.files:
                reading: float | None = None
                # thermal_throttle/ vanishes while its CPU is offline; any online sibling has the same value.
                for cpu in package.cpus:
                    raw = read_int(cpu.directory / file_name)
                    if raw is not None:
                        reading = float(raw)
                        break
                values[f"throttle.package{package.package_id}.{_PACKAGE_FILES[file_name][0]}"] = reading
        return values


def throttle_counter_role(metric: str) -> MetricRole | None:
    """``throttle.cpuN.core_count`` / ``throttle.packageN.count``: thermal-throttle event counters; the
    ``*_time_ms`` totals are stored but not judged."""
    parts = metric.split(".")
    if len(parts) != 3 or parts[0] != "throttle":
        return None
    if parts[2] in ("core_count", "count"):
        return MetricRole("throttle_counter", "count", "cpu")
    return MetricRole("other", "ms", "cpu")
