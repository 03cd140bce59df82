"""Throttle-flag bitmasks, decoded by the source that wrote them.

A ``throttle_flags`` metric is a bitmask whose bits mean what its source says: NVML's clock-event reasons
on an NVIDIA GPU, the firmware's ``get_throttled`` word on a Raspberry Pi. Each such collector declares
its bits once, as a ``FlagDecoder``, and names it in the metric's role (``MetricRole.flags``); the verdicts
ask ``decoder_for(role)`` and never assume whose bits they hold. A role stored before sources carried a
decoder name is NVML's (the only source that had flags then).

Pure: no driver is imported until its decoder is first asked for.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Literal

from edgeprof.collectors.roles import MetricRole

# What a set bit says held the clock down: heat, a power limit, or a supply voltage that sagged (a weak
# power supply: never heat). None: the bit is no throttle (an idle GPU), or the source's decoder decides
# from the other bits of the same word (a Pi's firmware lowers its clock for heat or for under-voltage).
Cause = Literal["heat", "power", "under-voltage", "heat or power"]


@dataclass(frozen=True)
class FlagBit:
    """One bit of a flag word. ``throttles``: the bit means the clock was held down; ``sticky``: it says
    "has happened since boot" and stays set (so only its appearing during a run is news)."""

    bit: int
    name: str
    throttles: bool = False
    cause: Cause | None = None
    sticky: bool = False

    @property
    def mask(self) -> int:
        return 1 << self.bit


@dataclass(frozen=True)
class DecodedFlag:
    """A set bit of one word with its cause resolved for that word."""

    name: str
    throttles: bool
    cause: Cause | None
    sticky: bool


class FlagDecoder:
    """The bits of one source's flag word. ``decode`` gives the set bits lowest first; a bit the table does
    not know is reported as ``Unknown(0x...)``, never dropped. Subclasses resolve causes that depend on the
    other bits of the word (``resolve``)."""

    def __init__(self, source: str, bits: tuple[FlagBit, ...]) -> None:
        self.source = source
        self.bits = bits
        self.known_mask = 0
        for flag in bits:
            self.known_mask |= flag.mask
        self.sticky_mask = 0
        for flag in bits:
            if flag.sticky:
                self.sticky_mask |= flag.mask

    def resolve(self, flag: FlagBit, mask: int) -> Cause | None:
        """The cause of ``flag`` set in ``mask`` (its declared one here)."""
        return flag.cause

    def decode(self, mask: int) -> list[DecodedFlag]:
        mask = int(mask)
        out = [
            DecodedFlag(f.name, f.throttles, self.resolve(f, mask) if f.throttles else f.cause, f.sticky)
            for f in self.bits
            if mask & f.mask
        ]
        rest = mask & ~self.known_mask
        if rest:
            out.append(DecodedFlag(f"Unknown({rest:#x})", False, None, False))
        return out

    def names(self, mask: int) -> list[str]:
        return [d.name for d in self.decode(mask)]


# decoder name (``MetricRole.flags``) -> (module of collectors/, the module's FlagDecoder). A source with a
# flag word adds one line here; its module stays unimported until a stored word of it is read.
_DECODERS: dict[str, tuple[str, str]] = {
    "nvml": ("nvml", "CLOCK_EVENT_FLAGS"),
    "rpi_firmware": ("rpi_firmware", "GET_THROTTLED_FLAGS"),
}
# Roles stored before flags named their decoder: NVML's were the only flag words then.
LEGACY_DECODER = "nvml"


def decoder_named(name: str | None) -> FlagDecoder | None:
    """The decoder a role names (``LEGACY_DECODER`` for None); None for a name no source declares."""
    entry = _DECODERS.get(name or LEGACY_DECODER)
    if entry is None:
        return None
    module = importlib.import_module(f"edgeprof.collectors.{entry[0]}")
    decoder = getattr(module, entry[1])
    return decoder if isinstance(decoder, FlagDecoder) else None


def decoder_names() -> list[str]:
    return sorted(_DECODERS)


def decoder_for(role: MetricRole) -> FlagDecoder | None:
    """The decoder of a ``throttle_flags`` role's word (None: no source declares its bits)."""
    return decoder_named(role.flags)


def throttle_names(role: MetricRole, word: float | int) -> list[str]:
    """Names of the bits of one reading of ``role``'s flag word that say the clock is held down now. A
    sticky "since boot" bit is left out: one reading cannot tell whether it is news (``news`` can, given
    the reading before)."""
    decoder = decoder_for(role)
    if decoder is None:
        return []
    return [d.name for d in decoder.decode(int(word) & ~decoder.sticky_mask) if d.throttles]


def news(decoder: FlagDecoder, previous: int | None, word: int) -> list[DecodedFlag]:
    """The bits of ``word`` that say something happened at this reading: every "now" bit set, and a sticky
    "since boot" bit only where ``previous`` lacked it (no previous reading: nothing sticky is news)."""
    sticky = word & decoder.sticky_mask & ~(word if previous is None else previous)
    return decoder.decode((word & ~decoder.sticky_mask) | sticky)


def is_throttle_flag_name(name: str) -> bool:
    """Whether ``name`` is a throttling bit of some source's flag word (``SwThermalSlowdown``,
    ``ArmFrequencyCapped``)."""
    for entry in _DECODERS:
        decoder = decoder_named(entry)
        if decoder is not None and any(f.name == name and f.throttles for f in decoder.bits):
            return True
    return False
