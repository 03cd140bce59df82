"""Fakes of hardware interfaces, shared by the collector and telemetry tests (each says what it mimics).

- ``FakeNvml``: a synthetic nvidia-ml-py module with two GPUs; every energy read adds 1000 mJ.
- ``synthetic_zone``: a synthetic RAPL powercap zone under a test's root.
- ``SYNTHETIC_PROBE``: a synthetic DRAM bandwidth probe result of 10 GB/s, so a report's BW % is checkable.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from types import SimpleNamespace

from edgeprof.gguf import ProbeResult
from support.captures import write


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


POWERCAP = Path("sys/class/powercap")
# Synthetic: a typical max_energy_range_uj (2^32 energy units of 61.035 uJ); not from a capture.
SYNTHETIC_RANGE_UJ = 262143328850


def synthetic_zone(
    root: Path,
    zone: str,
    name: str,
    energy_uj: int,
    wrap: int | None = SYNTHETIC_RANGE_UJ,
    kind: str = "intel-rapl",
) -> Path:
    directory = root / POWERCAP / f"{kind}:{zone}"
    write(directory / "name", name)
    write(directory / "energy_uj", str(energy_uj))
    if wrap is not None:
        write(directory / "max_energy_range_uj", str(wrap))
    return directory


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
