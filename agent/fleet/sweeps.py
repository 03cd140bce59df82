"""A fleet of devices and one central database: list sweeps by device, push, export, import.

The copying itself is ``edgeprof.storage.transfer`` (generic over the tables, matched by global identity);
this module chooses the sweeps, runs one target transaction per sweep and turns files into records.
"""

from __future__ import annotations

import errno
import gzip
import io
import json
import os
import stat
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

from sqlalchemy import Engine, func, or_, select
from sqlalchemy.orm import Session

from edgeprof.fleet.series import fill_sweep_series
from edgeprof.storage.migrations import HEAD_VERSION
from edgeprof.storage.models import Build, Device, Run, Sweep
from edgeprof.storage.transfer import TransferCounts, apply_sweep, iter_sweep_records, sweep_is_current

EXPORT_FORMAT = 1


class FleetError(RuntimeError):
    """An expected failure (bad selection, bad file): one line for the user."""


# --- listing ----------------------------------------------------------------------------------------------


def device_filter(name: str) -> Any:
    """Rows of the device called ``name``: its hostname, its board model, or a prefix of its uid."""
    lowered = name.lower()
    return or_(
        func.lower(Device.hostname) == lowered,
        func.lower(Device.board_model) == lowered,
        Device.uid.startswith(lowered),
    )


def sweep_scope(device: str | None) -> list[Any]:
    """WHERE clauses limiting sweeps to ``device`` (none for None): for report, compare and status."""
    if device is None:
        return []
    return [Sweep.device_id.in_(select(Device.id).where(device_filter(device)))]


def latest_sweep_of(session: Session, device: str) -> int | None:
    return session.scalar(select(Sweep.id).where(*sweep_scope(device)).order_by(Sweep.id.desc()).limit(1))


def check_sweep_device(session: Session, sweep_id: int, device: str) -> bool:
    return session.scalar(select(Sweep.id).where(Sweep.id == sweep_id, *sweep_scope(device))) is not None


def list_sweeps(
    session: Session, device: str | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """One dict per sweep, newest first: device (hostname, board, L4T), build(s), plan, times, status."""
    query = select(Sweep, Device).join(Device, Sweep.device_id == Device.id)
    if device:
        query = query.where(*sweep_scope(device))
    query = query.order_by(Sweep.started_at.desc(), Sweep.id.desc())
    if limit is not None:
        query = query.limit(limit)
    found = session.execute(query).all()
    ids = [s.id for s, _d in found]
    builds: dict[int, list[str]] = {}
    runs: dict[int, int] = {}
    if ids:
        for sweep_id, version, backend in session.execute(
            select(Run.sweep_id, Build.llama_cpp_python_version, Build.backend)
            .join(Build, Run.build_id == Build.id)
            .where(Run.sweep_id.in_(ids))
            .distinct()
        ):
            builds.setdefault(sweep_id, []).append(f"llama-cpp-python {version} ({backend})")
        for sweep_id, n in session.execute(
            select(Run.sweep_id, func.count()).where(Run.sweep_id.in_(ids)).group_by(Run.sweep_id)
        ):
            runs[sweep_id] = int(n)
    return [
        {
            "sweep_id": s.id,
            "sweep_uid": s.uid,
            "name": s.name,
            "plan_path": s.plan_path,
            "plan_hash": s.plan_hash,
            "status": s.status,
            "started_at": s.started_at.isoformat() if s.started_at else None,
            "ended_at": s.ended_at.isoformat() if s.ended_at else None,
            "n_specs": s.n_specs,
            "n_runs": runs.get(s.id, 0),
            "device_hostname": d.hostname,
            "device_board_model": d.board_model,
            "device_l4t_release": d.l4t_release,
            "device_uid": d.uid,
            "builds": sorted(builds.get(s.id, [])),
        }
        for s, d in found
    ]


SWEEPS_HEADERS = ("id", "device", "board", "L4T", "build", "plan", "started", "status", "runs")


def sweep_cells(rows: list[dict[str, Any]]) -> list[list[str]]:
    """``list_sweeps``'s rows as the cells of the sweeps table, in ``SWEEPS_HEADERS`` order."""
    return [
        [
            str(r["sweep_id"]),
            r["device_hostname"],
            r["device_board_model"] or "-",
            r["device_l4t_release"] or "-",
            "; ".join(r["builds"]) or "-",
            r["name"],
            (r["started_at"] or "")[:19],
            r["status"],
            f"{r['n_runs']}/{r['n_specs']}",
        ]
        for r in rows
    ]


def render_sweeps(rows: list[dict[str, Any]]) -> str:
    """The sweeps table with every column at its full width (the CLI fits it to the terminal)."""
    if not rows:
        return "no sweeps"
    lines = [list(SWEEPS_HEADERS), *sweep_cells(rows)]
    widths = [max(len(row[i]) for row in lines) for i in range(len(SWEEPS_HEADERS))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


# --- choosing sweeps --------------------------------------------------------------------------------------


def select_sweeps(
    session: Session, sweep_ids: list[int] | None, since: datetime | None, everything: bool
) -> list[int]:
    """Local sweep ids for --sweep / --since / --all (exactly one of them), oldest first."""
    chosen = sum(1 for x in (bool(sweep_ids), since is not None, everything) if x)
    if chosen != 1:
        raise FleetError("give exactly one of --sweep ID, --since DATE or --all")
    if sweep_ids:
        known = set(session.scalars(select(Sweep.id).where(Sweep.id.in_(sweep_ids))))
        missing = [i for i in sweep_ids if i not in known]
        if missing:
            raise FleetError(f"no sweep {', '.join(map(str, missing))} in this database")
        return sorted(set(sweep_ids))
    query = select(Sweep.id).order_by(Sweep.id)
    if since is not None:
        query = query.where(Sweep.started_at >= since)
    return list(session.scalars(query))


# --- push ---------------------------------------------------------------------------------------------


@dataclass
class PushResult:
    sent: list[tuple[int, TransferCounts]]
    skipped: list[int]

    @property
    def n_added(self) -> int:
        return sum(c.n_added for _i, c in self.sent)


def push_sweeps(
    source: Engine,
    target: Engine,
    sweep_ids: list[int],
    *,
    recheck: bool = False,
    on_sweep: Callable[[int, TransferCounts | None], None] | None = None,
) -> PushResult:
    """Copy the sweeps to ``target``, one transaction each; a sweep already there and finished is skipped.
    The target's per-second series of the runs copied are built in the same transaction.

    Idempotent (again adds nothing) and resumable (a kill or lost connection loses at most the sweep in
    flight, which the next push sends whole).
    """
    result = PushResult(sent=[], skipped=[])
    for sweep_id in sweep_ids:
        with source.connect() as src, target.begin() as dst:
            if not recheck and sweep_is_current(src, dst, sweep_id):
                result.skipped.append(sweep_id)
                if on_sweep:
                    on_sweep(sweep_id, None)
                continue
            counts = apply_sweep(dst, iter_sweep_records(src, sweep_id))
            fill_sweep_series(dst, counts)
        result.sent.append((sweep_id, counts))
        if on_sweep:
            on_sweep(sweep_id, counts)
    return result


# --- export / import ------------------------------------------------------------------------------------


def export_sweeps(source: Engine, sweep_ids: list[int], out: IO[str]) -> int:
    """Write the sweeps as JSON lines (a header, then per sweep a marker and its records); returns lines."""
    out.write(json.dumps({"edgeprof_export": EXPORT_FORMAT, "schema_version": HEAD_VERSION}) + "\n")
    n = 1
    with source.connect() as conn:
        for sweep_id in sweep_ids:
            records = iter_sweep_records(conn, sweep_id)
            first = True
            for table, record in records:
                if first:
                    out.write(json.dumps({"sweep": record.get("uid") if table == "sweep" else None}) + "\n")
                    first = False
                out.write(json.dumps({"t": table, "r": record}, separators=(",", ":")) + "\n")
                n += 1
            n += 1
    return n


def open_export(path: str) -> IO[str]:
    """A text stream of an export file, gzip or plain (told by its first bytes, not its name)."""
    if path == "-":
        import sys

        return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8")
    # O_NONBLOCK: a FIFO named as the export must not hang the open; only a regular file is read.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, device or folder)")
        magic = os.read(fd, 2)
    finally:
        os.close(fd)
    if magic == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")  # the caller closes it


def _export_lines(stream: IO[str], name: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of an export; a file that is not UTF-8 text or a damaged or cut gzip stream is
    a FleetError naming the line, not a UnicodeDecodeError traceback."""
    lineno = 0
    while True:
        try:
            line = stream.readline()
        except (UnicodeDecodeError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
            why = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else "damaged or cut-off gzip data"
            raise FleetError(
                f"{name}:{lineno + 1}: not an edgeprof export ({why}); the sweep being read was not imported"
            ) from None
        if not line:
            return
        lineno += 1
        yield lineno, line


def _read_export(stream: IO[str], name: str) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """The records of each sweep in an export, one list per sweep; FleetError names a bad line."""
    current: list[tuple[str, dict[str, Any]]] | None = None
    for lineno, line in _export_lines(stream, name):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FleetError(f"{name}:{lineno}: not JSON ({exc.msg}); this sweep was not imported") from None
        if lineno == 1:
            if not isinstance(item, dict) or item.get("edgeprof_export") != EXPORT_FORMAT:
                raise FleetError(f"{name}: not an edgeprof export (no header line)")
            if int(item.get("schema_version", 0)) > HEAD_VERSION:
                raise FleetError(f"{name}: written by a newer edgeprof (schema {item['schema_version']})")
            continue
        if not isinstance(item, dict):
            raise FleetError(f"{name}:{lineno}: not a record")
        if "sweep" in item:
            if current:
                yield current
            current = []
            continue
        if current is None or "t" not in item or not isinstance(item.get("r"), dict):
            raise FleetError(f"{name}:{lineno}: not a record of a sweep")
        current.append((str(item["t"]), item["r"]))
    if current:
        yield current


def import_export(
    stream: IO[str],
    name: str,
    target: Engine,
    on_sweep: Callable[[str, TransferCounts], None] | None = None,
) -> TransferCounts:
    """Apply an export to ``target``, one transaction per sweep (same identity rules as push)."""
    total = TransferCounts()
    for records in _read_export(stream, name):
        uid = next((r["uid"] for t, r in records if t == "sweep"), "?")
        with target.begin() as conn:
            try:
                counts = apply_sweep(conn, records)
                fill_sweep_series(conn, counts)
            except (LookupError, KeyError, ValueError, TypeError) as exc:
                raise FleetError(f"{name}: sweep {uid}: {exc}; nothing of this sweep was imported") from None
        total.merge(counts)
        if on_sweep:
            on_sweep(str(uid), counts)
    return total
