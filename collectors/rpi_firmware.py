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

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from edgeprof.collectors.base import Availability, Collector, Metric, SampleValues, read_text
from edgeprof.collectors.evidence import celsius_or_none, thermometer_role
from edgeprof.collectors.flags import Cause, FlagBit, FlagDecoder
from edgeprof.collectors.roles import MetricRole

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


# -- the collector -----------------------------------------------------------------------------------------
GET_THROTTLED_SYSFS = "/sys/devices/platform/soc/soc:firmware/get_throttled"
DEVICE_TREE_MODEL = "/proc/device-tree/model"
# One vcgencmd call takes 5-20 ms on a Pi; one stuck in the firmware's mailbox must not hold the sweep.
CALL_TIMEOUT_S = 1.0
# How long ``sample`` waits for the reading it asked for before it answers with the previous one.
WAIT_S = 0.25
# A reading older than this is no reading of "now": its metrics read None.
STALE_S = 3.0

_CLOCK_RE = re.compile(r"^frequency\(\d+\)=(\d+)$")
_TEMP_RE = re.compile(r"^temp=(-?\d+(?:\.\d+)?)'C$")

Runner = Callable[[list[str], float], "str | None"]


def parse_measure_clock(text: str | None) -> float | None:
    """``frequency(48)=1500398464`` (Hz) -> MHz; None for anything else (0 Hz: a clock not running)."""
    match = _CLOCK_RE.match((text or "").strip())
    if not match or int(match.group(1)) <= 0:
        return None
    return int(match.group(1)) / 1e6


def parse_measure_temp(text: str | None) -> float | None:
    """``temp=47.2'C`` -> 47.2; None for anything else."""
    match = _TEMP_RE.match((text or "").strip())
    return celsius_or_none(float(match.group(1))) if match else None


def run_command(argv: list[str], timeout_s: float) -> str | None:
    """stdout of ``argv``, None where it fails, times out or exits non-zero (never raises)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return done.stdout if done.returncode == 0 else None


@dataclass
class _Reading:
    t: float
    values: SampleValues


class RpiFirmwareCollector(Collector):
    """The firmware's view of a Raspberry Pi: measured ARM clock, SoC temperature, ``get_throttled``.

    ``get_throttled`` is read from the kernel's sysfs file where it exists (Raspberry Pi OS kernels), else
    from ``vcgencmd``; the clock and temperature only ``vcgencmd`` measures. ``vcgencmd`` runs on a worker
    thread, one request per sample at most and at most one call in flight, each bounded by
    ``call_timeout_s``: ``sample`` waits ``wait_s`` for the reading it asked for, then answers with the
    previous reading while it is fresh (``STALE_S``), else None. The sweep's interval therefore paces the
    calls and a stuck firmware call never holds the sampling loop.
    """

    name = "rpi_firmware"

    @classmethod
    def role_of(cls, metric: str) -> MetricRole | None:
        return rpi_firmware_role(metric)

    def __init__(
        self,
        root: Path | str = "/",
        *,
        runner: Runner | None = None,
        call_timeout_s: float = CALL_TIMEOUT_S,
        wait_s: float = WAIT_S,
        background: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(root)
        # A runner given by the caller (a test's synthetic firmware) answers for ``vcgencmd`` itself.
        self.runner: Runner = runner or run_command
        self._own_runner = runner is not None
        self.call_timeout_s = call_timeout_s
        self.wait_s = wait_s
        self.background = background
        self.clock = clock
        self.last_error: str | None = None
        self._vcgencmd: str | None = None
        self._sysfs: Path | None = None
        self._probed = False
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._want = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._latest: _Reading | None = None
        self._seq = 0

    # -- what is here ------------------------------------------------------------------------------------
    def find_vcgencmd(self) -> str | None:
        """``vcgencmd`` on PATH on a real machine; under a fake root, only the root's own ``usr/bin``."""
        if self.root == Path("/"):
            return shutil.which("vcgencmd")
        for folder in ("usr/bin", "opt/vc/bin"):
            candidate = self.root / folder / "vcgencmd"
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
        return None

    def _probe(self) -> None:
        if self._probed:
            return
        sysfs = self.path(GET_THROTTLED_SYSFS)
        self._sysfs = sysfs if parse_get_throttled(read_text(sysfs)) is not None else None
        self._vcgencmd = self.find_vcgencmd() or ("vcgencmd" if self._own_runner else None)
        if self._vcgencmd is not None and self._vcgencmd_read(("measure_temp",)).get(SOC_TEMP) is None:
            self.last_error = f"{self._vcgencmd} measure_temp gave no temperature (no access to /dev/vcio?)"
            self._vcgencmd = None
        self._probed = True

    def available(self) -> Availability:
        self._probed = False
        self._probe()
        model = (read_text(self.path(DEVICE_TREE_MODEL)) or "").rstrip("\x00")
        where = f" ({model})" if model else ""
        if self._vcgencmd is None and self._sysfs is None:
            why = f"; {self.last_error}" if self.last_error else ""
            return Availability(
                False,
                f"no {GET_THROTTLED_SYSFS} and no working vcgencmd (not a Raspberry Pi{why})",
            )
        parts = []
        if self._sysfs is not None:
            parts.append(f"get_throttled from {GET_THROTTLED_SYSFS}")
        if self._vcgencmd is not None:
            read = "measure_clock arm, measure_temp" + ("" if self._sysfs else ", get_throttled")
            parts.append(f"{read} from {self._vcgencmd}")
        else:
            parts.append("no vcgencmd: the firmware's ARM clock and temperature are not read")
        return Availability(True, f"Raspberry Pi firmware{where}: " + "; ".join(parts))

    def metrics(self) -> list[Metric]:
        self._probe()
        out = [Metric(THROTTLED, "bitmask", "gauge", "get_throttled: the firmware's throttle bits")]
        if self._vcgencmd is not None:
            out += [
                Metric(ARM_CLOCK, "MHz", "gauge", "ARM clock the firmware measures (measure_clock arm)"),
                Metric(SOC_TEMP, "C", "gauge", "SoC temperature as the firmware reads it (measure_temp)"),
            ]
        return out

    # -- reading -------------------------------------------------------------------------------------------
    def _vcgencmd_read(self, commands: tuple[str, ...]) -> SampleValues:
        exe = self._vcgencmd or self.find_vcgencmd()
        values: SampleValues = {}
        for command in commands:
            out = None if exe is None else self.runner([exe, *command.split()], self.call_timeout_s)
            if command == "measure_clock arm":
                values[ARM_CLOCK] = parse_measure_clock(out)
            elif command == "measure_temp":
                values[SOC_TEMP] = parse_measure_temp(out)
            else:
                word = parse_get_throttled(out)
                values[THROTTLED] = None if word is None else float(word)
            if out is None:
                self.last_error = f"vcgencmd {command} failed or timed out"
        return values

    def _commands(self) -> tuple[str, ...]:
        wanted = ("measure_clock arm", "measure_temp")
        return wanted if self._sysfs is not None else (*wanted, "get_throttled")

    def _worker(self) -> None:
        while not self._stop.is_set():
            self._want.wait()
            self._want.clear()
            if self._stop.is_set():
                return
            values = self._vcgencmd_read(self._commands())
            with self._done:
                self._latest = _Reading(self.clock(), values)
                self._seq += 1
                self._done.notify_all()

    def _firmware_values(self) -> SampleValues:
        if not self.background:
            return self._vcgencmd_read(self._commands())
        if self._thread is None:
            self._thread = threading.Thread(target=self._worker, name="edgeprof-vcgencmd", daemon=True)
            self._thread.start()
        with self._done:
            seq = self._seq
            self._want.set()
            self._done.wait_for(lambda: self._seq > seq, timeout=self.wait_s)
            latest = self._latest
        if latest is None or self.clock() - latest.t > STALE_S:
            return dict.fromkeys(self._commands_metrics())
        return dict(latest.values)

    def _commands_metrics(self) -> list[str]:
        return [ARM_CLOCK, SOC_TEMP] + ([] if self._sysfs is not None else [THROTTLED])

    def sample(self) -> SampleValues:
        self._probe()
        values: SampleValues = {}
        if self._sysfs is not None:
            word = parse_get_throttled(read_text(self._sysfs))
            values[THROTTLED] = None if word is None else float(word)
        if self._vcgencmd is not None:
            values.update(self._firmware_values())
        return values

    def close(self) -> None:
        self._stop.set()
        self._want.set()
        if self._thread is not None:
            self._thread.join(timeout=self.call_timeout_s * 4)
            self._thread = None


THROTTLED = "rpi.throttled_flags"
ARM_CLOCK = "rpi.arm_clock_mhz"
SOC_TEMP = "temp.rpi_soc_c"


def rpi_firmware_role(metric: str) -> MetricRole | None:
    """The firmware's measured ARM clock is the CPU's clock (``measured``: where it is read, the kernel's
    cpufreq figure is what Linux asked for, not what ran); its throttle word is decoded by
    ``GET_THROTTLED_FLAGS``."""
    if metric == ARM_CLOCK:
        return MetricRole("clock", "MHz", "cpu", domain="cpu", measured=True)
    if metric == SOC_TEMP:
        return thermometer_role(metric, "soc")
    if metric == THROTTLED:
        return MetricRole("throttle_flags", "bitmask", "cpu", flags=GET_THROTTLED_FLAGS.source)
    return None
