"""Which board-log format a file holds (sbc-bench result, stressberry file, CSV with a known or stated
column map) and reading it: the hook ``import-log`` calls where the file is none of the Jetson/NVIDIA
formats of ``log_formats``, or where the user stated a column map."""

from __future__ import annotations

from itertools import islice
from pathlib import Path

from edgeprof.telemetry.board_logs import COLUMN_CSV, SBC_BENCH, STRESSBERRY, BoardLog
from edgeprof.telemetry.column_logs import (
    auto_map,
    date_line,
    is_stressberry,
    read_column_csv,
    read_stressberry,
)
from edgeprof.telemetry.sbc_bench import is_sbc_bench, read_sbc_bench
from edgeprof.telemetry.tegrastats_import import TegrastatsImportError, check_path, text_lines

EXPECTED_BOARD = (
    "an sbc-bench result, a stressberry file, or a CSV whose header names its columns "
    "(time, temp, clock, throttle, load; or state them with --columns time=sec,temp=tmp,...)"
)


def _head(path: Path, lines: int = 3) -> list[str]:
    try:
        return [t.strip() for _n, t, _long in islice(text_lines(path), lines) if t.strip()]
    except TegrastatsImportError:
        return []


def detect_board_format(path: Path, columns: str | None = None) -> str | None:
    """``sbc_bench``, ``stressberry`` or ``column_csv`` for a file of that kind; None for none of them. A
    stated column map makes any file a column CSV, or a stressberry file where it is one."""
    check_path(path)
    head = _head(path)
    if not head:
        return None
    if is_stressberry("\n".join(head)):
        return STRESSBERRY
    if columns:
        return COLUMN_CSV
    if is_sbc_bench(head[0]):
        return SBC_BENCH
    header = head[1] if date_line(head[0]) is not None and len(head) > 1 else head[0]
    return COLUMN_CSV if auto_map([h.strip() for h in header.split(",")]) is not None else None


def read_board_log(path: Path, fmt: str, columns: str | None = None) -> BoardLog:
    """The file read as ``fmt`` (one of ``board_logs.BOARD_FORMATS``); bad input raises one line."""
    if fmt == SBC_BENCH:
        return read_sbc_bench(path)
    if fmt == STRESSBERRY:
        return read_stressberry(path, columns)
    return read_column_csv(path, columns)
