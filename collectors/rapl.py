"""Intel/AMD RAPL energy counters from ``/sys/class/powercap/intel-rapl:*`` (x86 hosts only).

Each zone's ``energy_uj`` is a monotonic microjoule counter that wraps at ``max_energy_range_uj``; this
collector returns the raw readings and the sampler turns them into energy with ``counter_delta``.

Names come from each zone's ``name`` file. Package 0 and its subzones drop the package number, so a
single-socket box reports ``energy.package_uj``, ``energy.core_uj``, ``energy.uncore_uj``, ``energy.dram_uj``
(``<domain>[.<instance>].<name>_<unit>``, as every collector's metrics); further sockets read
``energy.package1_uj`` and ``energy.package1.dram_uj``; platform zones keep their name (``energy.psys_uj``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from edgeprof.collectors.base import (
    Availability,
    Collector,
    Metric,
    SampleValues,
    count_of,
    counter_delta,
    read_int,
    read_text,
)
from edgeprof.collectors.roles import Component, MetricRole

POWERCAP_CLASS = "/sys/class/powercap"

ROOT_ONLY_REASON = (
    "RAPL energy_uj is readable by root only (CVE-2020-8694 'Platypus' mitigation): run edgeprof as "
    "root, or grant read access with a udev rule, e.g. "
    '/etc/udev/rules.d/70-rapl.rules: SUBSYSTEM=="powercap", ACTION=="add", '
    'RUN+="/bin/chmod a+r /sys%p/energy_uj" (this re-opens the power side channel to local users)'
)

# Zone directories are intel-rapl:<package>[:<subzone>]; intel-rapl-mmio:* duplicates package energy
# through another interface and is deliberately not matched.
_ZONE_RE = re.compile(r"^intel-rapl:(\d+(?::\d+)*)$")
_PACKAGE_NAME_RE = re.compile(r"^package-(\d+)$")


def energy_j_between(prev_uj: float | None, cur_uj: float | None, wrap_uj: float | None) -> float | None:
    """Joules between two ``energy_uj`` readings, across at most one wraparound at ``wrap_uj``.

    The hardware counter wraps one energy unit (~15-61 uJ) past ``max_energy_range_uj``; using the range
    itself as the wrap point is off by that one unit per wrap, far below a sample's noise.
    """
    delta = counter_delta(prev_uj, cur_uj, wrap_uj)
    return None if delta is None else delta / 1_000_000.0


def _sanitize(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _zone_sort_key(zone_id: str) -> tuple[int, ...]:
    return tuple(int(part) for part in zone_id.split(":"))


def _package_part(name: str) -> str:
    """``package-0`` -> ``package``; ``package-1`` -> ``package1``; other names sanitised."""
    match = _PACKAGE_NAME_RE.match(name)
    if match:
        number = int(match.group(1))
        return "package" if number == 0 else f"package{number}"
    return _sanitize(name)


@dataclass
class _Zone:
    zone_id: str  # "0", "0:1"
    path: Path
    label: str  # the zone's own name file, e.g. "package-0", "dram"
    metric: str
    wrap: float | None


class RaplCollector(Collector):
    name = "rapl"
    reads_at_boundaries = True

    @classmethod
    def role_of(cls, metric: str) -> MetricRole | None:
        return rapl_role(metric)

    def __init__(self, root: Path | str = "/") -> None:
        super().__init__(root)
        self._zones: list[_Zone] | None = None

    def _discover(self) -> list[_Zone]:
        base = self.path(POWERCAP_CLASS)
        found: dict[str, Path] = {}
        try:
            for entry in base.iterdir():
                match = _ZONE_RE.match(entry.name)
                if match and (entry / "energy_uj").exists():
                    found[match.group(1)] = entry
        except OSError:
            pass
        labels = {zone_id: read_text(path / "name") or f"zone{zone_id}" for zone_id, path in found.items()}
        zones: list[_Zone] = []
        for zone_id in sorted(found, key=_zone_sort_key):
            path = found[zone_id]
            label = labels[zone_id]
            parent_id, _, _ = zone_id.rpartition(":")
            if not parent_id:
                stem = _package_part(label)
            else:
                # The parent's name, not its directory index, decides the prefix: on laptops intel-rapl:1 is
                # psys, not a second package.
                parent = _package_part(labels.get(parent_id, f"zone{parent_id}"))
                own = _sanitize(label) or f"zone{zone_id.replace(':', '_')}"
                stem = own if parent == "package" else f"{parent}.{own}"
            wrap = read_int(path / "max_energy_range_uj")
            zones.append(_Zone(zone_id, path, label, stem, float(wrap) if wrap else None))
        counts: dict[str, int] = {}
        for zone in zones:
            counts[zone.metric] = counts.get(zone.metric, 0) + 1
        for zone in zones:
            suffix = f"_zone{zone.zone_id.replace(':', '_')}" if counts[zone.metric] > 1 else ""
            zone.metric = f"energy.{zone.metric}{suffix}_uj"
        self._zones = zones
        return zones

    def _get_zones(self) -> list[_Zone]:
        return self._zones if self._zones is not None else self._discover()

    def available(self) -> Availability:
        zones = self._discover()
        if not zones:
            return Availability(
                False,
                f"no RAPL zones under {POWERCAP_CLASS} (not an x86 host, a VM, or the intel_rapl_msr "
                "module is not loaded)",
            )
        denied: list[str] = []
        readable: list[str] = []
        for zone in zones:
            try:
                (zone.path / "energy_uj").read_text()
            except PermissionError:
                denied.append(zone.label)
                continue
            except OSError:
                continue
            readable.append(zone.label)
        found = f"{count_of(len(zones), 'RAPL zone')} found"
        if denied and not readable:
            return Availability(False, f"{found}, but {ROOT_ONLY_REASON}")
        if not readable:
            return Availability(False, f"{found}, but no energy_uj could be read")
        reason = f"{count_of(len(readable), 'RAPL zone')}: {', '.join(readable)}"
        if denied:
            reason += f"; not readable: {', '.join(denied)}"
        return Availability(True, reason)

    def metrics(self) -> list[Metric]:
        return [
            Metric(
                zone.metric,
                "uJ",
                "counter",
                f"RAPL {zone.label} (intel-rapl:{zone.zone_id}) cumulative energy",
                zone.wrap,
            )
            for zone in self._get_zones()
        ]

    def sample(self) -> SampleValues:
        values: SampleValues = {}
        for zone in self._get_zones():
            raw = read_int(zone.path / "energy_uj")
            values[zone.metric] = None if raw is None else float(raw)
        return values

    def wraps(self) -> dict[str, float | None]:
        """Metric name -> ``max_energy_range_uj`` (the wrap value also carried by ``Metric.wrap``)."""
        return {zone.metric: zone.wrap for zone in self._get_zones()}


def rapl_role(metric: str) -> MetricRole | None:
    """``energy.<zone>_uj`` counters. ``psys`` is the whole platform (board input); a ``package`` zone (one
    per socket) is the CPU package; core/uncore/dram are parts already inside or beside a package and are
    never added to it (the wrap value is per machine: the live ``Metric.wrap`` carries it)."""
    if not (metric.startswith("energy.") and metric.endswith("_uj")):
        return None
    zone = metric[len("energy.") : -len("_uj")]
    if zone == "psys" or zone.startswith("psys_zone"):
        return MetricRole("energy", "uJ", "board", whole_board=True, scope="board_input")
    if zone == "package" or zone.startswith("package_zone"):
        return MetricRole("energy", "uJ", "cpu", scope="device", instance=zone)
    component: Component = "dram" if "dram" in zone else "gpu" if "uncore" in zone else "cpu"
    return MetricRole("energy", "uJ", component)
