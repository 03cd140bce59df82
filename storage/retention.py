"""Retention: ``edgeprof db compact [--keep-raw 7d]`` downsamples old raw telemetry.

For every sweep that ended (or, unfinished, started) more than ``keep_raw`` ago, each run's raw sample
blocks (``resolution_ms IS NULL``) are replaced by

* per-phase aggregates of every metric, stored as ``phase_stat`` rows with stats ``cmp_min``, ``cmp_max``,
  ``cmp_mean`` and ``cmp_n`` (prefixed so they never mix with the aggregates the sweep computed itself,
  which stay as they were), over the phases of that run (readings of NULL excluded, ``cmp_n`` counts the
  non-NULL ones);
* a 1 Hz series per metric (``resolution_ms = 1000``): per 1-s bucket the mean of the readings (NULL when
  all were unreadable), for counters (energy in uJ/mJ, throttle counts) the bucket's last reading instead,
  since a mean of a counter is not a counter reading and energy deltas must still be computable. The
  bucket's time is that of its last reading.

Measurements, phases, verdicts and the sweep's own phase aggregates are never touched. Samples not tied to
a run (an imported tegrastats log) keep their 1 Hz series only (there are no phases to aggregate over).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sqlalchemy import Connection, Engine, delete, func, insert, select
from sqlalchemy.orm import Session

from edgeprof.storage.db import new_session
from edgeprof.storage.models import CollectorStatus, Phase, PhaseStat, SampleBlock, Sweep
from edgeprof.storage.sample_codec import (
    CODEC,
    MAX_TICKS_PER_BLOCK,
    ST_ABSENT,
    ST_NULL,
    ST_VALUE,
    decode_block,
    encode_arrays,
)

BUCKET_MS = 1000
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
# A century of raw telemetry is "keep everything"; beyond it the cutoff date is not representable.
MAX_KEEP_RAW_S = 100 * 365 * 86400.0
_UNIT_S = {"": 86400.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
# Name fallbacks when a collector did not declare a metric's kind (older sweeps, imports).
# A flag word (``.clock_event_reasons``, ``.throttled_flags``) keeps a reading, never a mean of its bits.
_COUNTER_NAME = re.compile(r"(^energy\.|_uj$|_mj$|count$|\.clock_event_reasons$|_flags$)")


def parse_duration(text: str) -> float:
    """'7d', '12h', '30m', '90s', '2w' or a bare number of days -> seconds; ValueError otherwise."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"--keep-raw {text!r}: expected a duration such as 7d, 12h, 30m or 0")
    seconds = float(m.group(1)) * _UNIT_S[m.group(2)]
    if seconds > MAX_KEEP_RAW_S:  # now - keep would fall before year 1: an OverflowError, not a cutoff
        years = MAX_KEEP_RAW_S / (365 * 86400)
        raise ValueError(f"--keep-raw {text.strip()!r}: longer than {years:.0f} years")
    return seconds


@dataclass
class CompactResult:
    sweeps: int = 0
    runs: int = 0
    blocks_before: int = 0
    blocks_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    readings_before: int = 0
    readings_after: int = 0
    phase_stats: int = 0

    @property
    def freed_bytes(self) -> int:
        return self.bytes_before - self.bytes_after


def _counters(session: Session, sweep_id: int) -> set[str]:
    out: set[str] = set()
    q = select(CollectorStatus.metrics_json).where(CollectorStatus.sweep_id == sweep_id)
    for (raw,) in session.execute(q):
        try:
            entries = json.loads(raw)
        except ValueError:
            continue
        for e in entries if isinstance(entries, list) else []:
            if isinstance(e, dict) and e.get("kind") == "counter" and "name" in e:
                out.add(str(e["name"]))
    return out


Cols = dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]


def _columns(payloads: list[bytes]) -> tuple[np.ndarray, np.ndarray, Cols]:
    """Blocks of one source -> (t_mono, t_wall of all ticks, metric -> (tick index, values, is_null))."""
    t_parts: list[np.ndarray] = []
    w_parts: list[np.ndarray] = []
    cols: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    offset = 0
    for p in payloads:
        t_mono, t_wall, decoded = decode_block(p)
        w_parts.append(t_wall)
        for name, idx, vals, nulls in decoded:
            cols.setdefault(name, []).append((idx + offset, vals, nulls))
        t_parts.append(t_mono)
        offset += len(t_mono)
    t_all = np.concatenate(t_parts) if t_parts else np.zeros(0)
    w_all = np.concatenate(w_parts) if w_parts else np.zeros(0)
    merged = {
        name: (np.concatenate([a for a, _, _ in parts]), np.concatenate([v for _, v, _ in parts]),
               np.concatenate([n for _, _, n in parts]))
        for name, parts in cols.items()
    }  # fmt: skip
    return t_all, w_all, merged


def _downsample(
    t_all: np.ndarray,
    t_wall_all: np.ndarray,
    cols: Cols,
    counters: set[str],
) -> tuple[np.ndarray, np.ndarray, list[tuple[str, np.ndarray, np.ndarray]]]:
    order = np.argsort(t_all, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    t_sorted = t_all[order]
    buckets = np.floor((t_sorted - t_sorted[0]) * 1000.0 / BUCKET_MS).astype(np.int64)
    edges = np.flatnonzero(np.diff(buckets)) + 1
    last = np.append(edges - 1, len(t_sorted) - 1)  # the last tick of each bucket (sorted positions)
    n_b = len(last)
    bucket_of_tick = np.repeat(np.arange(n_b), np.diff(np.append(0, last + 1)))
    out_cols = []
    for name, (idx, vals, nulls) in cols.items():
        pos = rank[idx]
        b = bucket_of_tick[pos]
        present = np.zeros(n_b, dtype=bool)
        present[b] = True
        ok = ~nulls & np.isfinite(vals)
        n_ok = np.bincount(b[ok], minlength=n_b)
        if _COUNTER_NAME.search(name) or name in counters:
            # the last non-NULL reading of the bucket (positions sorted by time)
            value = np.full(n_b, np.nan)
            sel = np.argsort(pos[ok], kind="stable")
            value[b[ok][sel]] = vals[ok][sel]  # later assignments win: the last one
        else:
            sums = np.bincount(b[ok], weights=vals[ok], minlength=n_b)
            with np.errstate(invalid="ignore", divide="ignore"):
                value = sums / n_ok
        states = np.where(~present, ST_ABSENT, np.where(n_ok > 0, ST_VALUE, ST_NULL)).astype(np.uint8)
        out_cols.append((name, states, value[states == ST_VALUE]))
    return t_sorted[last], t_wall_all[order][last], out_cols


def compact(session: Session, keep_raw_s: float, now: dt.datetime | None = None) -> CompactResult:
    """Downsample raw telemetry of sweeps older than ``keep_raw_s``; the caller commits."""
    now = now or dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    cutoff = now - dt.timedelta(seconds=keep_raw_s)
    res = CompactResult()
    sweeps = session.execute(
        select(Sweep.id).where(func.coalesce(Sweep.ended_at, Sweep.started_at) <= cutoff).order_by(Sweep.id)
    ).scalars().all()
    for sweep_id in sweeps:
        groups = session.execute(
            select(SampleBlock.run_id, SampleBlock.source)
            .where(SampleBlock.sweep_id == sweep_id, SampleBlock.resolution_ms.is_(None))
            .distinct()
        ).all()
        if not groups:
            continue
        res.sweeps += 1
        counters = _counters(session, sweep_id)
        runs_done: set[int] = set()
        for run_id, source in groups:
            cond = [SampleBlock.sweep_id == sweep_id, SampleBlock.source == source,
                    SampleBlock.resolution_ms.is_(None)]  # fmt: skip
            cond.append(SampleBlock.run_id.is_(None) if run_id is None else SampleBlock.run_id == run_id)
            blocks = session.execute(
                select(SampleBlock.id, SampleBlock.data, SampleBlock.n_values).where(*cond)
                .order_by(SampleBlock.t_start_mono)
            ).all()  # fmt: skip
            res.blocks_before += len(blocks)
            res.bytes_before += sum(len(b.data) for b in blocks)
            res.readings_before += sum(int(b.n_values) for b in blocks)
            t_all, t_wall, cols = _columns([b.data for b in blocks])
            if run_id is not None:
                runs_done.add(run_id)
                res.phase_stats += _phase_aggregates(session, run_id, t_all, cols)
            tb, twb, out_cols = _downsample(t_all, t_wall, cols, counters)
            session.execute(delete(SampleBlock).where(SampleBlock.id.in_([b.id for b in blocks])))
            for start in range(0, len(tb), MAX_TICKS_PER_BLOCK):
                sl = slice(start, start + MAX_TICKS_PER_BLOCK)
                chunk = []
                for name, states, values in out_cols:
                    n_before = int(np.count_nonzero(states[: sl.start] == ST_VALUE))
                    st = states[sl]
                    n_here = int(np.count_nonzero(st == ST_VALUE))
                    chunk.append((name, st, values[n_before : n_before + n_here]))
                payload, n_values = encode_arrays(tb[sl], twb[sl], chunk)
                session.execute(
                    insert(SampleBlock),
                    [{"sweep_id": sweep_id, "run_id": run_id, "source": source, "codec": CODEC,
                      "t_start_mono": float(tb[sl][0]), "t_end_mono": float(tb[sl][-1]),
                      "n_ticks": len(tb[sl]), "n_values": n_values, "resolution_ms": BUCKET_MS,
                      "data": payload}],
                )  # fmt: skip
                res.blocks_after += 1
                res.bytes_after += len(payload)
                res.readings_after += n_values
        res.runs += len(runs_done)
    return res


def _phase_aggregates(
    session: Session, run_id: int, t_all: np.ndarray, cols: Cols
) -> int:
    rows = []
    for ph in session.scalars(select(Phase).where(Phase.run_id == run_id)):
        for name, (idx, vals, nulls) in cols.items():
            t = t_all[idx]
            sel = (t >= ph.t_start_mono) & (t <= ph.t_end_mono) & ~nulls & np.isfinite(vals)
            v = vals[sel]
            stats: dict[str, float | None] = {
                "cmp_min": float(v.min()) if len(v) else None,
                "cmp_max": float(v.max()) if len(v) else None,
                "cmp_mean": float(v.mean()) if len(v) else None,
                "cmp_n": float(len(v)),
            }
            for stat, value in stats.items():
                rows.append({"run_id": run_id, "phase": ph.name, "kind": ph.kind, "rep": ph.rep,
                             "metric": name, "stat": stat, "value": value})  # fmt: skip
    if rows:
        session.execute(insert(PhaseStat), rows)
    return len(rows)


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def gain_text(before: int, after: int, grew_because: str) -> str:
    """What going from ``before`` to ``after`` bytes freed, never a negative figure: "freed 1.2 MB", or
    where it grew "freed nothing: 3.1 kB more, <grew_because>" (a change under 0.1 MB in kB)."""
    diff = before - after
    size = _mb(abs(diff)) if abs(diff) >= 100_000 or diff == 0 else f"{abs(diff) / 1e3:.1f} kB"
    return f"freed {size}" if diff >= 0 else f"freed nothing: {size} more, {grew_because}"


def _sqlite_bytes(conn: Connection, path: Path) -> int:
    """The database's size on disk once its write-ahead log is folded back in: the main file alone
    understates it while the WAL holds pages (a VACUUM then seemed to free a negative amount)."""
    conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def run_compact(engine: Engine, keep_raw_s: float, vacuum: bool) -> str:
    """Compact, commit, optionally VACUUM (SQLite); returns the one-paragraph summary of what it freed
    (``db compact`` prints it, the agent logs it after each sweep)."""
    with new_session(engine) as session:
        res = compact(session, keep_raw_s)
        session.commit()
    sample_gain = gain_text(
        res.bytes_before, res.bytes_after, "the 1 Hz series holds more than the raw samples it replaced"
    )
    lines = [
        f"compacted {res.sweeps} sweep(s), {res.runs} run(s): {res.readings_before:,} raw readings in "
        f"{res.blocks_before} blocks -> {res.readings_after:,} 1 Hz readings in {res.blocks_after} blocks, "
        f"{res.phase_stats} per-phase aggregates; sample data {_mb(res.bytes_before)} -> "
        f"{_mb(res.bytes_after)} ({sample_gain})"
    ]
    url = engine.url
    if vacuum and url.get_backend_name() == "sqlite" and url.database and res.blocks_before:
        path = Path(url.database)
        with engine.connect() as conn:
            before = _sqlite_bytes(conn, path)
            conn.exec_driver_sql("VACUUM")
            after = _sqlite_bytes(conn, path)
        freed = gain_text(before, after, "the file VACUUM rebuilt is larger")
        lines.append(f"database file {_mb(before)} -> {_mb(after)} after VACUUM ({freed})")
    return "\n".join(lines)
