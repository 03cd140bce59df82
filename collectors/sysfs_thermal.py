"""Temperatures of every ``/sys/class/thermal/thermal_zone*`` (Jetson, ARM boards, most x86 laptops).

Each zone becomes ``temp.<type>_c``: the ``type`` file lowercased, non-alphanumerics folded to ``_`` and a
trailing ``therm``/``thermal`` word dropped, so Tegra's ``CPU-therm`` (Nano) and ``cpu-thermal`` (Orin) both
read ``temp.cpu_c``, the same name tegrastats' ``CPU@`` maps to (one metric name per quantity, whichever
source read it). Zones sharing a name get a
``_zone<N>`` suffix on every one of them, so a name never depends on discovery order.
"""

from __future__ import annotations

import re
from pathlib import Path

from edgeprof.collectors.base import (
    Availability,
    Collector,
    Metric,
    SampleValues,
    count_of,
    listed_names,
    nothing_found,
    numbered_entries,
    read_int,
    read_text,
)
from edgeprof.collectors.evidence import celsius_or_none, is_thermometer_name, thermometer_role
from edgeprof.collectors.evidence import hottest_c as evidence_hottest_c
from edgeprof.collectors.roles import MetricRole
from edgeprof.collectors.tegrastats_parse import SECOND_TEMP_SUFFIX

THERMAL_CLASS = "/sys/class/thermal"

_TRIP_RE = re.compile(r"^trip_point_(\d+)_temp$")
_SUFFIX_RE = re.compile(r"_(therm|thermal)$")
_METRIC_RE = re.compile(r"^temp\.(.+?)(?:_zone\d+)?_c$")


def sanitize_type(zone_type: str) -> str:
    """``CPU-therm`` -> ``cpu``; ``ACPI thermal zone`` -> ``acpi_thermal_zone``; empty stays empty."""
    name = re.sub(r"[^a-z0-9]+", "_", zone_type.lower()).strip("_")
    stripped = _SUFFIX_RE.sub("", name)
    return stripped or name


class _Zone:
    __slots__ = ("base_name", "index", "metric", "path", "type")

    def __init__(self, path: Path, index: int, zone_type: str) -> None:
        self.path = path
        self.index = index
        self.type = zone_type
        self.base_name = sanitize_type(zone_type) or f"zone{index}"
        self.metric = ""


class ThermalZonesCollector(Collector):
    name = "sysfs_thermal"

    @classmethod
    def role_of(cls, metric: str) -> MetricRole | None:
        return thermal_role(metric)

    def __init__(self, root: Path | str = "/") -> None:
        super().__init__(root)
        self._zones: list[_Zone] | None = None

    def _discover(self) -> list[_Zone]:
        zones = [
            _Zone(path, index, read_text(path / "type") or f"zone{index}")
            for index, path in numbered_entries(self.path(THERMAL_CLASS), "thermal_zone")
        ]
        counts: dict[str, int] = {}
        for zone in zones:
            counts[zone.base_name] = counts.get(zone.base_name, 0) + 1
        for zone in zones:
            suffix = f"_zone{zone.index}" if counts[zone.base_name] > 1 else ""
            zone.metric = f"temp.{zone.base_name}{suffix}_c"
        self._zones = zones
        return zones

    def _get_zones(self) -> list[_Zone]:
        return self._zones if self._zones is not None else self._discover()

    @staticmethod
    def _read_temp_c(zone: _Zone) -> float | None:
        if read_text(zone.path / "mode") == "disabled":
            return None
        milli = read_int(zone.path / "temp")
        return celsius_or_none(milli / 1000.0) if milli is not None else None

    def available(self) -> Availability:
        zones = self._discover()
        if not zones:
            return nothing_found("thermal zones", THERMAL_CLASS, "common in VMs and containers")
        readings = {zone.metric: self._read_temp_c(zone) for zone in zones}
        labels = [
            zone.type if readings[zone.metric] is not None else f"{zone.type} (offline)" for zone in zones
        ]
        summary = f"{count_of(len(zones), 'zone')}: {', '.join(labels)}"
        if all(value is None for value in readings.values()):
            return Availability(False, f"{summary}; none readable now (disabled or read errors)")
        return Availability(True, summary)

    def metrics(self) -> list[Metric]:
        return [
            Metric(zone.metric, "C", "gauge", f"thermal_zone{zone.index} ({zone.type})")
            for zone in self._get_zones()
        ]

    def sample(self) -> SampleValues:
        return {zone.metric: self._read_temp_c(zone) for zone in self._get_zones()}

    def zone_types(self) -> dict[str, str]:
        """Metric name -> the zone's raw ``type`` string, for reports and ``doctor``."""
        return {zone.metric: zone.type for zone in self._get_zones()}

    def trip_points(self) -> dict[str, list[tuple[str, float]]]:
        """Metric name -> ``[(trip type, temp C), ...]`` by trip index; unreadable trips are left out."""
        result: dict[str, list[tuple[str, float]]] = {}
        for zone in self._get_zones():
            trips: list[tuple[int, str, float]] = []
            for file_name in listed_names(zone.path):
                match = _TRIP_RE.match(file_name)
                if not match:
                    continue
                number = int(match.group(1))
                milli = read_int(zone.path / file_name)
                if milli is None:
                    continue
                trip_type = read_text(zone.path / f"trip_point_{number}_type") or "unknown"
                trips.append((number, trip_type, milli / 1000.0))
            result[zone.metric] = [(trip_type, temp) for _, trip_type, temp in sorted(trips)]
        return result

    def hottest_c(self, sample: SampleValues) -> float | None:
        """Highest real temperature in one of this collector's samples; see module-level ``hottest_c``."""
        return hottest_c(sample)


def is_thermometer(metric: str) -> bool:
    """False for ``temp.*`` metrics of known pseudo-sensors (``edgeprof.collectors.evidence``)."""
    return is_thermometer_name(metric)


def hottest_c(sample: SampleValues) -> float | None:
    """Highest thermometer reading in ``sample``; None if there is none (``evidence.hottest_c``)."""
    return evidence_hottest_c(sample)


def thermal_role(metric: str) -> MetricRole | None:
    """``temp.<zone>_c``: a temperature of the part the zone's type names (no thermometer for a known
    pseudo-sensor, ``evidence.thermometer_role``)."""
    match = _METRIC_RE.match(metric)
    if match is None or match.group(1).endswith(SECOND_TEMP_SUFFIX):
        return None  # tegrastats' undocumented second value of a JetPack 7 zone (``jetson_role``)
    return thermometer_role(match.group(1))
