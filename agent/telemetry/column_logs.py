"""Any CSV log read through a column map, and stressberry's files, as a board log.

A column map names the column holding each of: ``time`` (seconds from the start, or a timestamp), ``temp``
(°C), ``clock`` (MHz), ``throttle`` (a 0/1 flag) and ``load`` (%). Stated as ``--columns
time=sec,temp=tmp,clock=clk,throttle=thr``; without one, a header whose names are all known
(``COLUMN_NAMES``) maps itself, and the map used is printed. A first line that is the output of ``date``
(``Sun 25 Apr 2021 11:53:24 PM CEST``, no comma in it) is the log's start; the time column then counts from
it.

stressberry (nschloe/stressberry) writes YAML: ``name:``, then ``time: [...]`` (seconds),
``temperature: [...]`` (°C) and, in later versions, ``cpu frequency: [...]`` (MHz) as lists of one length;
each list is a column of the same map.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path

from edgeprof.collectors.rpi_firmware import parse_get_throttled
from edgeprof.telemetry.board_logs import (
    COLUMN_CSV,
    CPU_LOAD,
    CSV_CLOCK,
    FIRMWARE_FLAGS,
    STRESSBERRY,
    THROTTLE_FLAG,
    BoardLog,
    Row,
    checked,
    temperature_metric,
)
from edgeprof.telemetry.tegrastats_import import TegrastatsImportError, check_path, local_epoch, text_lines

ROLES = ("time", "temp", "clock", "throttle", "load")
# the column names each role is recognised by without a stated map (compared lower-case)
COLUMN_NAMES: dict[str, tuple[str, ...]] = {
    "time": ("sec", "secs", "seconds", "time", "time_s", "elapsed", "t"),
    "temp": ("tmp", "temp", "temperature", "temp_c", "soc_temp", "cpu_temp"),
    "clock": ("clk", "clock", "freq", "frequency", "cpu frequency", "arm_freq", "clock_mhz", "freq_mhz"),
    "throttle": ("thr", "throttled", "throttle"),
    "load": ("load", "cpu_load", "util", "usage", "cpu_pct"),
}
_METRIC = {"clock": CSV_CLOCK, "throttle": THROTTLE_FLAG, "load": CPU_LOAD}
# ``date``'s output in the C locale and in English ones with a 12-hour clock; the zone word is dropped (a
# log's times are read as local times, as the tegrastats import reads them)
_DATE_FORMATS = ("%a %d %b %Y %I:%M:%S %p", "%a %b %d %H:%M:%S %Y", "%a %d %b %Y %H:%M:%S")
_NUMBER_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")
_YAML_LIST_RE = re.compile(r"^(?P<key>[A-Za-z][\w ]*):\s*\[(?P<body>[^\]]*)\]", re.M)


class ColumnMapError(TegrastatsImportError):
    """A column map that cannot be used (unknown role, a column the file lacks)."""


def parse_column_map(text: str) -> dict[str, str]:
    """``time=sec,temp=tmp`` -> {"time": "sec", "temp": "tmp"}; raises on an unknown role."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        role, sep, column = part.partition("=")
        if not sep or role.strip() not in ROLES or not column.strip():
            raise ColumnMapError(
                f"--columns {text!r}: expected ROLE=COLUMN pairs, ROLE one of {', '.join(ROLES)}"
            )
        out[role.strip()] = column.strip()
    if "temp" not in out and "clock" not in out:
        raise ColumnMapError(f"--columns {text!r}: names neither a temp nor a clock column")
    return out


def auto_map(header: list[str]) -> dict[str, str] | None:
    """The map of a header every one of whose names is known, with a temp or clock; else None."""
    found: dict[str, str] = {}
    for name in header:
        role = next((r for r, names in COLUMN_NAMES.items() if name.strip().lower() in names), None)
        if role is None or role in found:
            return None
        found[role] = name
    return found if ("temp" in found or "clock" in found) else None


def map_text(mapping: Mapping[str, str]) -> str:
    return ",".join(f"{role}={mapping[role]}" for role in ROLES if role in mapping)


def date_line(text: str) -> float | None:
    """The epoch of a ``date`` output line (its zone word left out), None for any other line."""
    if "," in text:
        return None
    words = [w for w in text.split() if not (w.isalpha() and w.isupper() and w not in ("AM", "PM"))]
    for fmt in _DATE_FORMATS:
        try:
            return local_epoch(datetime.strptime(" ".join(words), fmt))
        except ValueError:
            continue
    return None


def _number(text: str | None) -> float | None:
    """A cell as a number: decimal, or a ``get_throttled`` word (``0x50005``, ``throttled=0x50005``)."""
    raw = (text or "").strip()
    if raw.lower().startswith(("0x", "throttled=")):
        word = parse_get_throttled(raw)
        return float(word) if word is not None else None
    match = _NUMBER_RE.match(raw)
    return float(match.group(1)) if match else None


def _flag_words(rows: list[Row]) -> list[Row]:
    """A throttle column that holds more than 0/1 is a word of bits, read as the Pi firmware's
    ``get_throttled`` (the one such word a CSV of a board carries): its bits decoded, under-voltage apart."""
    if not any((v.get(THROTTLE_FLAG) or 0.0) > 1.0 for _, v in rows):
        return rows
    return [(t, {(FIRMWARE_FLAGS if m == THROTTLE_FLAG else m): x for m, x in v.items()}) for t, v in rows]


def _values(record: Mapping[str, str | None], mapping: Mapping[str, str]) -> dict[str, float | None]:
    values: dict[str, float | None] = {}
    for role, column in mapping.items():
        if role == "time":
            continue
        metric = temperature_metric(column) if role == "temp" else _METRIC[role]
        values[metric] = _number(record.get(column))
    return values


def _content(path: Path) -> Iterator[str]:
    for _n, text, too_long in text_lines(path):
        if text.strip() and not too_long:
            yield text.strip()


def read_column_csv(path: Path, columns: str | None = None) -> BoardLog:
    """A CSV log through the stated map (``columns``) or the one its header gives (bad input: one line)."""
    check_path(path)
    lines = _content(path)
    first = next(lines, "")
    start = date_line(first)
    header_line = next(lines, "") if start is not None else first
    header = [h.strip() for h in next(csv.reader([header_line]))]
    mapping = parse_column_map(columns) if columns else auto_map(header)
    if mapping is None:
        raise ColumnMapError(
            f"{path}: columns {', '.join(header)} are not all known; state them with --columns"
        )
    missing = [c for c in mapping.values() if c not in header]
    if missing:
        raise ColumnMapError(f"{path}: no column {', '.join(missing)} (its header: {', '.join(header)})")
    rows: list[Row] = []
    for i, cells in enumerate(csv.reader(lines)):
        record = dict(zip(header, cells, strict=False))
        t = _number(record.get(mapping["time"])) if "time" in mapping else float(i)
        if t is not None:
            rows.append((t, _values(record, mapping)))
    notes = [] if "time" in mapping else ["no time column: one line a second assumed"]
    log = BoardLog(COLUMN_CSV, _flag_words(rows), start, device={}, notes=notes, columns=map_text(mapping))
    return checked(log, path)


def is_stressberry(text: str) -> bool:
    return "stressberry" in text.split("\n", 1)[0] or bool(re.search(r"^temperature:\s*\[", text, re.M))


def read_stressberry(path: Path, columns: str | None = None) -> BoardLog:
    """A stressberry YAML file: its lists as columns of the map (``time``, ``temperature``, ``cpu
    frequency`` by default)."""
    check_path(path)
    text = "\n".join(t for _n, t, _long in text_lines(path))
    lists = {
        m["key"].strip(): [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", m["body"])]
        for m in _YAML_LIST_RE.finditer(text)
    }
    mapping = parse_column_map(columns) if columns else auto_map(list(lists))
    if mapping is None or "time" not in mapping:
        raise ColumnMapError(f"{path}: stressberry lists {', '.join(lists)}: state them with --columns")
    times = lists.get(mapping["time"], [])
    rows: list[Row] = []
    for i, t in enumerate(times):
        record = {k: str(v[i]) for k, v in lists.items() if i < len(v)}
        rows.append((t, _values(record, mapping)))
    name = re.search(r"^name:\s*(.+)$", text, re.M)
    device = {"board": None, "run": name.group(1).strip() if name else None}
    log = BoardLog(STRESSBERRY, rows, None, device=device, columns=map_text(mapping))
    return checked(log, path)
