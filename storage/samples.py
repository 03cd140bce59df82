"""Compact telemetry storage: one row per block of collector ticks, values encoded column by column.

Why blocks: a row per reading costs ~100 bytes in SQLite (row header, rowid, two REAL timestamps, source and
metric text, a REAL value, two index entries), so a 10-hour night at 5 Hz x 60 metrics (~10 M readings) was
~1 GB. Telemetry is read by run, by phase interval and by metric, never one reading at a time, so a block of
consecutive ticks of ONE source and ONE run (what the sampler flushes every ~2 s, or what an import or a
compaction writes in bigger pieces) is the unit of storage: ``sample_block`` holds its time span (indexed, so
a phase or a run is found without reading the night) and a compressed payload (``storage.sample_codec``).

One read API, :func:`read_samples`, serves every reader: it selects blocks by sweep/run/time span in SQL,
decodes only those, and also returns rows still in the legacy one-row-per-reading ``sample`` table (written
by an older edgeprof or a test fixture), so nothing stored is ever invisible.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy import Connection, and_, delete, func, insert, select, text
from sqlalchemy.orm import Session

from edgeprof.storage.models import Sample, SampleBlock
from edgeprof.storage.sample_codec import (
    CODEC,
    MAX_TICKS_PER_BLOCK,
    Tick,
    block_metrics,
    decode_block,
    encode_block,
    merge_payloads,
)

__all__ = [
    "MAX_TICKS_PER_BLOCK",
    "MetricFilter",
    "SampleRead",
    "Tick",
    "block_rows",
    "convert_legacy",
    "count_samples",
    "envelope",
    "max_value",
    "read_samples",
    "read_series",
    "sample_metrics",
    "seal_run",
    "ticks_from_rows",
    "write_batch",
    "write_ticks",
]


class SampleRead(NamedTuple):
    t_mono: float
    t_wall: float
    run_id: int | None
    source: str
    metric: str
    value: float | None


# ----------------------------------------------------------------------------------------------- write


def ticks_from_rows(rows: Iterable[Any]) -> dict[tuple[int | None, str], list[Tick]]:
    """Group reading rows (attributes t_mono, t_wall, run_id, source, metric, value) into ticks per
    (run, source); rows of one tick share t_mono."""
    groups: dict[tuple[int | None, str], dict[float, Tick]] = {}
    for r in rows:
        by_t = groups.setdefault((r.run_id, r.source), {})
        tk = by_t.get(r.t_mono)
        if tk is None:
            tk = by_t[r.t_mono] = Tick(r.t_mono, r.t_wall, {})
        tk.values[r.metric] = r.value
    return {key: sorted(by_t.values(), key=lambda tk: tk.t_mono) for key, by_t in groups.items()}


def block_rows(
    sweep_id: int | None,
    run_id: int | None,
    source: str,
    ticks: Sequence[Tick],
    *,
    resolution_ms: int | None = None,
    max_ticks: int = MAX_TICKS_PER_BLOCK,
) -> list[dict[str, Any]]:
    """The ``sample_block`` rows (dicts for a bulk insert) holding these ticks, in blocks of <= max_ticks."""
    # Readers binary-search a block's tick times: keep them sorted (an imported log can step backwards).
    ticks = sorted(ticks, key=lambda tk: tk.t_mono)
    out = []
    for start in range(0, len(ticks), max_ticks):
        chunk = ticks[start : start + max_ticks]
        payload, n_values = encode_block(chunk)
        out.append(
            {
                "sweep_id": sweep_id,
                "run_id": run_id,
                "source": source,
                "t_start_mono": chunk[0].t_mono,
                "t_end_mono": chunk[-1].t_mono,
                "n_ticks": len(chunk),
                "n_values": n_values,
                "resolution_ms": resolution_ms,
                "codec": CODEC,
                "data": payload,
            }
        )
    return out


def write_batch(session: Session | Connection, sweep_id: int | None, rows: Iterable[Any]) -> int:
    """Store reading rows (the sampler's ``SampleRow``s, or anything with the same attributes) as blocks.

    The caller commits. Returns the number of blocks written.
    """
    blocks: list[dict[str, Any]] = []
    for (run_id, source), ticks in ticks_from_rows(rows).items():
        blocks.extend(block_rows(sweep_id, run_id, source, ticks))
    if blocks:
        session.execute(insert(SampleBlock), blocks)
    return len(blocks)


def write_ticks(
    session: Session | Connection,
    sweep_id: int | None,
    run_id: int | None,
    source: str,
    ticks: Sequence[Tick],
    *,
    resolution_ms: int | None = None,
) -> int:
    """Store ticks of one source as blocks (bulk path of imports and compaction). The caller commits."""
    blocks = block_rows(sweep_id, run_id, source, ticks, resolution_ms=resolution_ms)
    if blocks:
        session.execute(insert(SampleBlock), blocks)
    return len(blocks)


# ------------------------------------------------------------------------------------------------ read

MetricFilter = Collection[str] | Callable[[str], bool] | None


def _wanted(metrics: MetricFilter) -> Callable[[str], bool]:
    if metrics is None:
        return lambda _m: True
    if callable(metrics):
        return metrics
    names = set(metrics)
    return names.__contains__


def read_samples(
    session: Session | Connection,
    sweep_id: int | None = None,
    t0: float | None = None,
    t1: float | None = None,
    metrics: MetricFilter = None,
    *,
    run_ids: Collection[int] | None = None,
    sources: Collection[str] | None = None,
    with_nulls: bool = True,
) -> list[SampleRead]:
    """Readings of a sweep (or of some runs), optionally within [t0, t1] on the monotonic clock and for some
    metrics (names, or a predicate on the name), in time order. ``value`` is None where the source could not
    be read; ``with_nulls=False`` leaves those out."""
    wanted = _wanted(metrics)
    out: list[SampleRead] = []
    q = select(SampleBlock.run_id, SampleBlock.source, SampleBlock.data)
    if sweep_id is not None:
        q = q.where(SampleBlock.sweep_id == sweep_id)
    if run_ids is not None:
        q = q.where(SampleBlock.run_id.in_(list(run_ids)))
    if sources is not None:
        q = q.where(SampleBlock.source.in_(list(sources)))
    if t0 is not None:
        q = q.where(SampleBlock.t_end_mono >= t0)
    if t1 is not None:
        q = q.where(SampleBlock.t_start_mono <= t1)
    for run_id, source, data in session.execute(q.order_by(SampleBlock.t_start_mono)):
        t_mono, t_wall, cols = decode_block(data)
        lo = 0 if t0 is None else int(np.searchsorted(t_mono, t0, "left"))
        hi = len(t_mono) if t1 is None else int(np.searchsorted(t_mono, t1, "right"))
        if lo >= hi:
            continue
        tm_list = t_mono.tolist()
        tw_list = t_wall.tolist()
        for name, idx, vals, is_null in cols:
            if not wanted(name):
                continue
            a = int(np.searchsorted(idx, lo, "left"))
            b = int(np.searchsorted(idx, hi, "left"))
            nulls = is_null[a:b].tolist()
            vlist: list[float] = vals[a:b].tolist()
            for j, i in enumerate(idx[a:b].tolist()):
                if nulls[j]:
                    if not with_nulls:
                        continue
                    out.append(SampleRead(tm_list[i], tw_list[i], run_id, source, name, None))
                else:
                    out.append(SampleRead(tm_list[i], tw_list[i], run_id, source, name, vlist[j]))
    out.extend(_read_legacy(session, sweep_id, t0, t1, wanted, run_ids, sources, with_nulls))
    out.sort(key=lambda r: r.t_mono)
    return out


def _read_legacy(
    session: Session | Connection,
    sweep_id: int | None,
    t0: float | None,
    t1: float | None,
    wanted: Callable[[str], bool],
    run_ids: Collection[int] | None,
    sources: Collection[str] | None,
    with_nulls: bool,
) -> Iterator[SampleRead]:
    q = select(Sample.t_mono, Sample.t_wall, Sample.run_id, Sample.source, Sample.metric, Sample.value)
    conds = []
    if sweep_id is not None:
        conds.append(Sample.sweep_id == sweep_id)
    if run_ids is not None:
        conds.append(Sample.run_id.in_(list(run_ids)))
    if sources is not None:
        conds.append(Sample.source.in_(list(sources)))
    if t0 is not None:
        conds.append(Sample.t_mono >= t0)
    if t1 is not None:
        conds.append(Sample.t_mono <= t1)
    if not with_nulls:
        conds.append(Sample.value.is_not(None))
    if conds:
        q = q.where(and_(*conds))
    for row in session.execute(q):
        if wanted(row.metric):
            yield SampleRead(row.t_mono, row.t_wall, row.run_id, row.source, row.metric, row.value)


def sample_metrics(session: Session | Connection, run_id: int) -> set[str]:
    """The metric names stored for a run (decodes only the block headers' columns)."""
    names: set[str] = set()
    for (data,) in session.execute(select(SampleBlock.data).where(SampleBlock.run_id == run_id)):
        names.update(block_metrics(data))
    names.update(session.execute(select(Sample.metric).where(Sample.run_id == run_id).distinct()).scalars())
    return names


def count_samples(session: Session | Connection, sweep_id: int | None = None) -> int:
    """Readings stored (blocks' counts plus legacy rows), without decoding anything."""
    qb = select(func.coalesce(func.sum(SampleBlock.n_values), 0))
    ql = select(func.count()).select_from(Sample)
    if sweep_id is not None:
        qb = qb.where(SampleBlock.sweep_id == sweep_id)
        ql = ql.where(Sample.sweep_id == sweep_id)
    return int(session.execute(qb).scalar_one()) + int(session.execute(ql).scalar_one())


# -------------------------------------------------------------------------------- legacy rows -> blocks


def convert_legacy(conn: Connection, chunk_rows: int = 200_000) -> int:
    """Move every row of the legacy ``sample`` table into blocks (migration 11; also safe to rerun).

    Works one (sweep, run, source) group at a time, in row-id chunks, so memory stays bounded on a big DB.
    Returns the number of readings converted.
    """
    groups = conn.execute(text("SELECT DISTINCT sweep_id, run_id, source FROM sample")).all()
    converted = 0
    for sweep_id, run_id, source in groups:
        conds = [Sample.source == source]
        conds.append(Sample.sweep_id.is_(None) if sweep_id is None else Sample.sweep_id == sweep_id)
        conds.append(Sample.run_id.is_(None) if run_id is None else Sample.run_id == run_id)
        last_t: float | None = None
        while True:
            q = select(
                Sample.t_mono, Sample.t_wall, Sample.run_id, Sample.source, Sample.metric, Sample.value
            ).where(and_(*conds))
            if last_t is not None:
                q = q.where(Sample.t_mono > last_t)
            # whole ticks only: take a chunk, then the rest of its last tick
            rows = conn.execute(q.order_by(Sample.t_mono, Sample.id).limit(chunk_rows)).all()
            if not rows:
                break
            t_last = rows[-1].t_mono
            rest = conn.execute(q.where(Sample.t_mono == t_last).order_by(Sample.id)).all()
            rows = [r for r in rows if r.t_mono != t_last] + list(rest)
            for (_r, _s), ticks in ticks_from_rows(rows).items():
                write_ticks(conn, sweep_id, run_id, source, ticks)
            converted += len(rows)
            last_t = t_last
        conn.execute(delete(Sample).where(and_(*conds)))
    return converted


# ----------------------------------------------------------------------------------------- aggregates

# block id -> (t0, t1, metrics) -> max: blocks are immutable once written (compaction deletes and rewrites
# them under new ids), so a per-process cache keeps `analyse` over a whole night from decoding a block once
# per run of the sweep.
# The key carries the block's span and counts besides its id: SQLite may reuse the id of a block that sealing
# deleted, and the merged block that takes it differs in those.
_MAX_CACHE: dict[tuple[Any, ...], float | None] = {}


def max_value(
    session: Session | Connection,
    run_ids: Collection[int],
    metrics: Collection[str],
    spans: dict[int, tuple[float, float]] | None = None,
) -> float | None:
    """MAX(value) of these metrics over these runs' readings (within each run's span when given), NULLs and
    non-finite values skipped; decodes the blocks with numpy only, never building rows."""
    names = tuple(sorted(set(metrics)))
    best: float | None = None
    if spans is not None:
        run_ids = [r for r in run_ids if r in spans]
    b = SampleBlock
    q = select(b.id, b.run_id, b.t_start_mono, b.t_end_mono, b.n_values).where(b.run_id.in_(list(run_ids)))
    for block_id, run_id, b0, b1, n_values in session.execute(q):
        t0, t1 = spans[run_id] if spans is not None and run_id is not None else (None, None)
        if t0 is not None and t1 is not None and (b1 < t0 or b0 > t1):
            continue
        key = (int(block_id), b0, b1, n_values, t0, t1, names)
        if key not in _MAX_CACHE:
            data = session.execute(select(SampleBlock.data).where(SampleBlock.id == block_id)).scalar_one()
            t_mono, _tw, cols = decode_block(data)
            top: float | None = None
            for name, idx, vals, nulls in cols:
                if name not in names:
                    continue
                keep = ~nulls & np.isfinite(vals)
                if t0 is not None and t1 is not None:
                    tt = t_mono[idx]
                    keep &= (tt >= t0) & (tt <= t1)
                if keep.any():
                    m = float(vals[keep].max())
                    top = m if top is None else max(top, m)
            _MAX_CACHE[key] = top
        top = _MAX_CACHE[key]
        if top is not None:
            best = top if best is None else max(best, top)
    # legacy rows (older DBs before migration are converted; test fixtures may still write them)
    q2 = select(func.max(Sample.value)).where(Sample.run_id.in_(list(run_ids)), Sample.metric.in_(names))
    for run_id in [None] if spans is None else list(run_ids):
        qq = q2
        if run_id is not None and spans is not None:
            t0, t1 = spans[run_id]
            qq = select(func.max(Sample.value)).where(
                Sample.run_id == run_id, Sample.metric.in_(names), Sample.t_mono >= t0, Sample.t_mono <= t1
            )
        legacy = session.execute(qq).scalar()
        if legacy is not None and np.isfinite(legacy):
            best = float(legacy) if best is None else max(best, float(legacy))
    return best


# ---------------------------------------------------------------------------------------------- sealing


def seal_run(session: Session | Connection, run_id: int, max_ticks: int = MAX_TICKS_PER_BLOCK) -> int:
    """Merge a finished run's small raw blocks (the sampler's ~2-s flushes) into blocks of up to
    ``max_ticks`` ticks per source: 3-5x smaller on disk and one zlib call instead of hundreds per read.
    Lossless (same readings, same values). The caller commits; returns the number of blocks removed."""
    rows = session.execute(
        select(
            SampleBlock.id, SampleBlock.sweep_id, SampleBlock.source, SampleBlock.n_ticks, SampleBlock.data
        )
        .where(SampleBlock.run_id == run_id, SampleBlock.resolution_ms.is_(None))
        .order_by(SampleBlock.source, SampleBlock.t_start_mono)
    ).all()
    by_source: dict[str, list[Any]] = {}
    for r in rows:
        by_source.setdefault(r.source, []).append(r)
    removed = 0
    for source, blocks in by_source.items():
        if len(blocks) < 2:
            continue
        groups: list[list[Any]] = [[]]
        ticks = 0
        for b in blocks:
            if groups[-1] and ticks + b.n_ticks > max_ticks:
                groups.append([])
                ticks = 0
            groups[-1].append(b)
            ticks += b.n_ticks
        for group in groups:
            if len(group) < 2:
                continue
            payload, n_values, t0, t1, n = merge_payloads([b.data for b in group])
            session.execute(
                insert(SampleBlock),
                [
                    {
                        "sweep_id": group[0].sweep_id,
                        "run_id": run_id,
                        "source": source,
                        "t_start_mono": t0,
                        "t_end_mono": t1,
                        "n_ticks": n,
                        "n_values": n_values,
                        "resolution_ms": None,
                        "codec": CODEC,
                        "data": payload,
                    }
                ],
            )
            session.execute(delete(SampleBlock).where(SampleBlock.id.in_([b.id for b in group])))
            removed += len(group) - 1
    return removed


# --------------------------------------------------------------------------------------------- columnar


def read_series(
    session: Session | Connection,
    sweep_id: int | None = None,
    metrics: MetricFilter = None,
    *,
    run_ids: Collection[int] | None = None,
    t0: float | None = None,
    t1: float | None = None,
) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
    """(source, metric) -> (t_mono, value) arrays in time order, NULL and non-finite readings left out.

    The columnar twin of :func:`read_samples` for readers of whole nights (plots): numpy only, no row
    objects, so 10 M readings cost seconds, not minutes. Legacy rows are included too.
    """
    wanted = _wanted(metrics)
    parts: dict[tuple[str, str], list[tuple[np.ndarray, np.ndarray]]] = {}
    q = select(SampleBlock.source, SampleBlock.data)
    if sweep_id is not None:
        q = q.where(SampleBlock.sweep_id == sweep_id)
    if run_ids is not None:
        q = q.where(SampleBlock.run_id.in_(list(run_ids)))
    if t0 is not None:
        q = q.where(SampleBlock.t_end_mono >= t0)
    if t1 is not None:
        q = q.where(SampleBlock.t_start_mono <= t1)
    for source, data in session.execute(q):
        t_mono, _tw, cols = decode_block(data)
        for name, idx, vals, nulls in cols:
            if not wanted(name):
                continue
            t = t_mono[idx]
            keep = ~nulls & np.isfinite(vals)
            if t0 is not None:
                keep &= t >= t0
            if t1 is not None:
                keep &= t <= t1
            parts.setdefault((source, name), []).append((t[keep], vals[keep]))
    for r in _read_legacy(session, sweep_id, t0, t1, wanted, run_ids, None, False):
        if r.value is not None and np.isfinite(r.value):
            parts.setdefault((r.source, r.metric), []).append((np.array([r.t_mono]), np.array([r.value])))
    out: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    for key, chunks in parts.items():
        t = np.concatenate([c[0] for c in chunks])
        v = np.concatenate([c[1] for c in chunks])
        order = np.argsort(t, kind="stable")
        out[key] = (t[order], v[order])
    return out


def envelope(t: np.ndarray, v: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ~``max_points`` points that keep every bucket's minimum and maximum (for drawing a long
    series: a throttling dip or a temperature peak stays visible; the stored readings are untouched)."""
    n = len(t)
    if n <= max_points:
        return t, v
    n_buckets = max(1, max_points // 2)
    edges = np.linspace(0, n, n_buckets + 1).astype(np.int64)
    keep: list[np.ndarray] = []
    for a, b in itertools.pairwise(edges.tolist()):
        if b <= a:
            continue
        seg = v[a:b]
        i, j = a + int(np.argmin(seg)), a + int(np.argmax(seg))
        keep.append(np.array(sorted({i, j})))
    idx = np.concatenate(keep)
    return t[idx], v[idx]


class ThinnedSeries(NamedTuple):
    """A sweep's readings as one series per metric, bounded (``read_thinned``)."""

    series: dict[str, list[tuple[float, float | None]]]
    sources: dict[str, str]
    wall_at_zero: float | None  # t_wall of the line at t_mono 0 (an imported log's first line)
    step: int  # 1: every line; n: 1 line in n
    lines: int  # the lines the sweep holds


def read_thinned(session: Session | Connection, sweep_id: int, max_readings: int) -> ThinnedSeries:
    """The readings of a sweep's sample blocks as series, in bounded memory: where they number more than
    ``max_readings``, 1 line in 2, 4, 8 ... evenly through them (as a long log's verdict reads a file). Two
    passes, one block decoded at a time: the first counts, the second keeps."""
    q = select(SampleBlock.source, SampleBlock.data).where(SampleBlock.sweep_id == sweep_id)
    readings = lines = 0
    for _source, data in session.execute(q):
        t_mono, _t_wall, cols = decode_block(data)
        lines += len(t_mono)
        readings += sum(len(idx) for _name, idx, _vals, _null in cols)
    step = 1
    while readings > step * max_readings:
        step *= 2
    out = ThinnedSeries({}, {}, None, step, lines)
    first = 0  # the sweep-wide index of a block's first line
    for source, data in session.execute(q.order_by(SampleBlock.t_start_mono)):
        t_mono, t_wall, cols = decode_block(data)
        tm, tw = t_mono.tolist(), t_wall.tolist()
        if out.wall_at_zero is None and tm and tm[0] == 0.0:
            out = out._replace(wall_at_zero=tw[0])
        for name, idx, vals, is_null in cols:
            kept = out.series.setdefault(name, [])
            out.sources.setdefault(name, source)
            for i, v, null in zip(idx.tolist(), vals.tolist(), is_null.tolist(), strict=True):
                if (first + i) % step == 0:
                    kept.append((tm[i], None if null else v))
        first += len(tm)
    for kept in out.series.values():
        kept.sort(key=lambda p: p[0])
    return out
