"""CPU clock per cpufreq policy: current, software cap, hardware maximum.

A policy is a group of CPUs sharing one clock (one per cluster on Jetson/ARM, often one per CPU on x86);
it is named after its first CPU, so ``cpufreq.policy4.cur_mhz`` is the cluster that starts at cpu4. The
cap (``scaling_max_freq``) falling below the hardware maximum is how thermal throttling and nvpmodel show.
"""

from __future__ import annotations

import re
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
    read_text,
)
from edgeprof.collectors.roles import MetricRole

CPU_DIR = "/sys/devices/system/cpu"
POLICY_DIR = "/sys/devices/system/cpu/cpufreq"

# metric suffix -> files tried in order (kHz). cpuinfo_cur_freq is the hardware readback: it is the only
# current-clock file on some old drivers (the x86 capture lists it but no scaling_cur_freq).
_FIELDS: dict[str, tuple[str, ...]] = {
    "cur_mhz": ("scaling_cur_freq", "cpuinfo_cur_freq"),
    "max_mhz": ("scaling_max_freq",),
    "hw_max_mhz": ("cpuinfo_max_freq",),
}
_DESCRIPTIONS = {
    "cur_mhz": "current clock",
    "max_mhz": "policy cap (scaling_max_freq: governor, nvpmodel, thermal limits)",
    "hw_max_mhz": "hardware maximum (cpuinfo_max_freq)",
}


def parse_cpu_list(text: str | None) -> list[int]:
    """Kernel CPU lists, either ``0-3,6`` (ranges) or ``0 1 2 3`` (related_cpus); junk gives []."""
    if not text:
        return []
    cpus: list[int] = []
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        try:
            if "-" in part:
                lo, hi = part.split("-", 1)
                cpus.extend(range(int(lo), int(hi) + 1))
            else:
                cpus.append(int(part))
        except ValueError:
            return []
    return sorted(set(cpus))


def _trailing_int(path: Path) -> int:
    match = re.search(r"(\d+)$", path.name if path.name != "cpufreq" else path.parent.name)
    return int(match.group(1)) if match else -1


@dataclass
class _Policy:
    name: str  # "policy0"
    path: Path
    cpus: list[int]
    files: dict[str, tuple[str, ...]] = field(default_factory=dict)  # metric suffix -> candidate files


class CpuFreqCollector(Collector):
    name = "sysfs_cpufreq"

    @classmethod
    def role_of(cls, metric: str) -> MetricRole | None:
        return cpufreq_role(metric)

    def __init__(self, root: Path | str = "/") -> None:
        super().__init__(root)
        self._policies: list[_Policy] | None = None

    def _candidate_dirs(self) -> list[Path]:
        dirs = [path for _, path in numbered_entries(self.path(POLICY_DIR), "policy")]
        if dirs:
            return dirs
        # Kernels before 4.4 have no policyN directories, only per-CPU cpufreq/ (shared ones symlinked).
        cpu_dirs = [path / "cpufreq" for _, path in numbered_entries(self.path(CPU_DIR), "cpu")]
        return [d for d in cpu_dirs if d.is_dir()]

    def _discover(self) -> list[_Policy]:
        policies: list[_Policy] = []
        seen: set[int] = set()
        for directory in self._candidate_dirs():
            own = _trailing_int(directory)
            cpus = (
                parse_cpu_list(read_text(directory / "related_cpus"))
                or parse_cpu_list(read_text(directory / "affected_cpus"))
                or [own]
            )
            # Name after the first CPU, as the kernel does, so the per-CPU fallback and policyN agree and
            # CPUs sharing one clock are reported once.
            first = min(cpus)
            if first in seen:
                continue
            seen.add(first)
            policy = _Policy(f"policy{first}", directory, cpus)
            for suffix, candidates in _FIELDS.items():
                present = tuple(f for f in candidates if (directory / f).exists())
                if present:
                    policy.files[suffix] = present
            if policy.files:
                policies.append(policy)
        self._policies = policies
        return policies

    def _get_policies(self) -> list[_Policy]:
        return self._policies if self._policies is not None else self._discover()

    def available(self) -> Availability:
        policies = self._discover()
        if not policies:
            return Availability(False, "no cpufreq policies (VM or cpufreq driver not loaded)")
        driver = read_text(policies[0].path / "scaling_driver")
        parts = []
        for policy in policies:
            cpus = _format_cpus(policy.cpus)
            governor = read_text(policy.path / "scaling_governor")
            parts.append(f"{policy.name} (cpu{cpus}{', ' + governor if governor else ''})")
        head = f"{count_of(len(policies), 'cpufreq policy', 'cpufreq policies')}"
        if driver:
            head += f" via {driver}"
        return Availability(True, f"{head}: {', '.join(parts)}")

    def metrics(self) -> list[Metric]:
        return [
            Metric(f"cpufreq.{policy.name}.{suffix}", "MHz", "gauge", f"{_DESCRIPTIONS[suffix]}, cpu{cpus}")
            for policy in self._get_policies()
            for cpus in [_format_cpus(policy.cpus)]
            for suffix in policy.files
        ]

    def sample(self) -> SampleValues:
        values: SampleValues = {}
        for policy in self._get_policies():
            for suffix, candidates in policy.files.items():
                values[f"cpufreq.{policy.name}.{suffix}"] = _first_mhz(policy.path, candidates)
        return values

    def governors(self) -> dict[str, str | None]:
        """Policy name (``policy0``) -> scaling governor (``schedutil``...), None where unreadable."""
        return {p.name: read_text(p.path / "scaling_governor") for p in self._get_policies()}

    def policy_cpus(self) -> dict[str, list[int]]:
        """Policy name -> the CPUs it clocks (``related_cpus``)."""
        return {p.name: list(p.cpus) for p in self._get_policies()}


def _first_mhz(directory: Path, candidates: tuple[str, ...]) -> float | None:
    for file_name in candidates:
        khz = read_int(directory / file_name)
        # A clock of 0 kHz cannot be real; report it as unread rather than as a number.
        if khz is not None and khz > 0:
            return khz / 1000.0
    return None


def _format_cpus(cpus: list[int]) -> str:
    if len(cpus) > 1 and cpus == list(range(cpus[0], cpus[-1] + 1)):
        return f"{cpus[0]}-{cpus[-1]}"
    return ",".join(str(c) for c in cpus)


def cpufreq_role(metric: str) -> MetricRole | None:
    """``cpufreq.policyN.{cur,max,hw_max}_mhz``: the policy's clock (capped by ``max_mhz``), its cap
    (bounded by ``hw_max_mhz``) and the hardware maximum."""
    parts = metric.split(".")
    if len(parts) != 3 or parts[0] != "cpufreq" or not parts[1].startswith("policy"):
        return None
    base = f"cpufreq.{parts[1]}"
    if parts[2] == "cur_mhz":
        return MetricRole("clock", "MHz", "cpu", clock_max=f"{base}.max_mhz", domain="cpu")
    if parts[2] == "max_mhz":
        return MetricRole("clock_cap", "MHz", "cpu", clock_max=f"{base}.hw_max_mhz", domain=parts[1])
    if parts[2] == "hw_max_mhz":
        return MetricRole("clock_limit", "MHz", "cpu", domain=parts[1])
    return None
