"""NvmlCollector against a fake NVML module (two GPUs, NotSupported and generic errors), plus the real
``pynvml`` on this machine, which has no NVIDIA driver and must report itself unavailable."""

from __future__ import annotations

import importlib.util
import sys
from types import SimpleNamespace
from typing import Any

import pytest
from support.fakes import (
    FakeNvml,
    NVMLError_DriverNotLoaded,
    NVMLError_FunctionNotFound,
    NVMLError_NotSupported,
    NVMLError_Unknown,
)

from edgeprof.collectors.nvml import (
    CLOCK_EVENT_REASONS,
    INSTALL_HINT,
    NvmlCollector,
    decode_clock_event_reasons,
)


def started(fake: FakeNvml) -> NvmlCollector:
    collector = NvmlCollector(nvml=fake)
    availability = collector.available()
    assert availability.ok, availability.reason
    return collector


def test_two_gpus_all_fields() -> None:
    fake = FakeNvml()
    collector = started(fake)
    assert collector.device_names() == ["NVIDIA H200", "NVIDIA L4"]
    assert collector.available().reason.startswith("NVML driver 570.86.15: gpu0 NVIDIA H200, gpu1 NVIDIA L4")
    values = collector.sample()
    assert set(values) == {m.name for m in collector.metrics()}
    assert values["gpu0.temp_c"] == 40
    assert values["gpu1.temp_c"] == 41
    assert values["gpu0.power_mw"] == 150_000
    assert values["gpu1.util_pct"] == 91
    assert values["gpu1.mem_util_pct"] == 31
    assert values["gpu0.mem_used_mb"] == 4096
    assert values["gpu1.mem_used_mb"] == 4097
    assert values["gpu0.sm_clock_mhz"] == 1980
    assert values["gpu0.mem_clock_mhz"] == 2619
    assert values["gpu0.clock_event_reasons"] == 0x24
    assert fake.calls["throttle"] == 0  # the new function worked, the deprecated one is not needed
    first = values["gpu0.energy_mj"]
    second = collector.sample()["gpu0.energy_mj"]
    assert first is not None and second is not None and second - first == 1000
    assert all(isinstance(v, float) for v in values.values())


def test_metric_declarations() -> None:
    collector = started(FakeNvml())
    metrics = {m.name: m for m in collector.metrics()}
    assert len(metrics) == 18
    energy = metrics["gpu1.energy_mj"]
    assert (energy.unit, energy.kind, energy.wrap) == ("mJ", "counter", None)
    assert metrics["gpu0.power_mw"].unit == "mW"
    assert metrics["gpu0.temp_c"].unit == "C"
    assert metrics["gpu0.clock_event_reasons"].kind == "gauge"
    assert all(m.kind == "gauge" for name, m in metrics.items() if not name.endswith("energy_mj"))


def test_not_supported_is_none_and_not_retried() -> None:
    fake = FakeNvml()
    # As on Jetson Orin: no energy counter and no memory info on gpu0.
    fake.errors[("energy", 0)] = NVMLError_NotSupported()
    fake.errors[("mem", 0)] = NVMLError_NotSupported()
    collector = NvmlCollector(nvml=fake)
    availability = collector.available()
    assert availability.ok
    assert "not supported: gpu0 energy, gpu0 mem" in availability.reason
    for _ in range(5):
        values = collector.sample()
        assert values["gpu0.energy_mj"] is None
        assert values["gpu0.mem_used_mb"] is None
        assert values["gpu1.energy_mj"] is not None
        assert values["gpu0.temp_c"] == 40
    assert fake.calls["energy"] == 1 + 6  # gpu0 once (the probe in available), gpu1 every time
    assert fake.calls["mem"] == 1 + 6


def test_generic_error_is_none_for_that_field_and_retried() -> None:
    fake = FakeNvml()
    collector = started(fake)
    fake.errors[("power", 1)] = NVMLError_Unknown("Unknown Error")
    fake.errors[("clock2", 0)] = RuntimeError("not even an NVML error")
    values = collector.sample()
    assert values["gpu1.power_mw"] is None
    assert values["gpu0.mem_clock_mhz"] is None
    assert values["gpu0.power_mw"] == 150_000
    assert values["gpu1.mem_clock_mhz"] == 2620
    del fake.errors[("power", 1)]
    assert collector.sample()["gpu1.power_mw"] == 150_001  # a transient error is asked again


def test_clock_reasons_fall_back_to_throttle_function() -> None:
    fake = FakeNvml()
    fake.errors[("events", 0)] = NVMLError_FunctionNotFound()  # an older libnvidia-ml
    fake.errors[("events", 1)] = NVMLError_FunctionNotFound()
    collector = started(fake)
    assert collector.sample()["gpu0.clock_event_reasons"] == 0x1
    assert collector.sample()["gpu1.clock_event_reasons"] == 0x1
    assert fake.calls["events"] == 1  # learnt once which function this driver has


def test_clock_reasons_with_a_module_without_the_new_function() -> None:
    fake = FakeNvml()
    module = SimpleNamespace(
        **{name: getattr(fake, name) for name in dir(fake) if name.startswith(("nvml", "NVML"))}
    )
    del module.nvmlDeviceGetCurrentClocksEventReasons  # nvidia-ml-py older than 12.535
    collector = NvmlCollector(nvml=module)
    assert collector.available().ok
    assert collector.sample()["gpu0.clock_event_reasons"] == 0x1


def test_init_failure_is_unavailable_with_reason() -> None:
    fake = FakeNvml()
    fake.init_error = NVMLError_DriverNotLoaded("Driver Not Loaded")
    collector = NvmlCollector(nvml=fake)
    availability = collector.available()
    assert not availability.ok
    assert availability.reason == "NVML unavailable: Driver Not Loaded (NVMLError_DriverNotLoaded)"
    assert collector.sample() == {}
    assert collector.metrics() == []
    collector.close()
    assert fake.calls["nvmlShutdown"] == 0  # never initialised, so nothing to shut down


def test_no_gpu_is_unavailable_and_shuts_down() -> None:
    fake = FakeNvml(names=())
    collector = NvmlCollector(nvml=fake)
    availability = collector.available()
    assert not availability.ok
    assert "no usable NVIDIA GPU (device count 0)" in availability.reason
    assert fake.initialised == 0


def test_close_shuts_down_once() -> None:
    fake = FakeNvml()
    collector = started(fake)
    collector.close()
    collector.close()
    assert fake.calls["nvmlShutdown"] == 1
    assert fake.initialised == 0
    assert collector.sample() == {}


def test_pynvml_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    availability = NvmlCollector().available()
    assert availability == (False, INSTALL_HINT)
    assert "pip install edgeprof[nvidia]" in availability.reason


@pytest.mark.parametrize(
    ("mask", "names"),
    [
        (0, []),
        (0x20 | 0x4, ["SwPowerCap", "SwThermalSlowdown"]),
        (0x1, ["GpuIdle"]),
        (0x8 | 0x40 | 0x80, ["HwSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown"]),
        (0x2 | 0x10 | 0x100, ["ApplicationsClocksSetting", "SyncBoost", "DisplayClockSetting"]),
        (0x1 | 0x1000, ["GpuIdle", "Unknown(0x1000)"]),
    ],
)
def test_decode_clock_event_reasons(mask: int, names: list[str]) -> None:
    assert decode_clock_event_reasons(mask) == names


def test_decode_matches_real_pynvml_constants() -> None:
    pynvml: Any = pytest.importorskip("pynvml")
    for bit, name in CLOCK_EVENT_REASONS:
        for prefix in ("nvmlClocksEventReason", "nvmlClocksThrottleReason"):
            if hasattr(pynvml, prefix + name):
                assert getattr(pynvml, prefix + name) == bit, prefix + name
        assert decode_clock_event_reasons(bit) == [name]


@pytest.mark.skipif(importlib.util.find_spec("pynvml") is None, reason="nvidia-ml-py is not installed")
def test_real_pynvml_on_this_machine_is_unavailable_and_never_raises() -> None:
    collector = NvmlCollector()
    availability = collector.available()
    if availability.ok:
        pytest.skip(f"this machine has a working NVIDIA driver: {availability.reason}")
    assert (
        availability.reason.startswith("NVML unavailable: ") or "no usable NVIDIA GPU" in availability.reason
    )
    assert collector.sample() == {}
    assert collector.safe_sample().error is None
    collector.close()
