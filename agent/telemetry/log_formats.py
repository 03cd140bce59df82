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
import logging
import re
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from edgeprof.collectors import has_data, parse_line
from edgeprof.collectors.evidence import celsius_or_none
from edgeprof.telemetry.tegrastats_import import TegrastatsImportError, check_path, local_epoch, text_lines

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
_NUMBER_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")
_TIME_FORMATS = ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S")

Row = tuple[float | None, dict[str, float | None]]


def _content_lines(path: Path) -> Iterator[str]:
    for _number, text, too_long in text_lines(path):
        stripped = text.strip()
        if stripped and not stripped.startswith("#") and not too_long:
            yield stripped


def _header(line: str) -> list[str]:
    return [_UNIT_RE.sub("", field.strip()) for field in next(csv.reader([line], skipinitialspace=True))]


def detect_format(path: Path) -> str | None:
    """Which of ``FORMATS`` the file holds, from its first content lines; None for none of them."""
    check_path(path)
    parser_log = logging.getLogger("edgeprof.collectors.tegrastats_parse")
    was = parser_log.disabled
    parser_log.disabled = True  # a file of another kind is no tegrastats line with unknown tokens
    try:
        return _detect(path)
    finally:
        parser_log.disabled = was


def _detect(path: Path) -> str | None:
    for i, line in enumerate(_content_lines(path)):
        fields = set(_header(line))
        if "temperature.gpu" in fields or any(f.startswith(("clocks.", "power.draw")) for f in fields):
            return NVIDIA_SMI_CSV
        if {"time", "uptime"} <= fields or ("time" in fields and any(f.startswith("Temp ") for f in fields)):
            return JTOP_CSV
        if has_data(parse_line(line)):
            return TEGRASTATS
        if i >= 4:
            break
    return None


def _number(text: str | None) -> float | None:
    match = _NUMBER_RE.match(text or "")
    return float(match.group(1)) if match else None


def _epoch(text: str | None) -> float | None:
    for fmt in _TIME_FORMATS:
        try:
            return local_epoch(datetime.strptime((text or "").strip(), fmt))
        except ValueError:
            continue
    return None


def _rows(path: Path) -> tuple[list[str], Iterator[list[str]]]:
    lines = _content_lines(path)
    header = _header(next(lines, ""))
    return header, (next(csv.reader([line], skipinitialspace=True)) for line in lines)


def _smi_values(record: dict[str, str]) -> dict[str, float | None]:
    gpu = f"gpu{int(_number(record.get('index')) or 0)}"
    values: dict[str, float | None] = {}
    mask: int | None = None
    for field, raw in record.items():
        name = field.split(".", 1)
        if field == "temperature.gpu":
            values[f"{gpu}.temp_c"] = celsius_or_none(_number(raw))
        elif field in ("clocks.sm", "clocks.current.sm"):
            values[f"{gpu}.sm_clock_mhz"] = _number(raw)
        elif field == "clocks.max.sm":
            values[f"{gpu}.sm_clock_max_mhz"] = _number(raw)
        elif field in ("power.draw", "power.limit"):
            watts = _number(raw)
            key = "power_mw" if field == "power.draw" else "power_limit_mw"
            values[f"{gpu}.{key}"] = watts * 1000.0 if watts is not None else None
        elif field == "utilization.gpu":
            values[f"{gpu}.util_pct"] = _number(raw)
        elif name[0] in ("clocks_event_reasons", "clocks_throttle_reasons") and len(name) == 2:
            if name[1] == "active":  # the whole bitmask, as hex
                mask = (mask or 0) | int(raw.strip(), 16) if raw.strip().startswith("0x") else mask
            elif name[1] in REASON_BITS and raw.strip() in ("Active", "Not Active"):
                mask = (mask or 0) | (REASON_BITS[name[1]] if raw.strip() == "Active" else 0)
    if mask is not None:
        values[f"{gpu}.clock_event_reasons"] = float(mask)
    return values


def _csv_log_rows(
    path: Path, time_column: str, values_of: Callable[[dict[str, str]], dict[str, float | None]]
) -> list[Row]:
    """A CSV log's records: each line's time (from ``time_column``) and its readings by metric."""
    header, rows = _rows(path)
    records = (dict(zip(header, cells, strict=False)) for cells in rows)
    return [(_epoch(record.get(time_column)), values_of(record)) for record in records]


def nvidia_smi_rows(path: Path) -> list[Row]:
    return _csv_log_rows(path, "timestamp", _smi_values)


def _jtop_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _jtop_values(record: dict[str, str]) -> dict[str, float | None]:
    values: dict[str, float | None] = {}
    for field, raw in record.items():
        number = _number(raw) if raw and raw.strip().upper() != "OFF" else None
        if re.fullmatch(r"CPU\d+", field):
            values[f"cpu{int(field[3:]) - 1}.util_pct"] = number
        elif field in ("GPU", "EMC"):
            values[f"{field.lower()}.util_pct"] = number
        elif field.startswith("Temp "):
            values[f"temp.{_jtop_key(field[5:])}_c"] = celsius_or_none(number)
        elif field.startswith("Power "):
            rail = "total" if field == "Power TOT" else _jtop_key(field[6:])
            values[f"power.{rail}_mw"] = number
        elif field == "nvp model" and re.fullmatch(r"\d+(\.\d+)?W", (raw or "").strip()):
            values["nvp.budget_mw"] = float(raw.strip()[:-1]) * 1000.0  # a power mode named by its budget
    return values


def jtop_rows(path: Path) -> list[Row]:
    return _csv_log_rows(path, "time", _jtop_values)


def read_rows(path: Path, fmt: str) -> list[Row]:
    """The rows of a CSV log of format ``fmt``; raises when none holds a reading."""
    rows = nvidia_smi_rows(path) if fmt == NVIDIA_SMI_CSV else jtop_rows(path)
    rows = [r for r in rows if any(v is not None for v in r[1].values())]
    if not rows:
        raise TegrastatsImportError(f"no readings in {path} (read as {fmt})")
    return rows


def identity_of(rows: list[Row], fmt: str) -> dict[str, Any]:
    """What a CSV log shows of its board: core count (jtop) or GPU count (nvidia-smi), its power rails."""
    metrics = sorted({m for _, values in rows for m in values})
    cores = [m for m in metrics if m.startswith("cpu") and m.endswith(".util_pct")]
    off = [m for m in cores if all(values.get(m) is None for _, values in rows)]
    rails = [m[6:-3] for m in metrics if m.startswith("power.") and m.endswith("_mw")]
    gpus = sorted({m.split(".")[0] for m in metrics if m.startswith("gpu") and m[3:4].isdigit()})
    return {
        "ram_total_mb": None,
        "cpu_count": len(cores) or None,
        "cpus_off": len(off),
        "rails": rails,
        "gpu_form": f"{len(gpus)} GPU(s) by nvidia-smi" if gpus else "GPU load only (no clock)",
    }


def _ticks(rows: list[Row]) -> tuple[list[Any], bool]:
    """The rows as sample ticks: seconds since the first timestamp (wall: the timestamp), or the row
    index x 1 s for both clocks where any row has no timestamp (as the tegrastats import does)."""
    from edgeprof.storage.samples import Tick

    epochs = [e for e, _ in rows]
    timed = all(e is not None for e in epochs)
    first = min(e for e in epochs if e is not None) if timed else 0.0
    ticks = []
    for i, (epoch, values) in enumerate(rows):
        t_mono, t_wall = (epoch - first, epoch) if timed and epoch is not None else (float(i), float(i))
        ticks.append(Tick(t_mono, t_wall, values))
    return ticks, timed


def _sweep(path: Path, fmt: str, device_id: int, ticks: list[Any], timed: bool) -> Any:
    import json

    from edgeprof import __version__
    from edgeprof.storage.models import Sweep
    from edgeprof.telemetry.tegrastats_import import SWEEP_STATUS, file_sha256, utc_naive

    meta = {"source": SOURCES[fmt], "format": fmt, "file": path.name, "records": len(ticks)}
    meta["clock"] = "timestamps" if timed else "record_index"
    return Sweep(
        name=f"import:{path.name}",
        plan_path=str(path.resolve()),
        plan_text="",  # no plan: nothing was run, a log was read
        plan_hash=file_sha256(path),  # the same log imported twice is recognisable
        device_id=device_id,
        edgeprof_version=__version__,
        started_at=utc_naive(min(t.t_wall for t in ticks)),
        ended_at=utc_naive(max(t.t_wall for t in ticks)),
        status=SWEEP_STATUS,
        n_specs=0,
        sampler_json=json.dumps(meta, sort_keys=True),
    )


def store_rows(db: str, path: Path, rows: list[Row], fmt: str, device_name: str | None) -> tuple[int, bool]:
    """Store a CSV log's rows as samples of a new imported sweep: (sweep id, True), or (the sweep the same
    file went into, False) without storing anything."""
    from sqlalchemy.exc import SQLAlchemyError

    from edgeprof.device import get_or_create_device
    from edgeprof.storage.samples import MAX_TICKS_PER_BLOCK, write_ticks
    from edgeprof.telemetry.tegrastats_import import already_imported, imported_facts, open_import_session

    session = open_import_session(db)
    try:
        existing = already_imported(session, path)
        if existing is not None:
            return existing, False
        device = get_or_create_device(session, imported_facts(identity_of(rows, fmt), device_name, fmt))
        ticks, timed = _ticks(rows)
        sweep = _sweep(path, fmt, device.id, ticks, timed)
        session.add(sweep)
        session.flush()
        for start in range(0, len(ticks), MAX_TICKS_PER_BLOCK):
            write_ticks(session, sweep.id, None, SOURCES[fmt], ticks[start : start + MAX_TICKS_PER_BLOCK])
        session.commit()
        return sweep.id, True
    except SQLAlchemyError as exc:
        session.rollback()
        raise TegrastatsImportError(f"cannot store samples: {str(exc).splitlines()[0]}") from None
    finally:
        session.close()
