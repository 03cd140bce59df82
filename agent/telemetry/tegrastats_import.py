"""``edgeprof import-tegrastats LOG [--json] [--db DB]``: read a log written by ``tegrastats --logfile``.

One record per line, parsed with ``collectors/tegrastats_parse.parse_line``; blank lines and ``#`` lines are
skipped. Three outputs:

- ``--json``: one JSON object per record with exactly the ``record_to_json`` schema (``null`` where absent);
- ``--db DB``: every record stored as samples (compact blocks; source ``tegrastats_import``, metric names of
  ``record_to_metrics``) in a new ``Sweep`` named ``import:<file name>`` with status ``imported``;
- neither: a short summary (record count, time span, max temperature per sensor, mean/max per power rail).

Clocks of imported samples (a log has no monotonic clock): ``t_wall`` is the line's own timestamp
(``MM-DD-YYYY HH:MM:SS`` as tegrastats writes it, read as local time of *this* machine), ``t_mono`` the
seconds since the first timestamp of the file. A line without a timestamp gets ``t_mono`` = its record index
(0, 1, 2, ...) x 1.0 s -- tegrastats' default interval, the spacing is not known -- and, because the column
cannot be NULL, ``t_wall`` = the same number of seconds after the Unix epoch: obviously not a real date, and
still in line order. The sweep's ``sampler_json`` says which clock was used.

Lines the parser does not fully understand are still imported; lines in which it recognises nothing at all
are skipped. Both are counted in a note (``err``; by default stderr for ``--json``, else ``out``).

Bad input (missing file, directory, binary data, no tegrastats line at all, a database that cannot be opened)
raises ``TegrastatsImportError`` with a one-line message, before anything is committed.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from edgeprof.collectors import TegrastatsRecord, has_data, parse_line, record_to_json, record_to_metrics
from edgeprof.collectors.evidence import is_thermometer_name
from edgeprof.storage.models import Sweep
from edgeprof.storage.samples import MAX_TICKS_PER_BLOCK, Tick, write_ticks

# The reading and series layers, named here as well: every log importer and the CLI imported them from here.
from edgeprof.telemetry.log_lines import MAX_LINE_CHARS as MAX_LINE_CHARS
from edgeprof.telemetry.log_lines import READ_BLOCK_BYTES as READ_BLOCK_BYTES
from edgeprof.telemetry.log_lines import TegrastatsImportError as TegrastatsImportError
from edgeprof.telemetry.log_lines import check_path as check_path
from edgeprof.telemetry.log_lines import content_lines as content_lines
from edgeprof.telemetry.log_lines import open_log as open_log
from edgeprof.telemetry.log_lines import quiet_parser as quiet_parser
from edgeprof.telemetry.log_lines import text_lines as text_lines
from edgeprof.telemetry.log_series import DEFAULT_SPACING_S as DEFAULT_SPACING_S
from edgeprof.telemetry.log_series import MAX_VERDICT_READINGS as MAX_VERDICT_READINGS
from edgeprof.telemetry.log_series import LineSample as LineSample
from edgeprof.telemetry.log_series import LogSeries as LogSeries
from edgeprof.telemetry.log_series import Row as Row
from edgeprof.telemetry.log_series import series_of_rows as series_of_rows

SOURCE = "tegrastats_import"
SWEEP_STATUS = "imported"
IMPORTED_HOSTNAME = "imported"
EXIT_BAD_INPUT = 2

# tegrastats --logfile writes '%m-%d-%Y %H:%M:%S'; the others are what the parser's timestamp pattern also
# accepts ('/' and 'T' are normalised to '-' and ' ' first).
TIMESTAMP_FORMATS = ("%m-%d-%Y %H:%M:%S", "%m-%d-%Y %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f")


def parse_timestamp(text: str | None) -> datetime | None:
    """A tegrastats timestamp as a naive local datetime; None when absent or not a date."""
    if not text:
        return None
    normalised = text.strip().replace("/", "-").replace("T", " ")
    for fmt in TIMESTAMP_FORMATS:
        try:
            return datetime.strptime(normalised, fmt)
        except ValueError:
            continue
    return None


def local_epoch(dt: datetime) -> float | None:
    try:
        return dt.timestamp()  # naive: local time of this machine
    except (OverflowError, OSError, ValueError):
        return None


def utc_naive(epoch: float) -> datetime:
    """Like ``edgeprof.run_states.utcnow``: naive UTC, the form every other datetime column holds."""
    return datetime.fromtimestamp(epoch, timezone.utc).replace(tzinfo=None)


# -- reading: edgeprof.telemetry.log_lines ---------------------------------------------------------------


@dataclass
class ImportCounts:
    records: int = 0
    with_unknown: int = 0
    skipped: int = 0
    timestamped: int = 0


def _records(path: Path, counts: ImportCounts) -> Iterator[TegrastatsRecord]:
    with quiet_parser():
        for _number, text, too_long in text_lines(path):
            if too_long:
                counts.skipped += 1
                continue
            stripped = text.strip()
            if not stripped or stripped.startswith("#"):
                continue
            rec = parse_line(stripped)
            if not has_data(rec):
                counts.skipped += 1
                continue
            counts.records += 1
            if rec.unknown:
                counts.with_unknown += 1
            yield rec


# -- the summary -------------------------------------------------------------------------------------------


@dataclass
class _Stat:
    n: int = 0
    total: float = 0.0
    peak: float = -math.inf

    def add(self, value: float) -> None:
        self.n += 1
        self.total += value
        self.peak = max(self.peak, value)


@dataclass
class Summary:
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    first_ts_text: str | None = None
    last_ts_text: str | None = None
    # In the order tegrastats prints them (first occurrence), like the board's own output.
    temps: dict[str, _Stat] = field(default_factory=dict)
    rails: dict[str, _Stat] = field(default_factory=dict)

    def add(self, rec: TegrastatsRecord, ts: datetime | None, metrics: dict[str, Any] | None = None) -> None:
        if ts is not None:
            if self.first_ts is None or ts < self.first_ts:
                self.first_ts, self.first_ts_text = ts, rec.timestamp
            if self.last_ts is None or ts > self.last_ts:
                self.last_ts, self.last_ts_text = ts, rec.timestamp
        for name, value in (record_to_metrics(rec) if metrics is None else metrics).items():
            if name.startswith("temp."):
                stat = self.temps.setdefault(name, _Stat())
            elif name.startswith("power."):
                stat = self.rails.setdefault(name, _Stat())
            else:
                continue
            if value is not None:
                stat.add(value)

    def lines(self, path: Path, counts: ImportCounts) -> list[str]:
        out = [f"{path.name}: {counts.records} records"]
        if self.first_ts is not None and self.last_ts is not None:
            span = _duration((self.last_ts - self.first_ts).total_seconds())
            untimed = counts.records - counts.timestamped
            extra = f"; {untimed} records without a timestamp" if untimed else ""
            out.append(f"time span: {self.first_ts_text} .. {self.last_ts_text} ({span}, local time){extra}")
        else:
            out.append("time span: unknown (no timestamps in the log)")
        if self.temps:
            parts = [
                f"{_short(name, 'temp.', '_c')} {stat.peak:g}"
                + (" (no thermometer: a fixed value)" if not is_thermometer_name(name) else "")
                if stat.n
                else f"{_short(name, 'temp.', '_c')} off"
                for name, stat in self.temps.items()
            ]
            out.append("max temperature (C): " + ", ".join(parts))
        if self.rails:
            out.append("power (mW, mean / max):")
            for name, stat in self.rails.items():
                label = _short(name, "power.", "_mw")
                out.append(f"  {label:<20} {stat.total / stat.n:9.1f} / {stat.peak:g}" if stat.n else label)
        return out


def _short(name: str, prefix: str, suffix: str) -> str:
    return name[len(prefix) : len(name) - len(suffix)] if name.endswith(suffix) else name[len(prefix) :]


def _duration(seconds: float) -> str:
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"{h}h {m:02d}m {sec:02d}s"
    if m:
        return f"{m}m {sec:02d}s"
    return f"{sec}s"


# -- the database ------------------------------------------------------------------------------------------


def log_identity(first: TegrastatsRecord) -> dict[str, Any]:
    """What a tegrastats line itself tells of the board: exact RAM (MB), cores (and how many are off),
    its rail names and the GPU's form (with or without a clock, per-GPC)."""
    gpu = first.gpu[0] if first.gpu else None
    gpu_form = (
        "no GPU field"
        if gpu is None
        else f"{gpu.name} with {len(gpu.freq_mhz)} clocks (per GPC)"
        if len(gpu.freq_mhz) > 1
        else f"{gpu.name} with a clock"
        if gpu.freq_mhz
        else f"{gpu.name} without a clock"
    )
    return {
        "ram_total_mb": first.ram.total_mb if first.ram is not None else None,
        "cpu_count": len(first.cpus) or None,
        "cpus_off": sum(1 for c in first.cpus if c is None),
        "rails": [r.name for r in first.rails],
        "gpu_form": gpu_form,
    }


def imported_facts(
    identity: dict[str, Any], device_name: str | None, source: str = "tegrastats"
) -> dict[str, Any]:
    """The device row's facts of an imported log. The log was measured on some board, not necessarily this
    machine: it goes to a device named by ``--device-name`` (default "imported") and described by what the
    log itself tells (exact RAM in MB, cores, rails, GPU form), which is in its fingerprint: two boards are
    never merged, and nothing is claimed that the log does not say."""
    ram = identity.get("ram_total_mb")
    parts = [
        f"RAM {ram:g} MB" if ram else "RAM unknown",
        f"{identity.get('cpu_count') or '?'} cores ({identity.get('cpus_off', 0)} off)",
        "rails " + "/".join(identity.get("rails") or ["none"]),
        str(identity.get("gpu_form") or "GPU unknown"),
    ]
    return {
        "hostname": device_name or IMPORTED_HOSTNAME,
        "machine_id": None,
        "arch": "unknown",
        "cpu_model": None,
        "cpu_count": identity.get("cpu_count"),
        "ram_total_mb": ram,
        "board_model": f"imported {source} log: " + ", ".join(parts),
        "l4t_release": None,
        "gpu": None,
        "kernel": None,
        "os_release": None,
        "source": f"{source} log import: only what the log shows is known",
    }


def already_imported(session: Session, path: Path) -> int | None:
    """The sweep a file with the same sha256 was imported as, if any."""
    from sqlalchemy import select

    return session.scalar(
        select(Sweep.id).where(Sweep.plan_hash == file_sha256(path), Sweep.status == SWEEP_STATUS).limit(1)
    )


def _store_error(exc: SQLAlchemyError, db: str | None) -> TegrastatsImportError:
    from edgeprof.storage.db import mask_url, scrub

    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return TegrastatsImportError(f"cannot store samples in {mask_url(db)}: {scrub(first, db)}")


def _imported_before(session: Session, path: Path, notes: TextIO) -> bool:
    """True (the session closed, the user told) where the same file was imported already."""
    existing = already_imported(session, path)
    if existing is None:
        return False
    session.close()
    notes.write(f"{path.name} already imported as sweep {existing} (same sha256): nothing stored\n")
    return True


class _DbWriter:
    """Streams records into sample blocks of one new sweep; nothing is visible before ``commit``."""

    def __init__(self, session: Session, path: Path, device_name: str | None = None) -> None:
        self.session = session
        self.path = path
        self.device_name = device_name
        self.sweep_id: int | None = None
        self.ticks: list[Tick] = []
        self.n_pending = 0
        self.n_rows = 0
        self.sweep: Sweep | None = None
        self.first_epoch: float | None = None
        self.min_epoch: float | None = None
        self.max_epoch: float | None = None

    def _begin(self, first: TegrastatsRecord) -> int:
        from edgeprof import __version__
        from edgeprof.device import get_or_create_device
        from edgeprof.run_states import utcnow

        device = get_or_create_device(self.session, imported_facts(log_identity(first), self.device_name))
        now = utcnow()
        sweep = Sweep(
            name=f"import:{self.path.name}",
            plan_path=str(self.path.resolve()),
            plan_text="",  # no plan: nothing was run, a log was read
            plan_hash=file_sha256(self.path),  # the same log imported twice is recognisable
            device_id=device.id,
            edgeprof_version=__version__,
            started_at=now,
            ended_at=now,
            status=SWEEP_STATUS,
            n_specs=0,
        )
        self.session.add(sweep)
        self.session.flush()
        self.sweep = sweep
        return sweep.id

    def add(
        self, rec: TegrastatsRecord, index: int, ts: datetime | None, metrics: dict[str, Any] | None = None
    ) -> None:
        if self.sweep_id is None:
            self.sweep_id = self._begin(rec)
        epoch = local_epoch(ts) if ts is not None else None
        if epoch is not None:
            if self.first_epoch is None:
                self.first_epoch = epoch
            self.min_epoch = epoch if self.min_epoch is None else min(self.min_epoch, epoch)
            self.max_epoch = epoch if self.max_epoch is None else max(self.max_epoch, epoch)
            t_wall, t_mono = epoch, epoch - self.first_epoch
        else:
            t_wall = t_mono = float(index)  # no time known: record index x 1 s (see the module docstring)
        values = record_to_metrics(rec) if metrics is None else metrics
        self.ticks.append(Tick(t_mono, t_wall, values))
        self.n_pending += len(values)
        if len(self.ticks) >= MAX_TICKS_PER_BLOCK:  # bounded memory, and blocks big enough to compress well
            self.flush()

    def flush(self) -> None:
        # Bulk path of live telemetry (storage/samples.py): one block per MAX_TICKS_PER_BLOCK ticks.
        if self.ticks:
            write_ticks(self.session, self.sweep_id, None, SOURCE, self.ticks)
            self.n_rows += self.n_pending
            self.ticks, self.n_pending = [], 0

    def finish(self, counts: ImportCounts) -> None:
        self.flush()
        if self.sweep is None:
            return
        if self.min_epoch is not None and self.max_epoch is not None:
            self.sweep.started_at = utc_naive(self.min_epoch)
            self.sweep.ended_at = utc_naive(self.max_epoch)
        else:
            # no timestamp: the file's last write is the one date the log has (its end, at the latest), so
            # an old log does not sort as the newest sweep
            written = utc_naive(self.path.stat().st_mtime)
            self.sweep.started_at = self.sweep.ended_at = written
        clock = "timestamps" if counts.timestamped == counts.records else "record_index"
        if 0 < counts.timestamped < counts.records:
            clock = "mixed"
        self.sweep.sampler_json = json.dumps(
            {
                "source": SOURCE,
                "file": self.path.name,
                "records": counts.records,
                "lines_with_unknown_fields": counts.with_unknown,
                "lines_skipped": counts.skipped,
                "clock": clock,
                "clock_note": "t_wall: line timestamp as local time, t_mono: seconds since the first one; "
                "without a timestamp both are the record index x 1.0 s",
            },
            sort_keys=True,
        )


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def open_import_session(db: str) -> Session:
    from edgeprof.storage.db import DatabaseError, default_db_path, mask_url, new_session, open_engine, scrub
    from edgeprof.storage.guard import StorageGuardError, check_before_write, sqlite_path_of
    from edgeprof.storage.migrations import SchemaTooNewError

    path = sqlite_path_of(db, default_db_path())
    try:
        # The same check as `run`: never into another application's file or a damaged DB, nor through a
        # link to nothing (a folder is left to the opener's own message).
        if path is not None and (path.is_file() or path.is_symlink()):
            check_before_write(path)
        return new_session(open_engine(db))
    except (StorageGuardError, DatabaseError) as exc:
        raise TegrastatsImportError(scrub(str(exc), db)) from None
    except SchemaTooNewError as exc:
        raise TegrastatsImportError(str(exc)) from None
    except (SQLAlchemyError, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TegrastatsImportError(f"cannot open database {mask_url(db)}: {scrub(first, db)}") from None


# -- the command -------------------------------------------------------------------------------------------


def import_log(
    path: Path,
    as_json: bool,
    db: str | None,
    out: TextIO,
    *,
    err: TextIO | None = None,
    device_name: str | None = None,
    rows: list[Row] | LineSample | None = None,
) -> int:
    """Import or show the tegrastats log ``path``; returns the number of records read (0: already there).

    ``as_json``: JSON lines on ``out``. ``db``: store in that database (path or URL). Neither: a summary on
    ``out``. Notes go to ``err``, by default ``sys.stderr`` with ``as_json`` and ``out`` otherwise.
    ``rows``: filled with each record's (epoch or None, metrics), for the verdict on the log (a
    ``LineSample`` keeps that bounded)."""
    path = Path(path)
    notes = err if err is not None else (sys.stderr if as_json else out)
    check_path(path)
    counts = ImportCounts()
    deque(text_lines(path), maxlen=0)  # a first pass rejects binary input before anything is written

    session = open_import_session(db) if db is not None else None
    if session is not None and _imported_before(session, path, notes):
        return 0
    writer = _DbWriter(session, path, device_name) if session is not None else None
    summary = Summary() if not as_json and db is None else None
    try:
        for index, rec in enumerate(_records(path, counts)):
            ts = parse_timestamp(rec.timestamp)
            if ts is not None:
                counts.timestamped += 1
            if as_json:
                out.write(json.dumps(record_to_json(rec)) + "\n")
            metrics = record_to_metrics(rec) if summary or writer or rows is not None else None
            if summary is not None:
                summary.add(rec, ts, metrics)
            if writer is not None:
                writer.add(rec, index, ts, metrics)
            if rows is not None and metrics is not None:
                rows.append((local_epoch(ts) if ts is not None else None, metrics))
        if counts.records == 0:
            raise TegrastatsImportError(f"no tegrastats lines in {path}")
        if writer is not None and session is not None:
            writer.finish(counts)
            session.commit()
    except SQLAlchemyError as exc:
        if session is not None:
            session.rollback()
        raise _store_error(exc, db) from None
    except BaseException:
        if session is not None:
            session.rollback()
        raise
    finally:
        if session is not None:
            session.close()

    _tell(path, counts, summary, writer, out, notes)
    return counts.records


def _tell(
    path: Path,
    counts: ImportCounts,
    summary: Summary | None,
    writer: _DbWriter | None,
    out: TextIO,
    notes: TextIO,
) -> None:
    """What the import found and did: the summary on ``out``, where the samples went and what was odd on
    ``notes``."""
    if summary is not None:
        for line in summary.lines(path, counts):
            out.write(line + "\n")
    if writer is not None:
        notes.write(
            f"imported {counts.records} records ({writer.n_rows} samples) from {path.name} "
            f"into sweep {writer.sweep_id} ({SWEEP_STATUS})\n"
        )
    if counts.with_unknown:
        notes.write(
            f"{counts.with_unknown} lines had unknown fields (imported; the rest of each line kept)\n"
        )
    if counts.skipped:
        notes.write(f"{counts.skipped} lines were not tegrastats output (skipped)\n")


# -- a log as series, for the verdict on it: edgeprof.telemetry.log_series -----------------------------


def tegrastats_series(path: Path, interval_s: float | None = None) -> LogSeries:
    """The records of a tegrastats log as series (bad input raises ``TegrastatsImportError``)."""
    check_path(Path(path))
    counts = ImportCounts()
    sample = LineSample()
    for rec in _records(Path(path), counts):
        ts = parse_timestamp(rec.timestamp)
        sample.append((local_epoch(ts) if ts is not None else None, record_to_metrics(rec)))
    if not sample:
        raise TegrastatsImportError(f"no tegrastats lines in {path}")
    return sample.series(interval_s)
