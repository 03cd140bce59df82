"""NVIDIA GPU telemetry through NVML (the ``pynvml`` module of the ``nvidia-ml-py`` package).

Metrics, one set per GPU in NVML index order (``i`` = 0, 1, ...), as ``name`` (unit, kind): source.

- ``gpu{i}.temp_c`` (C, gauge): ``nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU)``.
- ``gpu{i}.power_mw`` (mW, gauge): ``nvmlDeviceGetPowerUsage``, board power draw.
- ``gpu{i}.energy_mj`` (mJ, counter): ``nvmlDeviceGetTotalEnergyConsumption``, energy since the driver
  was loaded; a 64-bit counter, declared with no wrap value.
- ``gpu{i}.util_pct`` (pct, gauge): ``nvmlDeviceGetUtilizationRates(h).gpu``, share of time a kernel ran.
- ``gpu{i}.mem_util_pct`` (pct, gauge): ``nvmlDeviceGetUtilizationRates(h).memory``, share of time device
  memory was read or written (a bandwidth proxy, not occupancy).
- ``gpu{i}.mem_used_mb`` (MB, gauge): ``nvmlDeviceGetMemoryInfo(h).used`` in MiB.
- ``gpu{i}.sm_clock_mhz`` / ``gpu{i}.mem_clock_mhz`` (MHz, gauge): ``nvmlDeviceGetClockInfo`` with
  ``NVML_CLOCK_SM`` / ``NVML_CLOCK_MEM``.
- ``gpu{i}.clock_event_reasons`` (bitmask, gauge): ``nvmlDeviceGetCurrentClocksEventReasons``, or on older
  drivers ``nvmlDeviceGetCurrentClocksThrottleReasons`` (same bits), as a float; names of the set bits come
  from ``decode_clock_event_reasons``.

A field the device does not support (``NVMLError_NotSupported``, common on Jetson Orin/Thor integrated
GPUs, or a function the installed driver lacks) reads None and is remembered, so it is not asked again
every tick. Any other error on one field makes only that field None for that tick. ``sample`` never raises.

``root`` is accepted for the collector contract only: NVML talks to the driver, not to files.
"""

from __future__ import annotations

import importlib
import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from edgeprof.collectors.base import Availability, Collector, Metric, MetricKind, SampleValues
from edgeprof.collectors.evidence import thermometer_role
from edgeprof.collectors.flags import Cause, FlagBit, FlagDecoder
from edgeprof.collectors.roles import MetricRole

log = logging.getLogger(__name__)

INSTALL_HINT = "nvidia-ml-py not installed (pip install edgeprof[nvidia])"
MIB = 1024.0 * 1024.0

# NVML constants, used when the module object does not define them (values from nvml.h).
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_FUNCTION_NOT_FOUND = 13

# nvmlClocksEventReason* bits (nvml.h; the same values as the deprecated nvmlClocksThrottleReason*).
CLOCK_EVENT_REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "GpuIdle"),
    (0x2, "ApplicationsClocksSetting"),
    (0x4, "SwPowerCap"),
    (0x8, "HwSlowdown"),
    (0x10, "SyncBoost"),
    (0x20, "SwThermalSlowdown"),
    (0x40, "HwThermalSlowdown"),
    (0x80, "HwPowerBrakeSlowdown"),
    (0x100, "DisplayClockSetting"),
)
# What each reason that holds clocks down says held them (GpuIdle, application clocks, SyncBoost and
# display clocks are normal operation, not throttling). HwSlowdown is the board's slowdown pin, pulled by
# its temperature or by its power brake alike.
_CAUSES: dict[str, Cause] = {
    "SwPowerCap": "power",
    "HwSlowdown": "heat or power",
    "SwThermalSlowdown": "heat",
    "HwThermalSlowdown": "heat",
    "HwPowerBrakeSlowdown": "power",
}
CLOCK_EVENT_FLAGS = FlagDecoder(
    "nvml",
    tuple(
        FlagBit(bit.bit_length() - 1, name, throttles=name in _CAUSES, cause=_CAUSES.get(name))
        for bit, name in CLOCK_EVENT_REASONS
    ),
)


def decode_clock_event_reasons(mask: int) -> list[str]:
    """Names of the clock event (throttle) reason bits set in ``mask``, lowest bit first.

    Bits NVML may add later are reported as ``Unknown(0x...)`` rather than dropped. 0 (no reason) -> [].
    """
    return CLOCK_EVENT_FLAGS.names(mask)


def _import_pynvml() -> Any:
    return importlib.import_module("pynvml")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _error_code(exc: BaseException) -> int | None:
    code = getattr(exc, "value", None)
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _describe_error(exc: BaseException) -> str:
    text = str(exc).strip()
    name = type(exc).__name__
    return f"{text} ({name})" if text and text != name else name


class _NoFunction(Exception):
    """The NVML module offers no function for a field at all."""


@dataclass(frozen=True)
class _Field:
    """One NVML read feeding one or more metrics (utilisation rates give two)."""

    key: str
    metrics: tuple[tuple[str, str, MetricKind, str], ...]  # (suffix, unit, kind, description)


_FIELDS: tuple[_Field, ...] = (
    _Field("temp", (("temp_c", "C", "gauge", "GPU die temperature"),)),
    _Field("power", (("power_mw", "mW", "gauge", "board power draw"),)),
    _Field("energy", (("energy_mj", "mJ", "counter", "energy since driver load (64-bit, no wrap)"),)),
    _Field(
        "util",
        (
            ("util_pct", "pct", "gauge", "share of time a kernel was running"),
            ("mem_util_pct", "pct", "gauge", "share of time device memory was read or written"),
        ),
    ),
    _Field("mem", (("mem_used_mb", "MB", "gauge", "device memory in use (MiB)"),)),
    _Field("sm_clock", (("sm_clock_mhz", "MHz", "gauge", "SM clock"),)),
    _Field("mem_clock", (("mem_clock_mhz", "MHz", "gauge", "memory clock"),)),
    _Field(
        "clock_events",
        (("clock_event_reasons", "bitmask", "gauge", "clock event/throttle reason bits (see module doc)"),),
    ),
)


@dataclass
class _Gpu:
    index: int
    handle: Any
    name: str


class NvmlCollector(Collector):
    name = "nvml"

    @classmethod
    def role_of(cls, metric: str) -> MetricRole | None:
        return nvml_role(metric)

    def __init__(self, root: Path | str = "/", nvml: Any | None = None) -> None:
        super().__init__(root)
        self._nvml: Any | None = nvml
        self._lock = threading.Lock()
        self._initialised = False
        self._gpus: list[_Gpu] = []
        self._unsupported: set[tuple[int, str]] = set()
        self._logged: set[tuple[int, str]] = set()
        # Which clock-reason function works here: resolved on first use (None: not yet known).
        self._reasons_fn: str | None = None

    # -- setup -----------------------------------------------------------------------------------------

    def _module(self) -> Any | None:
        if self._nvml is None:
            try:
                self._nvml = _import_pynvml()
            except ImportError:
                return None
        return self._nvml

    def _const(self, name: str, default: int) -> Any:
        value = getattr(self._nvml, name, default)
        return value if value is not None else default

    def available(self) -> Availability:
        try:
            nvml = self._module()
        except Exception as exc:  # noqa: BLE001 - a broken install is "not here" too
            return Availability(False, f"NVML unavailable: import pynvml failed: {_describe_error(exc)}")
        if nvml is None:
            return Availability(False, INSTALL_HINT)
        with self._lock:
            if not self._initialised:
                try:
                    nvml.nvmlInit()
                except Exception as exc:  # noqa: BLE001 - any init failure just means "not here"
                    return Availability(False, f"NVML unavailable: {_describe_error(exc)}")
                self._initialised = True
            try:
                count = int(nvml.nvmlDeviceGetCount())
            except Exception as exc:  # noqa: BLE001
                self._shutdown_locked()
                return Availability(False, f"NVML unavailable: device count failed: {_describe_error(exc)}")
            gpus: list[_Gpu] = []
            skipped: list[str] = []
            for index in range(count):
                try:
                    handle = nvml.nvmlDeviceGetHandleByIndex(index)
                except Exception as exc:  # noqa: BLE001 - one broken GPU must not hide the others
                    skipped.append(f"gpu{index} ({_describe_error(exc)})")
                    continue
                gpus.append(_Gpu(index, handle, self._device_name(handle)))
            self._gpus = gpus
            if not gpus:
                self._shutdown_locked()
                detail = f": {', '.join(skipped)}" if skipped else ""
                return Availability(False, f"NVML: no usable NVIDIA GPU (device count {count}){detail}")
        # One probe reading learns which fields this device does not support.
        self.sample()
        parts = [f"gpu{g.index} {g.name}" for g in gpus]
        version = self._driver_version()
        reason = f"NVML{' ' + version if version else ''}: {', '.join(parts)}"
        with self._lock:
            unsupported = sorted(self._unsupported)
        if unsupported:
            reason += "; not supported: " + ", ".join(f"gpu{i} {key}" for i, key in unsupported)
        if skipped:
            reason += "; skipped: " + ", ".join(skipped)
        return Availability(True, reason)

    def _device_name(self, handle: Any) -> str:
        try:
            name = self._nvml.nvmlDeviceGetName(handle) if self._nvml is not None else None
        except Exception:  # noqa: BLE001 - a name is cosmetic
            return "unknown GPU"
        if isinstance(name, bytes):
            name = name.decode(errors="replace")
        return str(name) if name else "unknown GPU"

    def _driver_version(self) -> str:
        nvml = self._nvml
        getter = getattr(nvml, "nvmlSystemGetDriverVersion", None)
        if getter is None:
            return ""
        try:
            version = getter()
        except Exception:  # noqa: BLE001
            return ""
        if isinstance(version, bytes):
            version = version.decode(errors="replace")
        return f"driver {version}" if version else ""

    def device_names(self) -> list[str]:
        """Names of the GPUs found by ``available`` (NVML index order); empty before or if none."""
        with self._lock:
            return [gpu.name for gpu in self._gpus]

    # -- contract --------------------------------------------------------------------------------------

    def metrics(self) -> list[Metric]:
        with self._lock:
            gpus = list(self._gpus)
        out: list[Metric] = []
        for gpu in gpus:
            for fld in _FIELDS:
                for suffix, unit, kind, description in fld.metrics:
                    name = f"gpu{gpu.index}.{suffix}"
                    out.append(Metric(name, unit, kind, f"gpu{gpu.index} ({gpu.name}) {description}", None))
        return out

    def sample(self) -> SampleValues:
        values: SampleValues = {}
        with self._lock:
            gpus = list(self._gpus) if self._initialised else []
            for gpu in gpus:
                for fld in _FIELDS:
                    values.update(self._read_field(gpu, fld))
        return values

    def close(self) -> None:
        with self._lock:
            self._shutdown_locked()

    def _shutdown_locked(self) -> None:
        if self._initialised and self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception as exc:  # noqa: BLE001 - closing must not fail
                log.debug("nvml: shutdown failed: %s", _describe_error(exc))
        self._initialised = False
        self._gpus = []

    # -- reading ---------------------------------------------------------------------------------------

    def _read_field(self, gpu: _Gpu, fld: _Field) -> SampleValues:
        names = [f"gpu{gpu.index}.{suffix}" for suffix, *_ in fld.metrics]
        empty: SampleValues = dict.fromkeys(names)
        if (gpu.index, fld.key) in self._unsupported:
            return empty
        try:
            raw = self._reader(fld.key)(gpu.handle)
        except Exception as exc:  # noqa: BLE001 - sample() never raises
            if self._is_unsupported(exc):
                self._unsupported.add((gpu.index, fld.key))
                log.info("nvml: gpu%d %s not supported; not asked again", gpu.index, fld.key)
            elif (gpu.index, fld.key) not in self._logged:
                self._logged.add((gpu.index, fld.key))
                log.warning("nvml: gpu%d %s failed: %s", gpu.index, fld.key, _describe_error(exc))
            return empty
        return dict(zip(names, raw, strict=True))

    def _reader(self, key: str) -> Callable[[Any], tuple[float | None, ...]]:
        nvml = self._nvml
        if nvml is None:
            raise RuntimeError("NVML module not loaded")
        if key == "temp":
            sensor = self._const("NVML_TEMPERATURE_GPU", NVML_TEMPERATURE_GPU)
            return lambda h: (_number(nvml.nvmlDeviceGetTemperature(h, sensor)),)
        if key == "power":
            return lambda h: (_number(nvml.nvmlDeviceGetPowerUsage(h)),)
        if key == "energy":
            return lambda h: (_number(nvml.nvmlDeviceGetTotalEnergyConsumption(h)),)
        if key == "util":

            def util(h: Any) -> tuple[float | None, ...]:
                rates = nvml.nvmlDeviceGetUtilizationRates(h)
                return (_number(getattr(rates, "gpu", None)), _number(getattr(rates, "memory", None)))

            return util
        if key == "mem":

            def mem(h: Any) -> tuple[float | None, ...]:
                used = _number(getattr(nvml.nvmlDeviceGetMemoryInfo(h), "used", None))
                return (used / MIB if used is not None else None,)

            return mem
        if key == "sm_clock":
            clock_sm = self._const("NVML_CLOCK_SM", NVML_CLOCK_SM)
            return lambda h: (_number(nvml.nvmlDeviceGetClockInfo(h, clock_sm)),)
        if key == "mem_clock":
            clock_mem = self._const("NVML_CLOCK_MEM", NVML_CLOCK_MEM)
            return lambda h: (_number(nvml.nvmlDeviceGetClockInfo(h, clock_mem)),)
        if key == "clock_events":
            return lambda h: (_number(self._clock_reasons(h)),)
        raise KeyError(key)

    def _clock_reasons(self, handle: Any) -> Any:
        """``...ClocksEventReasons`` where the driver and module have it, else ``...ThrottleReasons``."""
        nvml = self._nvml
        candidates = (
            [self._reasons_fn]
            if self._reasons_fn is not None
            else ["nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"]
        )
        last: Exception | None = None
        for fn_name in candidates:
            fn = getattr(nvml, fn_name, None)
            if fn is None:
                continue
            try:
                mask = fn(handle)
            except Exception as exc:
                if self._is_function_not_found(exc):
                    last = exc
                    continue  # an older libnvidia-ml without the new symbol: try the old name
                raise
            self._reasons_fn = fn_name
            return mask
        if last is not None:
            raise last
        raise _NoFunction("NVML module has no clock event/throttle reasons function")

    def _is_unsupported(self, exc: BaseException) -> bool:
        """NotSupported, or a function this driver/module lacks: asking again would not help."""
        return isinstance(exc, _NoFunction) or self._is_not_supported(exc) or self._is_function_not_found(exc)

    def _is_not_supported(self, exc: BaseException) -> bool:
        cls = getattr(self._nvml, "NVMLError_NotSupported", None)
        if isinstance(cls, type) and isinstance(exc, cls):
            return True
        code = self._const("NVML_ERROR_NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED)
        base = getattr(self._nvml, "NVMLError", None)
        is_nvml = isinstance(base, type) and isinstance(exc, base)
        return is_nvml and _error_code(exc) == code

    def _is_function_not_found(self, exc: BaseException) -> bool:
        cls = getattr(self._nvml, "NVMLError_FunctionNotFound", None)
        if isinstance(cls, type) and isinstance(exc, cls):
            return True
        code = self._const("NVML_ERROR_FUNCTION_NOT_FOUND", NVML_ERROR_FUNCTION_NOT_FOUND)
        base = getattr(self._nvml, "NVMLError", None)
        return isinstance(base, type) and isinstance(exc, base) and _error_code(exc) == code


# suffix of ``gpuN.<suffix>`` -> its role; every one is on the discrete card, so it speaks only for a run
# that offloaded to it.
_NVML_ROLES: dict[str, MetricRole] = {
    "temp_c": thermometer_role("gpu", "gpu", discrete=True),
    "power_mw": MetricRole("power", "mW", "gpu", scope="device", discrete=True),
    "energy_mj": MetricRole("energy", "mJ", "gpu", scope="device", discrete=True),
    "util_pct": MetricRole("utilization", "pct", "gpu", discrete=True),
    "mem_util_pct": MetricRole("utilization", "pct", "dram", discrete=True),
    "mem_used_mb": MetricRole("memory", "MB", "gpu", discrete=True),
    "sm_clock_mhz": MetricRole("clock", "MHz", "gpu", domain="gpu", discrete=True, measured=True),
    "mem_clock_mhz": MetricRole("clock", "MHz", "dram", discrete=True, measured=True),
    "clock_event_reasons": MetricRole("throttle_flags", "bitmask", "gpu", discrete=True, flags="nvml"),
    # read from an nvidia-smi log (``--query-gpu=clocks.max.sm,power.limit``), not sampled live
    "sm_clock_max_mhz": MetricRole("clock_limit", "MHz", "gpu", domain="gpu", discrete=True),
    "power_limit_mw": MetricRole("other", "mW", "gpu", discrete=True),
}


def nvml_role(metric: str) -> MetricRole | None:
    head, _, suffix = metric.partition(".")
    if not (head.startswith("gpu") and head[3:].isdigit()):
        return None
    role = _NVML_ROLES.get(suffix)
    return replace(role, instance=head) if role is not None else None
