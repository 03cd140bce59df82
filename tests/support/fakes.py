"""Fakes of hardware interfaces, shared by the collector, telemetry and verdict tests (each says what it
mimics).

- ``FakeRoot``: the one factory for fake device roots: the sysfs, procfs and /etc files the collectors,
  the device probes and the system check read (thermal zones, cpufreq policies and switches, RAPL zones,
  x86 throttle counters, a hwmon fan, /proc/stat, /proc/<pid>/stat, /proc/meminfo, the device tree, the
  host's identity, a Jetson's L4T release and nvpmodel.conf), built under a test's folder. Each named
  method writes a synthetic tree in the kernel's (or L4T's) file names and formats from the values it is
  given; a test that takes a value from a capture says so. A capture replayed as file text goes through
  ``FakeRoot.value``/``FakeRoot.write``.
- ``FakeNvml``: a synthetic nvidia-ml-py module with two GPUs; every energy read adds 1000 mJ.
- ``SYNTHETIC_PROBE``: a synthetic DRAM bandwidth probe result of 10 GB/s, so a report's BW % is checkable.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from edgeprof.gguf import ProbeResult

THERMAL = Path("sys/class/thermal")
CPU = Path("sys/devices/system/cpu")
POWERCAP = Path("sys/class/powercap")
# Synthetic: a typical max_energy_range_uj (2^32 energy units of 61.035 uJ); not from a capture.
SYNTHETIC_RANGE_UJ = 262143328850
# Synthetic: the header line of /etc/nv_tegra_release in L4T's format (R36.4.4); not from a capture.
SYNTHETIC_L4T_RELEASE = "# R36 (release), REVISION: 4.4"


@dataclass(frozen=True)
class FakeRoot:
    """A fake device root at ``root``: give ``root`` to a collector as its root."""

    root: Path

    def path(self, rel: str | Path) -> Path:
        """``rel`` under the root (``/sys/...`` or ``sys/...``); a path already under the root as it is."""
        rel = Path(rel)
        if rel.is_absolute() and rel.is_relative_to(self.root):
            return rel
        return self.root / str(rel).lstrip("/")

    def write(self, rel: str | Path, text: str) -> Path:
        """A file holding exactly ``text`` (folders created)."""
        path = self.path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def value(self, rel: str | Path, value: object) -> Path:
        """A one-value sysfs file: the value and a newline, as the kernel prints it."""
        return self.write(rel, f"{value}\n")

    def replace(self, rel: str | Path, value: object) -> Path:
        """``value`` written atomically: a sampler reading concurrently never sees a half-written file."""
        path = self.path(rel)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(f"{value}\n")
        os.replace(tmp, path)
        return path

    def thermal_zone(
        self,
        index: int,
        zone_type: str,
        milli_c: int | None = None,
        *,
        mode: str | None = None,
        trips: Iterable[tuple[str, int]] = (),
    ) -> Path:
        """/sys/class/thermal/thermal_zoneN: its type, temperature (m°C), mode and ``(type, m°C)`` trips."""
        zone = self.root / THERMAL / f"thermal_zone{index}"
        self.value(zone / "type", zone_type)
        if milli_c is not None:
            self.value(zone / "temp", milli_c)
        if mode is not None:
            self.value(zone / "mode", mode)
        for i, (kind, trip_milli_c) in enumerate(trips):
            self.value(zone / f"trip_point_{i}_type", kind)
            self.value(zone / f"trip_point_{i}_temp", trip_milli_c)
        return zone

    def cpufreq_policy(
        self,
        first: int,
        cpus: str,
        cur_khz: int,
        cap_khz: int,
        hw_max_khz: int,
        governor: str,
        *,
        driver: str | None = None,
    ) -> Path:
        """/sys/devices/system/cpu/cpufreq/policyN: its CPUs, current clock, cap, hardware maximum (kHz)."""
        policy = self.root / CPU / "cpufreq" / f"policy{first}"
        files: dict[str, object] = {
            "related_cpus": cpus,
            "affected_cpus": cpus,
            "scaling_cur_freq": cur_khz,
            "scaling_max_freq": cap_khz,
            "cpuinfo_max_freq": hw_max_khz,
            "scaling_governor": governor,
        }
        if driver is not None:
            files["scaling_driver"] = driver
        for name, value in files.items():
            self.value(policy / name, value)
        return policy

    def rapl_zone(
        self,
        zone: str,
        name: str,
        energy_uj: int,
        wrap: int | None = SYNTHETIC_RANGE_UJ,
        kind: str = "intel-rapl",
    ) -> Path:
        """/sys/class/powercap/<kind>:<zone>: its name, energy counter and (unless None) its wrap."""
        directory = self.root / POWERCAP / f"{kind}:{zone}"
        self.value(directory / "name", name)
        self.value(directory / "energy_uj", energy_uj)
        if wrap is not None:
            self.value(directory / "max_energy_range_uj", wrap)
        return directory

    def throttle_counters(
        self, index: int, package: int | None, core_count: int, package_count: int, with_time: bool = True
    ) -> Path:
        """/sys/devices/system/cpu/cpuN/thermal_throttle, named as arch/x86/kernel/cpu/mce/therm_throt.c
        names them, and the CPU's package."""
        cpu = self.root / CPU / f"cpu{index}"
        throttle = cpu / "thermal_throttle"
        self.value(throttle / "core_throttle_count", core_count)
        self.value(throttle / "package_throttle_count", package_count)
        self.value(throttle / "core_throttle_max_time_ms", 7)
        self.value(throttle / "package_throttle_max_time_ms", 9)
        if with_time:
            self.value(throttle / "core_throttle_total_time_ms", core_count * 10)
            self.value(throttle / "package_throttle_total_time_ms", package_count * 10)
        if package is not None:
            self.value(cpu / "topology" / "physical_package_id", package)
        return cpu

    def proc_stat(self, busy: float, total: float, steal: float, running: int) -> Path:
        """/proc/stat with one ``cpu`` line (user = ``busy`` jiffies; the rest of ``total`` idle, or stolen)
        and the run queue."""
        idle = total - busy - steal
        return self.write(
            "proc/stat",
            f"cpu  {int(busy)} 0 0 {int(idle)} 0 0 0 {int(steal)} 0 0\n"
            f"procs_running {running}\nprocs_blocked 0\n",
        )

    def process(
        self,
        pid: int,
        comm: str,
        utime_ticks: float,
        *,
        state: str = "R",
        ppid: int = 1,
        folder: str | None = None,
    ) -> Path:
        """/proc/<pid>/stat (under /proc/<folder> when given, e.g. ``self``), ``utime_ticks`` in field 14."""
        line = f"{pid} ({comm}) {state} {ppid} 1 1 0 -1 0 0 0 0 0 {int(utime_ticks)} 0 0 0 20 0 1 0 1\n"
        return self.write(f"proc/{folder or pid}/stat", line)

    def scaling_governor(self, policy: int, governor: str) -> Path:
        """/sys/devices/system/cpu/cpufreq/policyN/scaling_governor alone (what the system check reads)."""
        return self.value(CPU / "cpufreq" / f"policy{policy}" / "scaling_governor", governor)

    def intel_no_turbo(self, no_turbo: int) -> Path:
        """/sys/devices/system/cpu/intel_pstate/no_turbo: 1 when turbo is off, 0 when it is on."""
        return self.value(CPU / "intel_pstate" / "no_turbo", no_turbo)

    def cpufreq_boost(self, boost: int) -> Path:
        """/sys/devices/system/cpu/cpufreq/boost (acpi-cpufreq's switch): 1 when boost is on."""
        return self.value(CPU / "cpufreq" / "boost", boost)

    def hwmon_fan(self, index: int, pwm: int, name: str = "pwmfan") -> Path:
        """/sys/class/hwmon/hwmonN: the driver's ``name`` and the fan's ``pwm1`` duty (0-255)."""
        hwmon = self.root / "sys/class/hwmon" / f"hwmon{index}"
        self.value(hwmon / "name", name)
        self.value(hwmon / "pwm1", pwm)
        return hwmon

    def meminfo(self, **fields_kb: int) -> Path:
        """/proc/meminfo: one ``Name: N kB`` line per field, in the order given (the kernel pads the numbers
        into a column; the readers split on whitespace, so these lines are not padded)."""
        return self.write("proc/meminfo", "".join(f"{name}: {kb} kB\n" for name, kb in fields_kb.items()))

    def device_tree(self, model: str, compatible: Iterable[str] | None = None) -> Path:
        """/proc/device-tree/model and, when given, ``compatible``, as the kernel exposes them: each string
        NUL-terminated, no newline (an empty ``compatible`` is an empty file)."""
        tree = self.root / "proc/device-tree"
        tree.mkdir(parents=True, exist_ok=True)
        (tree / "model").write_bytes(model.encode() + b"\0")
        if compatible is not None:
            (tree / "compatible").write_bytes(b"".join(c.encode() + b"\0" for c in compatible))
        return tree

    def host_identity(self, hostname: str, machine_id: str) -> Path:
        """/etc/hostname and /etc/machine-id (32 lowercase hex digits), one line each."""
        self.value("etc/hostname", hostname)
        self.value("etc/machine-id", machine_id)
        return self.root / "etc"

    def l4t_release(self, line: str = SYNTHETIC_L4T_RELEASE) -> Path:
        """/etc/nv_tegra_release holding its header line alone (``# R36 (release), REVISION: 4.4, ...``):
        what marks a Jetson and names its L4T release."""
        return self.value("etc/nv_tegra_release", line)

    def nvpmodel_conf(self, modes: Mapping[str, Iterable[str]], default: int = 0) -> Path:
        """/etc/nvpmodel.conf: a ``< POWER_MODEL ID=i NAME=... >`` header per mode, numbered in the order
        given and followed by that mode's setting lines, then ``< PM_CONFIG DEFAULT=default >``."""
        lines: list[str] = []
        for i, (name, settings) in enumerate(modes.items()):
            lines.append(f"< POWER_MODEL ID={i} NAME={name} >")
            lines.extend(settings)
        lines.append(f"< PM_CONFIG DEFAULT={default} >")
        return self.write("etc/nvpmodel.conf", "".join(f"{line}\n" for line in lines))


class NVMLError(Exception):
    """Mirrors nvidia-ml-py: a base class carrying the NVML return code in ``value``."""

    code = 999

    def __init__(self, message: str = "") -> None:
        super().__init__(message or type(self).__name__)
        self.value = self.code


class NVMLError_NotSupported(NVMLError):
    code = 3


class NVMLError_DriverNotLoaded(NVMLError):
    code = 9


class NVMLError_FunctionNotFound(NVMLError):
    code = 13


class NVMLError_Unknown(NVMLError):
    code = 999


class FakeNvml:
    """The subset of ``pynvml`` the collector calls. Handles are ints; ``calls`` counts every call."""

    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_FunctionNotFound = NVMLError_FunctionNotFound
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_FUNCTION_NOT_FOUND = 13

    def __init__(self, names: tuple[str, ...] = ("NVIDIA H200", "NVIDIA L4")) -> None:
        self.names = names
        self.calls: Counter[str] = Counter()
        self.init_error: Exception | None = None
        self.initialised = 0
        # (function name, gpu index) -> exception raised instead of a value
        self.errors: dict[tuple[str, int], Exception] = {}
        self.energy_mj = [1_000_000, 2_000_000]

    def _call(self, fn: str, handle: int) -> None:
        self.calls[fn] += 1
        error = self.errors.get((fn, handle))
        if error is not None:
            raise error

    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        if self.init_error is not None:
            raise self.init_error
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self.calls["nvmlShutdown"] += 1
        self.initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return "570.86.15"

    def nvmlDeviceGetCount(self) -> int:
        return len(self.names)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return self.names[handle].encode()  # older nvidia-ml-py returns bytes

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        self._call("temp", handle)
        return 40 + handle

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        self._call("power", handle)
        return 150_000 + handle

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        self._call("energy", handle)
        self.energy_mj[handle] += 1000
        return self.energy_mj[handle]

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        self._call("util", handle)
        return SimpleNamespace(gpu=90 + handle, memory=30 + handle)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        self._call("mem", handle)
        return SimpleNamespace(total=80 * 1024**3, free=0, used=(4096 + handle) * 1024**2)

    def nvmlDeviceGetClockInfo(self, handle: int, clock: int) -> int:
        self._call(f"clock{clock}", handle)
        return {1: 1980, 2: 2619}[clock] + handle

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        self._call("events", handle)
        return 0x20 | 0x4

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: int) -> int:
        self._call("throttle", handle)
        return 0x1


SYNTHETIC_PROBE = ProbeResult(  # synthetic: a fixed figure, so the report's BW % is checkable
    gbps=10.0,
    read_gbps=10.0,
    copy_gbps=8.0,
    method="synthetic probe",
    threads=1,
    buffer_mb=1.0,
    passes=1,
    duration_s=0.0,
)
