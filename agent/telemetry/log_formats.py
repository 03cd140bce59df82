"""The logs users already have, beyond tegrastats: jtop's CSV and nvidia-smi's CSV, recognised from their
content and read into the metric names of the live collector of the same source, so that one set of
roles (``collectors/jtop``, ``collectors/nvml``) and one verdict serve a log and a live sweep alike.

- **jtop's CSV** (jetson-stats' logger: ``csv.DictWriter`` over the keys of ``jtop.stats``): ``time``,
  ``uptime``, ``CPU1``.. (load % or ``OFF``), ``GPU`` (load %), ``EMC``, ``Temp <zone>`` (°C), ``Power
  <rail>`` and ``Power TOT`` (mW), ``jetson_clocks``, ``nvp model``. It records loads, temperatures and
  power, **no clocks**: a clock throttle cannot be seen in it, and the verdict says so.
- **nvidia-smi's CSV** (``--query-gpu=... --format=csv``, a header line, ``[N/A]`` where a field is not
  supported): ``timestamp``, ``index``, ``temperature.gpu``, ``clocks.sm`` (printed ``clocks.current.sm``)
  and ``clocks.max.sm`` (MHz), ``power.draw`` / ``power.limit`` (W), ``utilization.gpu`` (%), and the
  ``clocks_event_reasons.*`` (older: ``clocks_throttle_reasons.*``) fields, ``Active`` / ``Not Active``,
  folded into NVML's clock-event bitmask.

Bad input raises ``TegrastatsImportError`` (one line) before anything is stored.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import Any

from edgeprof.collectors import has_data, parse_line
from edgeprof.collectors.evidence import celsius_or_none
from edgeprof.safetext import safe_text
from edgeprof.telemetry.log_lines import TegrastatsImportError, check_path, content_lines, quiet_parser
from edgeprof.telemetry.log_series import LineSample, Row
from edgeprof.telemetry.tegrastats_import import local_epoch

TEGRASTATS, JTOP_CSV, NVIDIA_SMI_CSV = "tegrastats", "jtop_csv", "nvidia_smi_csv"
FORMATS = (TEGRASTATS, JTOP_CSV, NVIDIA_SMI_CSV)
SOURCES = {TEGRASTATS: "tegrastats_import", JTOP_CSV: "jtop_import", NVIDIA_SMI_CSV: "nvidia_smi_import"}
EXPECTED = (
    "a tegrastats log, jtop's CSV log (time, uptime, CPU1.., GPU, Temp .., Power ..) or an nvidia-smi "
    "--query-gpu CSV with its header (timestamp, temperature.gpu, clocks.sm ...)"
)

# nvidia-smi's clock-event reason fields -> NVML's bit (the bits ``collectors.nvml`` decodes)
REASON_BITS = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}
_UNIT_RE = re.compile(r"\s*\[[^\]]*\]\s*$")
_NUMBER_RE = re.compile(r"^\s*(-?\d{1,30}(?:\.\d{1,30})?)(?!\d)")
_TIME_FORMATS = ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S")
# A board's own columns: jtop writes one per core, zone and rail (under 60 on the largest Jetson), nvidia-smi
# one per queried field. A header naming more readings than this is no such log, and its rows would hold
# them all (rows x columns values): refused in one line rather than read.
MAX_READING_COLUMNS = 512
# nvidia-smi numbers GPUs from 0; no machine has more than this many
MAX_GPU_INDEX = 1023
# NVML's clock-event reasons are a 64-bit mask
MAX_REASON_MASK = (1 << 64) - 1
# How many content lines format detection looks at: a log says what it is at its start.
DETECT_LINES = 5


def _content_lines(path: Path) -> Iterator[str]:
    return content_lines(path)


def _split_csv(line: str) -> list[str]:
    """One CSV line's fields; none where it is no CSV line (``csv`` refuses it)."""
    if "," not in line:
        return []
    try:
        return next(csv.reader([line], skipinitialspace=True), [])
    except csv.Error:
        return []


def _header(line: str) -> list[str]:
    return [_UNIT_RE.sub("", field.strip()) for field in _split_csv(line)]


def detect_format(path: Path) -> str | None:
    """Which of ``FORMATS`` the file holds, from its first ``DETECT_LINES`` content lines; None for none."""
    check_path(path)
    with quiet_parser():  # a file of another kind is no tegrastats line with unknown tokens
        return _detect(path)


def _detect(path: Path) -> str | None:
    for line in islice(_content_lines(path), DETECT_LINES):
        fields = set(_header(line))
        if "temperature.gpu" in fields or any(f.startswith(("clocks.", "power.draw")) for f in fields):
            return NVIDIA_SMI_CSV
        if {"time", "uptime"} <= fields or ("time" in fields and any(f.startswith("Temp ") for f in fields)):
            return JTOP_CSV
        if has_data(parse_line(line)):
            return TEGRASTATS
    return None


def _number(text: str | None) -> float | None:
    """The number a cell starts with (``45``, ``12.5 W``); None where there is none."""
    match = _NUMBER_RE.match(text or "")
    return float(match.group(1)) if match else None


def _epoch(text: str | None) -> float | None:
    for fmt in _TIME_FORMATS:
        try:
            return local_epoch(datetime.strptime((text or "").strip(), fmt))
        except ValueError:
            continue
    return None


def _watts_as_mw(text: str | None) -> float | None:
    watts = _number(text)
    return watts * 1000.0 if watts is not None else None


# nvidia-smi field -> (metric suffix, how its cell is read)
_SMI_FIELDS: dict[str, tuple[str, Callable[[str | None], float | None]]] = {
    "temperature.gpu": ("temp_c", lambda raw: celsius_or_none(_number(raw))),
    "clocks.sm": ("sm_clock_mhz", _number),
    "clocks.current.sm": ("sm_clock_mhz", _number),
    "clocks.max.sm": ("sm_clock_max_mhz", _number),
    "power.draw": ("power_mw", _watts_as_mw),
    "power.limit": ("power_limit_mw", _watts_as_mw),
    "utilization.gpu": ("util_pct", _number),
}


def _reason_mask(raw: str) -> int | None:
    """A ``clocks_event_reasons.active`` cell (``0x0000000000000004``) as a mask; None where it is not one
    (``[N/A]``, ``0xZZ``, wider than 64 bits)."""
    text = raw.strip()
    if not re.fullmatch(r"0[xX][0-9a-fA-F]{1,16}", text):
        return None
    mask = int(text, 16)
    return mask if mask <= MAX_REASON_MASK else None


def _gpu_index(raw: str | None, path: Path, row: int) -> int:
    text = (raw or "").strip()
    if text in ("", "[N/A]"):
        return 0
    if not re.fullmatch(r"\d{1,4}", text) or int(text) > MAX_GPU_INDEX:
        shown = safe_text(text[:24]) + ("..." if len(text) > 24 else "")
        raise TegrastatsImportError(
            f"{path}: record {row}: GPU index {shown!r} is not a whole number 0..{MAX_GPU_INDEX}"
        )
    return int(text)


class _SmiColumns:
    """An nvidia-smi header read once: which column holds what, so each row reads only those cells."""

    def __init__(self, header: list[str]) -> None:
        self.index = header.index("index") if "index" in header else None
        self.time = header.index("timestamp") if "timestamp" in header else None
        self.readings = [(i, *_SMI_FIELDS[f]) for i, f in enumerate(header) if f in _SMI_FIELDS]
        self.masks: list[int] = []
        self.bits: list[tuple[int, int]] = []
        for i, f in enumerate(header):
            group, _, name = f.partition(".")
            if group in ("clocks_event_reasons", "clocks_throttle_reasons"):
                if name == "active":  # the whole bitmask, as hex
                    self.masks.append(i)
                elif name in REASON_BITS:
                    self.bits.append((i, REASON_BITS[name]))
        self.width = len(self.readings) + (1 if self.masks or self.bits else 0)

    def row(self, cells: list[str], path: Path, number: int) -> Row:
        def cell(i: int | None) -> str | None:
            return cells[i] if i is not None and i < len(cells) else None

        gpu = f"gpu{_gpu_index(cell(self.index), path, number)}"
        values: dict[str, float | None] = {}
        for i, suffix, read in self.readings:
            values[f"{gpu}.{suffix}"] = read(cell(i))
        mask: int | None = None
        for i in self.masks:
            found = _reason_mask(cell(i) or "")
            mask = (mask or 0) | found if found is not None else mask
        for i, bit in self.bits:
            raw = (cell(i) or "").strip()
            if raw in ("Active", "Not Active"):
                mask = (mask or 0) | (bit if raw == "Active" else 0)
        if mask is not None:
            values[f"{gpu}.clock_event_reasons"] = float(mask)
        return _epoch(cell(self.time)), values


def _jtop_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _off_or_number(raw: str | None) -> float | None:
    return _number(raw) if raw and raw.strip().upper() != "OFF" else None


def _budget_mw(raw: str | None) -> float | None:
    """jtop's power mode where its name is its budget (``15W``)."""
    match = re.fullmatch(r"(\d{1,6}(?:\.\d{1,6})?)W", (raw or "").strip())
    return float(match.group(1)) * 1000.0 if match else None


def _jtop_metric(field: str) -> tuple[str, Callable[[str | None], float | None]] | None:
    if re.fullmatch(r"CPU\d{1,4}", field):
        return f"cpu{int(field[3:]) - 1}.util_pct", _off_or_number
    if field in ("GPU", "EMC"):
        return f"{field.lower()}.util_pct", _off_or_number
    if field.startswith("Temp "):
        return f"temp.{_jtop_key(field[5:])}_c", lambda raw: celsius_or_none(_off_or_number(raw))
    if field.startswith("Power "):
        return f"power.{'total' if field == 'Power TOT' else _jtop_key(field[6:])}_mw", _off_or_number
    if field == "nvp model":
        return "nvp.budget_mw", _budget_mw
    return None


class _JtopColumns:
    """A jtop header read once: the column of each metric (columns of no known kind are not read)."""

    def __init__(self, header: list[str]) -> None:
        self.time = header.index("time") if "time" in header else None
        self.readings = [(i, *m) for i, f in enumerate(header) if (m := _jtop_metric(f)) is not None]
        self.width = len(self.readings)

    def row(self, cells: list[str], path: Path, number: int) -> Row:
        values: dict[str, float | None] = {}
        for i, metric, read in self.readings:
            raw = cells[i] if i < len(cells) else None
            value = read(raw)
            if metric != "nvp.budget_mw" or value is not None:
                values[metric] = value
        time = cells[self.time] if self.time is not None and self.time < len(cells) else None
        return _epoch(time), values


def iter_rows(path: Path, fmt: str) -> Iterator[Row]:
    """A CSV log's records, one at a time: each line's time and its readings by metric (a header is read
    once into the columns that hold readings; a row holds only those)."""
    lines = _content_lines(path)
    header = _header(next(lines, ""))
    columns = _SmiColumns(header) if fmt == NVIDIA_SMI_CSV else _JtopColumns(header)
    if columns.width > MAX_READING_COLUMNS:
        raise TegrastatsImportError(
            f"{path}: its header names {columns.width} readings; a {fmt} log of one board has at most "
            f"{MAX_READING_COLUMNS} (not read)"
        )
    for number, line in enumerate(lines, start=1):
        cells = _split_csv(line)
        if cells:
            yield columns.row(cells, path, number)


def nvidia_smi_rows(path: Path) -> list[Row]:
    return list(iter_rows(path, NVIDIA_SMI_CSV))


def jtop_rows(path: Path) -> list[Row]:
    return list(iter_rows(path, JTOP_CSV))


def read_rows(path: Path, fmt: str) -> list[Row]:
    """The rows of a CSV log of format ``fmt`` that hold a reading; raises when none does."""
    rows = [r for r in iter_rows(path, fmt) if any(v is not None for v in r[1].values())]
    if not rows:
        raise TegrastatsImportError(f"no readings in {path} (read as {fmt})")
    return rows


@dataclass
class CsvScan:
    """One pass over a CSV log: what the import needs before it stores (its board, its clock), without
    holding its rows."""

    records: int = 0  # rows that hold a reading
    timed: bool = True  # every such row has a time
    first_epoch: float | None = None
    last_epoch: float | None = None
    metrics: set[str] = field(default_factory=set)
    cores_on: set[str] = field(default_factory=set)  # cpu metrics with a reading in some row


def _with_readings(path: Path, fmt: str) -> Iterator[Row]:
    return (r for r in iter_rows(path, fmt) if any(v is not None for v in r[1].values()))


def scan_rows(path: Path, fmt: str, sample: LineSample | list[Row] | None = None) -> CsvScan:
    """Read a CSV log of format ``fmt`` once: its ``CsvScan``, and its rows into ``sample`` (the verdict's,
    bounded); raises when no row holds a reading."""
    scan = CsvScan()
    for epoch, values in _with_readings(path, fmt):
        scan.records += 1
        if epoch is None:
            scan.timed = False
        else:
            scan.first_epoch = epoch if scan.first_epoch is None else min(scan.first_epoch, epoch)
            scan.last_epoch = epoch if scan.last_epoch is None else max(scan.last_epoch, epoch)
        scan.metrics.update(values)
        scan.cores_on.update(m for m, v in values.items() if v is not None and m.startswith("cpu"))
        if sample is not None:
            sample.append((epoch, values))
    if not scan.records:
        raise TegrastatsImportError(f"no readings in {path} (read as {fmt})")
    return scan


def identity_of(rows: list[Row] | CsvScan, fmt: str) -> dict[str, Any]:
    """What a CSV log shows of its board: core count (jtop) or GPU count (nvidia-smi), its power rails."""
    scan = rows if isinstance(rows, CsvScan) else CsvScan()
    if not isinstance(rows, CsvScan):
        for _epoch, values in rows:
            scan.metrics.update(values)
            scan.cores_on.update(m for m, v in values.items() if v is not None and m.startswith("cpu"))
    metrics = sorted(scan.metrics)
    cores = [m for m in metrics if m.startswith("cpu") and m.endswith(".util_pct")]
    off = [m for m in cores if m not in scan.cores_on]
    rails = [m[6:-3] for m in metrics if m.startswith("power.") and m.endswith("_mw")]
    gpus = sorted({m.split(".")[0] for m in metrics if m.startswith("gpu") and m[3:4].isdigit()})
    return {
        "ram_total_mb": None,
        "cpu_count": len(cores) or None,
        "cpus_off": len(off),
        "rails": rails,
        "gpu_form": f"{len(gpus)} GPU(s) by nvidia-smi" if gpus else "GPU load only (no clock)",
    }


def _ticks(path: Path, fmt: str, scan: CsvScan) -> Iterator[Any]:
    """The rows as sample ticks: seconds since the first timestamp (wall: the timestamp), or the row
    index x 1 s for both clocks where any row has no timestamp (as the tegrastats import does)."""
    from edgeprof.storage.samples import Tick

    first = scan.first_epoch if scan.timed and scan.first_epoch is not None else 0.0
    for i, (epoch, values) in enumerate(_with_readings(path, fmt)):
        t_mono, t_wall = (epoch - first, epoch) if scan.timed and epoch is not None else (float(i), float(i))
        yield Tick(t_mono, t_wall, values)


def _sweep(path: Path, fmt: str, device_id: int, scan: CsvScan) -> Any:
    import json

    from edgeprof import __version__
    from edgeprof.storage.models import Sweep
    from edgeprof.telemetry.tegrastats_import import SWEEP_STATUS, file_sha256, utc_naive

    meta = {"source": SOURCES[fmt], "format": fmt, "file": path.name, "records": scan.records}
    meta["clock"] = "timestamps" if scan.timed else "record_index"
    timed = scan.timed and scan.first_epoch is not None and scan.last_epoch is not None
    start, end = (scan.first_epoch, scan.last_epoch) if timed else (0.0, float(scan.records - 1))
    return Sweep(
        name=f"import:{path.name}",
        plan_path=str(path.resolve()),
        plan_text="",  # no plan: nothing was run, a log was read
        plan_hash=file_sha256(path),  # the same log imported twice is recognisable
        device_id=device_id,
        edgeprof_version=__version__,
        started_at=utc_naive(start or 0.0),
        ended_at=utc_naive(end or 0.0),
        status=SWEEP_STATUS,
        n_specs=0,
        sampler_json=json.dumps(meta, sort_keys=True),
    )


def store_rows(db: str, path: Path, scan: CsvScan, fmt: str, device_name: str | None) -> tuple[int, bool]:
    """Store a CSV log's rows as samples of a new imported sweep, read again from the file block by block
    (bounded memory): (sweep id, True), or (the sweep the same file went into, False) without storing
    anything."""
    from sqlalchemy.exc import SQLAlchemyError

    from edgeprof.device import get_or_create_device
    from edgeprof.storage.samples import MAX_TICKS_PER_BLOCK, write_ticks
    from edgeprof.telemetry.tegrastats_import import already_imported, imported_facts, open_import_session

    session = open_import_session(db)
    try:
        existing = already_imported(session, path)
        if existing is not None:
            return existing, False
        device = get_or_create_device(session, imported_facts(identity_of(scan, fmt), device_name, fmt))
        sweep = _sweep(path, fmt, device.id, scan)
        session.add(sweep)
        session.flush()
        ticks = _ticks(path, fmt, scan)
        while block := list(islice(ticks, MAX_TICKS_PER_BLOCK)):
            write_ticks(session, sweep.id, None, SOURCES[fmt], block)
        session.commit()
        return sweep.id, True
    except SQLAlchemyError as exc:
        session.rollback()
        raise TegrastatsImportError(f"cannot store samples: {str(exc).splitlines()[0]}") from None
    finally:
        session.close()
