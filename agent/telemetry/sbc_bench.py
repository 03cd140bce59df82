"""sbc-bench results (ThomasKaiser/sbc-bench) read as a board log.

A result is a report of system facts and benchmark scores; what a throttle verdict needs is in its
monitoring sections, each a header line and rows every few seconds::

    System health while running 7-zip multi core benchmark:

    Time        fake/real   load %cpu %sys %usr %nice %io %irq   Temp    VCore
    18:00:11: 1200/ 980MHz  3.48  85%   0%  84%   0%   0%   0%  81.7°C  1.3188V

The clock column's header says what its values are: ``fake/real`` (a Raspberry Pi: the kernel's cpufreq
figure / the firmware's measured ARM clock), ``big.LITTLE`` (two cpufreq clusters), ``cpu0/cpu4/cpu6`` (one
cpufreq policy per named CPU), ``CPU`` (one cluster, and x86); ``CPU n/a`` has none. ``%cpu`` is the load of
all cores; ``Temp`` the thermal source the result names. The test a section names ("7-zip multi core
benchmark") is its phase. Rows carry the time of day only: the date is the result's first line
(``sbc-bench v0.9.9 Raspberry Pi 3 Model B Rev 1.2 (Mon, 05 Dec 2022 17:44:55 +0100)``), whose board name,
and the kernel the result names, describe the device.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path

from edgeprof.telemetry.board_logs import (
    CPU_LOAD,
    FIRMWARE_CLOCK,
    SBC_BENCH,
    BoardLog,
    Row,
    checked,
    cpufreq_clock,
    temperature_metric,
)
from edgeprof.telemetry.tegrastats_import import TegrastatsImportError, check_path, local_epoch, text_lines

_FIRST_RE = re.compile(r"^sbc-bench v\S+ (?P<board>.*?) \((?P<date>[^()]*)\)\s*$")
_HEADER_RE = re.compile(r"^Time\s+(?P<clock>\S+(?: n/a)?)\s+load %cpu\b.*\bTemp\b")
_ROW_RE = re.compile(
    r"^(?P<time>\d\d:\d\d:\d\d):\s+(?P<clocks>(?:\d+/\s*)*\d+MHz|-+|n/a)\s+(?P<load>[\d.]+)\s+"
    r"(?P<cpu>\d+)%.*?\s(?P<temp>-?\d+(?:\.\d+)?)°C"
)
_PHASE_RE = re.compile(r"^System health while running (?P<name>.+?):\s*$")
_THERMAL_RE = re.compile(r"^Thermal source: \S+ \((?P<zone>[^)]+)\)")
_KERNEL_RE = re.compile(r"^\s*Kernel: (?P<kernel>\S+)")
_LINUX_RE = re.compile(r"^Linux (?P<kernel>\S+) \((?P<host>[^)]*)\).*\((?P<cpus>\d+) CPU\)")
_THROTTLED_RE = re.compile(r"^(?P<bits>[01]{19})\s*$")


def is_sbc_bench(first_line: str) -> bool:
    return _FIRST_RE.match(first_line.strip()) is not None


def clock_metrics(spec: str) -> list[str]:
    """The metrics of a monitoring header's clock column, in the order its values are printed."""
    if spec == "fake/real":
        return [cpufreq_clock("policy0"), FIRMWARE_CLOCK]
    if spec == "big.LITTLE":
        return [cpufreq_clock("cluster0"), cpufreq_clock("cluster1")]
    if spec == "CPU":
        return [cpufreq_clock("policy0")]
    parts = spec.split("/")
    if all(re.fullmatch(r"cpu\d+", p) for p in parts):
        return [cpufreq_clock(f"policy{p[3:]}") for p in parts]
    return []  # "CPU n/a": the result has no clock


class _Reader:
    """The state of one pass over a result: the current section's clock metrics and phase."""

    def __init__(self, start: datetime) -> None:
        self.start = start
        self.day = start.replace(hour=0, minute=0, second=0, microsecond=0)
        self.last: datetime | None = None
        self.clocks: list[str] = []
        self.phase: str | None = None
        self.zone = "soc"
        self.rows: list[Row] = []
        self.phases: dict[str, list[float]] = {}

    def when(self, hms: str) -> float:
        """Seconds from the result's start of a row's time of day (past midnight: the next day)."""
        h, m, s = (int(x) for x in hms.split(":"))
        at = self.day + timedelta(hours=h, minutes=m, seconds=s)
        while at < (self.last or self.start) - timedelta(hours=12):
            at += timedelta(days=1)
        self.last = at
        return (at - self.start).total_seconds()

    def row(self, match: re.Match[str]) -> None:
        t = self.when(match["time"])
        values: dict[str, float | None] = {CPU_LOAD: float(match["cpu"])}
        values[temperature_metric(self.zone)] = float(match["temp"])
        numbers = re.findall(r"\d+", match["clocks"]) if match["clocks"].endswith("MHz") else []
        for metric, number in zip(self.clocks, numbers, strict=False):
            values[metric] = float(number)
        self.rows.append((t, values))
        if self.phase is not None:
            self.phases.setdefault(self.phase, []).append(t)


def _start(first: str, path: Path) -> tuple[str, datetime]:
    match = _FIRST_RE.match(first.strip())
    if match is None:
        raise TegrastatsImportError(
            f"{path}: not an sbc-bench result (no 'sbc-bench vX <board> (<date>)' line)"
        )
    try:
        start = parsedate_to_datetime(match["date"])
    except (TypeError, ValueError):
        raise TegrastatsImportError(f"{path}: cannot read the date of its first line") from None
    # the rows are the board's local time of day, as the header's date is: read both as local times, as
    # the tegrastats import reads a log's timestamps, so a verdict shows the times the result shows
    return match["board"].strip(), start.replace(tzinfo=None)


def read_sbc_bench(path: Path) -> BoardLog:
    """An sbc-bench result's monitoring rows, phases and device (bad input raises one line)."""
    check_path(path)
    lines = [text for _n, text, too_long in text_lines(path) if not too_long]
    board, start = _start(lines[0] if lines else "", path)
    reader = _Reader(start)
    device: dict[str, object] = {"board": board}
    notes: list[str] = []
    for text in lines[1:]:
        stripped = text.strip()
        if (match := _ROW_RE.match(stripped)) is not None:
            reader.row(match)
        elif (match := _HEADER_RE.match(stripped)) is not None:
            reader.clocks = clock_metrics(match["clock"])
        elif (match := _PHASE_RE.match(stripped)) is not None:
            reader.phase = match["name"]
        elif stripped.startswith("Testing ") and stripped.endswith("System health now:"):
            reader.phase = "clockspeeds tested again under load"
        elif (match := _THERMAL_RE.match(stripped)) is not None:
            reader.zone = match["zone"]
        elif (match := _KERNEL_RE.match(text)) is not None:
            device["kernel"] = match["kernel"].split("/")[0]
        elif (match := _LINUX_RE.match(stripped)) is not None:
            device.setdefault("kernel", match["kernel"])
            device["cpu_count"] = int(match["cpus"])
        elif (match := _THROTTLED_RE.match(stripped)) is not None:
            notes.append(f"the firmware's get_throttled at the end of the run: {int(match['bits'], 2):#x}")
    # the temperature zone is named after the monitoring sections that precede the "Thermal source" line
    zone_metric = temperature_metric(reader.zone)
    rows = [(t, _renamed(values, zone_metric)) for t, values in reader.rows]
    phases = [(name, min(ts), max(ts)) for name, ts in reader.phases.items()]
    log = BoardLog(SBC_BENCH, rows, local_epoch(start), phases, dict(device), notes)
    return checked(log, path)


def _renamed(values: dict[str, float | None], zone_metric: str) -> dict[str, float | None]:
    return {(zone_metric if m.startswith("temp.") else m): v for m, v in values.items()}
