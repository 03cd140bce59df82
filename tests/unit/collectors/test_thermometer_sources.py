"""The cooldown's thermometer list comes from the evidence rule (``thermometer_sources``): every source
whose declared metrics include a board thermometer, in the registry's order; never a discrete GPU's die,
never a source with only pseudo-sensors."""

from __future__ import annotations

from pathlib import Path

from support.boards import SyntheticPi
from support.fakes import FakeRoot

from edgeprof.collectors.evidence import thermometer_sources
from edgeprof.collectors.jetson_gpu_devfreq import JetsonGpuDevfreqCollector
from edgeprof.collectors.nvml import NvmlCollector
from edgeprof.collectors.registry import build_collectors
from edgeprof.collectors.roles import MetricRole


def test_a_pi_without_thermal_zones_is_read_from_its_firmware(tmp_path: Path) -> None:
    pi = SyntheticPi(FakeRoot(tmp_path), executable=True)
    (tmp_path / "sys/class/thermal/thermal_zone0/temp").unlink()
    (tmp_path / "sys/class/thermal/thermal_zone0/type").unlink()
    declared = {}
    for collector in build_collectors(tmp_path):
        if collector.available().ok:
            declared[collector.name] = [m.role for m in collector.declared_metrics()]
        collector.close()
    assert pi.state.temp_c == 60.0
    assert thermometer_sources(declared) == ["rpi_firmware"]


def test_order_kept_and_non_thermometers_left_out() -> None:
    declared = {
        "sysfs_thermal": [MetricRole("temperature", "C", "cpu")],
        "jetson_gpu_devfreq": [JetsonGpuDevfreqCollector.role_of("devfreq.gpu.cur_mhz")],
        "nvml": [NvmlCollector.role_of("gpu0.temp_c")],  # a discrete card's die: not the board
        "pmic_only": [MetricRole("temperature", "C", "soc", thermometer=False)],
        "rpi_firmware": [MetricRole("temperature", "C", "soc")],
    }
    assert thermometer_sources(declared) == ["sysfs_thermal", "rpi_firmware"]
