"""The Raspberry Pi firmware collector: its get_throttled decoder, its sysfs and vcgencmd readers."""

from __future__ import annotations

import pytest

from edgeprof.collectors.rpi_firmware import GET_THROTTLED_FLAGS, decode_get_throttled, parse_get_throttled


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
