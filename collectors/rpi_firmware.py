"""Raspberry Pi firmware telemetry: the ARM clock the firmware measures, its temperature, its throttle word.

On a Pi the kernel's cpufreq figure is the clock Linux *asked* for; the VideoCore firmware decides what runs
and lowers the ARM clock itself for heat (its soft limit, then 85 °C) or for a sagging supply. Only the
firmware can say so, through its ``get_throttled`` word (bits as Raspberry Pi's documentation of
``vcgencmd get_throttled`` lists them):

====  ==============================  ==================================================================
bit   name                            meaning
====  ==============================  ==================================================================
0     UnderVoltage                    under-voltage now (supply below about 4.63 V)
1     ArmFrequencyCapped              ARM frequency capped now
2     Throttled                       currently throttled
3     SoftTempLimit                   soft temperature limit active now
16    UnderVoltageOccurred            under-voltage has occurred since boot
17    ArmFrequencyCappedOccurred      ARM frequency capping has occurred since boot
18    ThrottledOccurred               throttling has occurred since boot
19    SoftTempLimitOccurred           soft temperature limit has occurred since boot
====  ==============================  ==================================================================

Capping and throttling lower the clock; whether for heat or for power the word itself says: with an
under-voltage bit beside them the supply did it, otherwise the temperature did.
"""

from __future__ import annotations

import re

from edgeprof.collectors.flags import Cause, FlagBit, FlagDecoder

_UNDER_VOLTAGE_NOW = 1 << 0
_UNDER_VOLTAGE_OCCURRED = 1 << 16


class _GetThrottledDecoder(FlagDecoder):
    def resolve(self, flag: FlagBit, mask: int) -> Cause | None:
        if flag.cause is not None:
            return flag.cause
        # The firmware lowers the ARM clock for two reasons only: temperature and supply voltage. A
        # "now" bit goes with the "now" under-voltage bit, a since-boot one with its since-boot twin.
        under = _UNDER_VOLTAGE_OCCURRED if flag.sticky else _UNDER_VOLTAGE_NOW
        return "under-voltage" if mask & under else "heat"


GET_THROTTLED_FLAGS = _GetThrottledDecoder(
    "rpi_firmware",
    (
        FlagBit(0, "UnderVoltage", cause="under-voltage"),
        FlagBit(1, "ArmFrequencyCapped", throttles=True),
        FlagBit(2, "Throttled", throttles=True),
        FlagBit(3, "SoftTempLimit", throttles=True, cause="heat"),
        FlagBit(16, "UnderVoltageOccurred", cause="under-voltage", sticky=True),
        FlagBit(17, "ArmFrequencyCappedOccurred", throttles=True, sticky=True),
        FlagBit(18, "ThrottledOccurred", throttles=True, sticky=True),
        FlagBit(19, "SoftTempLimitOccurred", throttles=True, cause="heat", sticky=True),
    ),
)

_WORD_RE = re.compile(r"^(?:throttled=)?\s*(0x)?([0-9a-fA-F]+)$")


def decode_get_throttled(mask: int) -> list[str]:
    """Names of the set bits of a ``get_throttled`` word, lowest bit first (``0x50005`` ->
    ``['UnderVoltage', 'Throttled', 'UnderVoltageOccurred', 'ThrottledOccurred']``); an undocumented bit
    reads ``Unknown(0x...)``; 0 -> []."""
    return GET_THROTTLED_FLAGS.names(mask)


def parse_get_throttled(text: str | None) -> int | None:
    """The word from ``vcgencmd get_throttled`` (``throttled=0x50005``) or the sysfs file (hex without
    ``0x``: ``50005``); None for anything else."""
    if text is None:
        return None
    match = _WORD_RE.match(text.strip())
    return int(match.group(2), 16) if match else None
