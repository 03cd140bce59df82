"""A soak on a simulated board (tests/support/heating.py, synthetic) whose Raspberry Pi firmware word is
decoded as the firmware's, not as NVML's bits; under-voltage named as the supply's, never as heat."""

from __future__ import annotations

import pytest
from support.heating import Device, simulate
from support.roles import declared_roles

from edgeprof.verdicts import judge_soak

START = Device().t0


def _soak_with_word(before: int, after: int):
    soak = simulate(Device(trip_c=90.0))  # no heat: the trip is never reached
    soak.series["rpi.throttled_flags"] = [
        (t, float(after if t >= START + 200.0 else before)) for t, _ in soak.series["temp.zone0_c"]
    ]
    return soak


def test_the_firmware_capping_its_clock_is_a_throttle_signal() -> None:
    soak = _soak_with_word(0x0, 0x20002)
    # the firmware measures 1200 MHz from the cap on, while cpufreq reads what Linux asked for
    soak.series["rpi.arm_clock_mhz"] = [
        (t, 1200.0 if t >= START + 200.0 else v) for t, v in soak.series["cpufreq.policy0.cur_mhz"]
    ]
    j = judge_soak(soak.speeds, soak.series, declared_roles(soak.series), gpu_in_use=False)
    assert any("not what ran" in n for n in j.evidence["notes"]), j.evidence["notes"]
    assert j.windows[30].cpu_mhz == 1200.0  # the soak's CPU clock is the measured one
    assert j.value == "throttled" and j.first_throttle_window == 20
    assert j.first_throttle_what == "ArmFrequencyCapped flag"
    assert j.first_throttle_s == pytest.approx(200.5)
    # the since-boot twin appears in the same reading: news once, never again
    assert j.windows[20].throttle_signals == ["ArmFrequencyCapped", "ArmFrequencyCappedOccurred"]
    assert j.windows[21].throttle_signals == ["ArmFrequencyCapped"]


def test_throttling_beside_under_voltage_is_named_the_supplys() -> None:
    soak = _soak_with_word(0x0, 0x50005)
    j = judge_soak(soak.speeds, soak.series, declared_roles(soak.series), gpu_in_use=False)
    assert j.value == "throttled"
    assert j.first_throttle_what == "Throttled flag (under-voltage, not heat)"


def test_a_since_boot_bit_from_before_the_soak_is_no_signal() -> None:
    soak = _soak_with_word(0x50000, 0x50000)
    j = judge_soak(soak.speeds, soak.series, declared_roles(soak.series), gpu_in_use=False)
    assert j.value != "throttled" and not any(w.throttle_signals for w in j.windows)
