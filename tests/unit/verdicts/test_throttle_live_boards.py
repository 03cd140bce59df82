"""SYNTHETIC live runs on fake roots (tests/support/boards.py): the real sampler polls the real Raspberry Pi
firmware, thermal-zone, cpufreq and Jetson GPU devfreq collectors while a simulated board throttles, and the
throttle verdict judges what they read, with the roles they declared. Every answer is known by construction.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.boards import SyntheticOrin, SyntheticPi, live_run
from support.fakes import FakeRoot

from edgeprof.collectors.jetson_gpu_devfreq import JetsonGpuDevfreqCollector
from edgeprof.collectors.rpi_firmware import RpiFirmwareCollector
from edgeprof.collectors.sysfs_cpufreq import CpuFreqCollector
from edgeprof.collectors.sysfs_thermal import ThermalZonesCollector
from edgeprof.verdicts import throttle_verdict


def pi_collectors(pi: SyntheticPi) -> list:
    root = pi.root.root
    # synchronous firmware reads: each tick's reading is that second's board (the worker thread's own
    # pacing is tested in tests/unit/collectors/test_rpi_firmware.py)
    firmware = RpiFirmwareCollector(root, runner=pi.vcgencmd, background=False)
    return [ThermalZonesCollector(root), CpuFreqCollector(root), firmware]


def test_a_pi_whose_firmware_caps_then_throttles_is_throttled_by_its_flags(tmp_path: Path) -> None:
    pi = SyntheticPi(FakeRoot(tmp_path))

    def board(t: float) -> float:
        # 0x0 -> 0x20002 (capped) -> 0x20006 (capped and throttled) as the firmware's clock drops; cpufreq
        # keeps reading what Linux asks for, 1400-1500 MHz as ondemand moves it
        pi.set(requested_mhz=1500.0 if int(t) % 3 else 1400.0)
        if t < 20:
            pi.set(arm_mhz=1500.0, temp_c=70.0 + t / 2, throttled=0x0)
        elif t < 40:
            pi.set(arm_mhz=1200.0, temp_c=80.5, throttled=0x20002)
        else:
            pi.set(arm_mhz=1000.0, temp_c=81.5, throttled=0x20006)
        return 20.0 * pi.state.arm_mhz / 1500.0

    run = live_run(pi_collectors(pi), board)
    result = throttle_verdict(run.inputs)
    ev = result.evidence
    assert result.value == "throttled", ev["reasons"]
    flag = next(r for r in ev["reasons"] if r.startswith("rpi.throttled_flags:"))
    assert "ArmFrequencyCapped" in flag and "Throttled" in flag and "cause: heat" in flag
    assert ev["causes"] == ["heat"]
    detail = ev["hardware"]["detail"]["rpi.throttled_flags"]
    assert detail["source"] == "rpi_firmware" and detail["under_voltage"] is False
    # the firmware's measured clock is the CPU's clock; the cpufreq figure is named as not what ran
    assert ev["clocks"]["domains"]["cpu"]["metrics"] == ["rpi.arm_clock_mhz"]
    assert ev["clocks"]["domains"]["cpu"]["status"] == "dropped"
    note = next(n for n in ev["notes"] if n.startswith("cpufreq.policy0.cur_mhz"))
    assert "read 1500 MHz under load (median) but rpi.arm_clock_mhz measured 1200 MHz" in note, note
    assert "not what ran" in note


@pytest.mark.parametrize(
    ("tps_fall", "value"), [(False, "not_throttled"), (True, "slowdown_not_thermal")]
)
def test_a_pi_with_only_the_under_voltage_bit_is_not_called_thermal(
    tmp_path: Path, tps_fall: bool, value: str
) -> None:
    pi = SyntheticPi(FakeRoot(tmp_path))

    def board(t: float) -> float:
        # a weak supply from 20 s on: under-voltage now and since boot (0x10001); nothing capped, the
        # clock holds at 1500 MHz, the SoC stays at 55 °C
        pi.set(arm_mhz=1500.0 - (t % 2), temp_c=55.0 + (0.5 if int(t) % 2 else 0.0),
               throttled=0x10001 if t >= 20 else 0x0)
        return 20.0 * (1.0 - t / 100.0 if tps_fall else 1.0)

    run = live_run(pi_collectors(pi), board)
    result = throttle_verdict(run.inputs)
    ev = result.evidence
    assert result.value == value, ev["reasons"]
    assert ev["causes"] == [] and "heat" not in ev["causes"]
    said = " ".join(ev["reasons"] + ev["notes"])
    assert "under-voltage during load (rpi.throttled_flags)" in said and "not heat" in said
    assert ev["hardware"]["detail"]["rpi.throttled_flags"]["under_voltage"] is True


def test_a_pi_throttled_by_under_voltage_names_the_supply_not_heat(tmp_path: Path) -> None:
    pi = SyntheticPi(FakeRoot(tmp_path), sysfs=False)  # an older kernel: get_throttled via vcgencmd

    def board(t: float) -> float:
        late = t >= 20
        pi.set(arm_mhz=600.0 if late else 1500.0, temp_c=50.0 + (t % 2), throttled=0x50005 if late else 0)
        return 20.0 * pi.state.arm_mhz / 1500.0

    run = live_run(pi_collectors(pi), board)
    result = throttle_verdict(run.inputs)
    assert result.value == "throttled"
    assert result.evidence["causes"] == ["under-voltage"]
    assert "held down by under-voltage (the power supply), not by heat" in result.evidence["reasons"]
    assert ["get_throttled"] in pi.calls


def test_an_orin_whose_devfreq_gpu_clock_drops_at_its_trip_is_throttled_on_the_gpu_clock(
    tmp_path: Path,
) -> None:
    orin = SyntheticOrin(FakeRoot(tmp_path), trip_c=95.0)

    def board(t: float) -> float:
        temp = min(70.0 + t, 95.5)
        if temp >= 95.0:  # the passive trip: the cooling device lowers the GPU's devfreq limit
            orin.set(930.75, temp, cap_mhz=930.75)
            return 14.0
        orin.set(1300.5 - (t % 2) * 1.5, temp)
        return 20.0

    root = orin.root.root
    run = live_run(
        [ThermalZonesCollector(root), JetsonGpuDevfreqCollector(root)], board, gpu_in_use=True
    )
    result = throttle_verdict(run.inputs)
    ev = result.evidence
    assert result.value == "throttled", ev["reasons"]
    gpu = ev["clocks"]["domains"]["gpu"]
    assert gpu["metrics"] == ["devfreq.gpu.cur_mhz"] and gpu["status"] == "dropped"
    assert ev["clocks"]["domains"]["gpu_cap.gpu_devfreq"]["status"] == "dropped"
    assert any(r.startswith("gpu clock 930.8 MHz under load") for r in ev["reasons"]), ev["reasons"]
    assert "temp.gpu_c reached 95.5 °C" in " ".join(ev["reasons"])
    assert ev["causes"] == ["heat"]
