"""The Raspberry Pi firmware collector: its get_throttled decoder, its sysfs and vcgencmd readers."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from support.boards import SyntheticPi
from support.fakes import FakeRoot

from edgeprof.collectors.flags import throttle_names
from edgeprof.collectors.roles import MetricRole
from edgeprof.collectors.rpi_firmware import (
    GET_THROTTLED_FLAGS,
    STALE_S,
    RpiFirmwareCollector,
    decode_get_throttled,
    parse_get_throttled,
    parse_measure_clock,
    parse_measure_temp,
)


@pytest.mark.parametrize(
    ("mask", "names"),
    [
        (0x0, []),
        (0x50005, ["UnderVoltage", "Throttled", "UnderVoltageOccurred", "ThrottledOccurred"]),
        (0x20002, ["ArmFrequencyCapped", "ArmFrequencyCappedOccurred"]),
        (0x80008, ["SoftTempLimit", "SoftTempLimitOccurred"]),
        (0x100000, ["Unknown(0x100000)"]),
    ],
)
def test_decode_get_throttled_names_each_documented_bit(mask: int, names: list[str]) -> None:
    assert decode_get_throttled(mask) == names


def test_capping_is_heat_unless_the_supply_sagged_in_the_same_word() -> None:
    causes = {d.name: d.cause for d in GET_THROTTLED_FLAGS.decode(0x20006)}
    assert causes == {"ArmFrequencyCapped": "heat", "Throttled": "heat", "ArmFrequencyCappedOccurred": "heat"}
    causes = {d.name: d.cause for d in GET_THROTTLED_FLAGS.decode(0x50005)}
    assert causes["Throttled"] == "under-voltage"
    assert causes["ThrottledOccurred"] == "under-voltage"
    assert causes["UnderVoltage"] == "under-voltage"
    # a since-boot under-voltage says nothing of why the clock is capped now
    assert {d.name: d.cause for d in GET_THROTTLED_FLAGS.decode(0x10002)}["ArmFrequencyCapped"] == "heat"


def test_the_under_voltage_bit_alone_is_no_throttle() -> None:
    (flag,) = GET_THROTTLED_FLAGS.decode(0x1)
    assert (flag.throttles, flag.cause) == (False, "under-voltage")


@pytest.mark.parametrize(
    ("text", "word"),
    [("throttled=0x50005", 0x50005), ("50005\n", 0x50005), ("0", 0), ("throttled=0x0", 0),
     ("error=1 error_msg=\"Command not registered\"", None), ("", None), (None, None)],
)
def test_parse_get_throttled_reads_vcgencmd_and_sysfs(text: str | None, word: int | None) -> None:
    assert parse_get_throttled(text) == word


# -- the collector on SYNTHETIC boards (tests/support/boards.py) -------------------------------------------
def test_sysfs_word_and_vcgencmd_clock_and_temperature(tmp_path: Path) -> None:
    pi = SyntheticPi(FakeRoot(tmp_path))
    collector = RpiFirmwareCollector(tmp_path, runner=pi.vcgencmd, background=False)
    ok, reason = collector.available()
    assert ok and "get_throttled from /sys/devices/platform/soc/soc:firmware/get_throttled" in reason
    assert "Raspberry Pi 4 Model B" in reason
    pi.set(arm_mhz=1333.0, temp_c=80.6, throttled=0x20002)
    assert collector.sample() == {
        "rpi.throttled_flags": float(0x20002),
        "rpi.arm_clock_mhz": 1333.0,
        "temp.rpi_soc_c": 80.6,
    }
    # sysfs has the word: vcgencmd is never asked for it
    assert ["get_throttled"] not in pi.calls


def test_without_sysfs_the_word_comes_from_a_real_vcgencmd_process(tmp_path: Path) -> None:
    pi = SyntheticPi(FakeRoot(tmp_path), sysfs=False, executable=True)
    collector = RpiFirmwareCollector(tmp_path, background=False)
    ok, reason = collector.available()
    assert ok and "get_throttled from" in reason and str(tmp_path / "usr/bin/vcgencmd") in reason
    pi.set(arm_mhz=657.0, temp_c=84.9, throttled=0x50005)
    assert collector.sample() == {
        "rpi.arm_clock_mhz": 657.0,
        "temp.rpi_soc_c": 84.9,
        "rpi.throttled_flags": float(0x50005),
    }


def test_sysfs_alone_gives_the_word_and_says_what_it_cannot_read(tmp_path: Path) -> None:
    SyntheticPi(FakeRoot(tmp_path)).set(throttled=0x80008)
    collector = RpiFirmwareCollector(tmp_path)
    ok, reason = collector.available()
    assert ok and "no vcgencmd: the firmware's ARM clock and temperature are not read" in reason
    assert [m.name for m in collector.metrics()] == ["rpi.throttled_flags"]
    assert collector.sample() == {"rpi.throttled_flags": float(0x80008)}


def test_not_a_pi_says_so(tmp_path: Path) -> None:
    ok, reason = RpiFirmwareCollector(tmp_path).available()
    assert not ok and "not a Raspberry Pi" in reason


def test_a_vcgencmd_without_firmware_access_is_unavailable(tmp_path: Path) -> None:
    collector = RpiFirmwareCollector(tmp_path, runner=lambda argv, timeout: None, background=False)
    ok, reason = collector.available()
    assert not ok and "measure_temp gave no temperature" in reason


def test_a_stuck_vcgencmd_never_holds_the_sampling_loop(tmp_path: Path) -> None:
    """The worker thread runs vcgencmd; a call that hangs leaves the sample without firmware values
    (None, never an invented one) and the sysfs word still read; once it answers, the next sample has it."""
    pi = SyntheticPi(FakeRoot(tmp_path))
    release, started = threading.Event(), threading.Event()
    hanging = [False]

    def runner(argv: list[str], timeout_s: float) -> str | None:
        if hanging[0]:
            started.set()
            release.wait(30)
        return pi.vcgencmd(argv, timeout_s)

    collector = RpiFirmwareCollector(tmp_path, runner=runner, wait_s=0.05)
    try:
        assert collector.available().ok
        hanging[0] = True
        first = collector.sample()
        assert started.is_set() or started.wait(30)
        assert first["rpi.throttled_flags"] == 0.0
        assert first["rpi.arm_clock_mhz"] is None and first["temp.rpi_soc_c"] is None
        hanging[0] = False
        release.set()
        collector.wait_s = 30.0  # the worker answers the next request; wait for it, however slow the host
        later = collector.sample()
        assert later["rpi.arm_clock_mhz"] == 1500.0
    finally:
        release.set()
        collector.close()


def test_a_reading_older_than_stale_s_is_no_reading(tmp_path: Path) -> None:
    pi = SyntheticPi(FakeRoot(tmp_path))
    now = [100.0]
    gate = threading.Event()
    gate.set()

    def runner(argv: list[str], timeout_s: float) -> str | None:
        gate.wait(30)
        return pi.vcgencmd(argv, timeout_s)

    collector = RpiFirmwareCollector(tmp_path, runner=runner, wait_s=30.0, clock=lambda: now[0])
    try:
        assert collector.available().ok
        assert collector.sample()["rpi.arm_clock_mhz"] == 1500.0
        gate.clear()  # the next call hangs: the last reading is all there is
        collector.wait_s = 0.01
        now[0] += STALE_S  # just inside: still this reading
        assert collector.sample()["rpi.arm_clock_mhz"] == 1500.0
        now[0] += 0.01  # just outside
        assert collector.sample()["rpi.arm_clock_mhz"] is None
    finally:
        gate.set()
        collector.close()


@pytest.mark.parametrize(
    ("text", "mhz"),
    [("frequency(48)=1500398464", 1500.398464), ("frequency(45)=1200000000\n", 1200.0),
     ("frequency(48)=0", None), ("error=1", None), (None, None)],
)
def test_parse_measure_clock(text: str | None, mhz: float | None) -> None:
    assert parse_measure_clock(text) == mhz


@pytest.mark.parametrize(
    ("text", "temp"), [("temp=47.2'C", 47.2), ("temp=80.6'C\n", 80.6), ("temp=", None), (None, None)]
)
def test_parse_measure_temp(text: str | None, temp: float | None) -> None:
    assert parse_measure_temp(text) == temp


def test_roles_make_the_measured_clock_the_cpu_clock_and_the_word_decoded_by_the_firmware() -> None:
    clock = RpiFirmwareCollector.role_of("rpi.arm_clock_mhz")
    assert clock is not None and clock.role == "clock" and clock.domain == "cpu" and clock.measured
    word = RpiFirmwareCollector.role_of("rpi.throttled_flags")
    assert word is not None and word.role == "throttle_flags" and word.flags == "rpi_firmware"
    temp = RpiFirmwareCollector.role_of("temp.rpi_soc_c")
    assert temp is not None and temp.role == "temperature" and temp.thermometer


def test_the_roles_survive_storage() -> None:
    """A sweep stores its collectors' roles as JSON: the decoder's name and the measured mark come back."""
    for metric in ("rpi.throttled_flags", "rpi.arm_clock_mhz"):
        role = RpiFirmwareCollector.role_of(metric)
        assert role is not None and MetricRole.from_json(role.as_json()) == role


def test_one_reading_names_only_what_holds_the_clock_now() -> None:
    role = RpiFirmwareCollector.role_of("rpi.throttled_flags")
    assert role is not None
    assert throttle_names(role, 0x50005) == ["Throttled"]
    assert throttle_names(role, 0x70000) == []  # all since boot: maybe before this log or run
    assert throttle_names(MetricRole("throttle_flags", "bitmask"), 0x20) == ["SwThermalSlowdown"]  # legacy
