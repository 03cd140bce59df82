"""Compact telemetry storage: one row per block of collector ticks, values encoded column by column.

Why blocks: a row per reading costs ~100 bytes in SQLite (row header, rowid, two REAL timestamps, source and
metric text, a REAL value, two index entries), so a 10-hour night at 5 Hz x 60 metrics (~10 M readings) was
~1 GB. Telemetry is read by run, by phase interval and by metric, never one reading at a time, so a block of
consecutive ticks of ONE source and ONE run (what the sampler flushes every ~2 s, or what an import or a
compaction writes in bigger pieces) is the unit of storage: ``sample_block`` holds its time span (indexed, so
a phase or a run is found without reading the night) and a compressed payload.

The payload (``CODEC = 1``) is lossless:

* a tick grid: ``t_mono`` and ``t_wall`` of every tick (float64, XOR with the previous value, byte-shuffled);
* per metric, a state byte per tick (0 value, 1 NULL = source could not be read, 2 metric absent from that
  tick) stored only when not all 0, so NULL stays NULL and "not sampled" stays distinct from it;
* per metric, the values: when every value is an exact decimal with <= 6 digits after the point (what sysfs,
  tegrastats, NVML give: integer mW/MHz/uJ, temperatures in 0.1 or 0.001 C) as zigzag int64 deltas of
  ``round(v * 10**k)``, checked to decode to the very same float; otherwise float64 XOR deltas. Counters
  (RAPL uJ, throttle counts) are integers and round-trip bit-exactly through a wrap: the delta is just a
  large negative number. NaN/inf fall back to float64 and are kept bit for bit.
* everything byte-shuffled (the high bytes of small deltas are zeros) and zlib-compressed.

One read API, :func:`read_samples`, serves every reader: it selects blocks by sweep/run/time span in SQL,
decodes only those, and also returns rows still in the legacy one-row-per-reading ``sample`` table (written
by an older edgeprof or a test fixture), so nothing stored is ever invisible.
"""

from __future__ import annotations

import itertools
import json
import struct
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy import Connection, and_, delete, func, insert, select, text
from sqlalchemy.orm import Session

from edgeprof.storage.models import Sample, SampleBlock

CODEC = 1
# A block is closed at this many ticks; the sampler's flushes are far smaller, imports and compaction use it.
MAX_TICKS_PER_BLOCK = 3000
_ST_VALUE, _ST_NULL, _ST_ABSENT = 0, 1, 2
_MAX_DECIMALS = 6
_EXACT_INT = float(2**53)


class SampleRead(NamedTuple):
    t_mono: float
    t_wall: float
    run_id: int | None
    source: str
    metric: str
    value: float | None


@dataclass(frozen=True)
class Tick:
    """One collector tick: the time it was taken and the readings it gave (None = unreadable)."""

    t_mono: float
    t_wall: float
    values: dict[str, float | None]


# ----------------------------------------------------------------------------------------------- codec


def _shuffle(a: np.ndarray) -> bytes:
    """Byte-transpose 8-byte words: the i-th bytes of every word become contiguous (zeros compress)."""
    return np.ascontiguousarray(a.view(np.uint8).reshape(-1, 8).T).tobytes()


def _unshuffle(buf: bytes, n: int) -> np.ndarray:
    return np.ascontiguousarray(np.frombuffer(buf, dtype=np.uint8).reshape(8, n).T).view(np.uint64).ravel()


def _xor_f64(v: np.ndarray) -> bytes:
    u = np.ascontiguousarray(v, dtype=np.float64).view(np.uint64)
    d = u.copy()
    d[1:] ^= u[:-1]
    return _shuffle(d)


def _unxor_f64(buf: bytes, n: int) -> np.ndarray:
    d = _unshuffle(buf, n)
    return np.bitwise_xor.accumulate(d).view(np.float64)


def _decimal_scale(v: np.ndarray) -> int | None:
    """The smallest k with v == round(v * 10**k) / 10**k exactly, or None (then float64 XOR is used)."""
    if not np.all(np.isfinite(v)):
        return None
    for k in range(_MAX_DECIMALS + 1):
        scale = 10.0**k
        ints = np.rint(v * scale)
        if np.any(np.abs(ints) >= _EXACT_INT):
            return None
        if np.array_equal(ints / scale, v) and not np.any(np.signbit(v) & (v == 0)):
            return k
    return None


def _zigzag(d: np.ndarray) -> np.ndarray:
    return ((d << 1) ^ (d >> 63)).view(np.uint64)


def _unzigzag(z: np.ndarray) -> np.ndarray:
    return ((z >> np.uint64(1)).view(np.int64)) ^ -((z & np.uint64(1)).view(np.int64))


def encode_block(ticks: Sequence[Tick]) -> tuple[bytes, int]:
    """Encode ticks (in time order) into a payload; returns (payload, number of readings stored)."""
    n = len(ticks)
    names: list[str] = []
    seen: set[str] = set()
    for tk in ticks:
        for name in tk.values:
            if name not in seen:
                seen.add(name)
                names.append(name)
    cols: list[tuple[str, np.ndarray, np.ndarray]] = []
    for name in names:
        states = np.zeros(n, dtype=np.uint8)
        vals: list[float] = []
        for i, tk in enumerate(ticks):
            v = tk.values.get(name, _ABSENT)
            if v is None:
                states[i] = _ST_NULL
            elif v is _ABSENT:
                states[i] = _ST_ABSENT
            else:
                vals.append(float(v))  # type: ignore[arg-type]
        cols.append((name, states, np.asarray(vals, dtype=np.float64)))
    t_mono = np.fromiter((tk.t_mono for tk in ticks), np.float64, n)
    t_wall = np.fromiter((tk.t_wall for tk in ticks), np.float64, n)
    return encode_arrays(t_mono, t_wall, cols)


_ABSENT = object()


def encode_arrays(
    t_mono: np.ndarray, t_wall: np.ndarray, cols: Sequence[tuple[str, np.ndarray, np.ndarray]]
) -> tuple[bytes, int]:
    """The columnar encoder: per metric (name, state per tick [0 value, 1 NULL, 2 absent], the values of
    the state-0 ticks in order). Returns (payload, number of readings = ticks not absent)."""
    n = len(t_mono)
    parts: list[bytes] = [_xor_f64(t_mono), _xor_f64(t_wall)]
    header_cols: list[list[Any]] = []
    n_values = 0
    for name, states, arr in cols:
        n_values += int(np.count_nonzero(states != _ST_ABSENT))
        has_states = bool(states.any())
        if has_states:
            parts.append(np.ascontiguousarray(states, dtype=np.uint8).tobytes())
        k = _decimal_scale(arr) if len(arr) else 0
        if k is None:
            parts.append(_xor_f64(arr))
            header_cols.append([name, int(has_states), len(arr), -1])
        else:
            ints = np.rint(arr * 10.0**k).astype(np.int64)
            d = ints.copy()
            d[1:] -= ints[:-1]
            parts.append(_shuffle(_zigzag(d)))
            header_cols.append([name, int(has_states), len(arr), k])
    header = json.dumps({"n": n, "cols": header_cols}, separators=(",", ":")).encode()
    raw = struct.pack("<I", len(header)) + header + b"".join(parts)
    return zlib.compress(raw, 6), n_values


Column = tuple[str, np.ndarray, np.ndarray, np.ndarray]


def decode_block(payload: bytes) -> tuple[np.ndarray, np.ndarray, list[Column]]:
    """Payload -> (t_mono[n], t_wall[n], [(metric, tick indices, values, is_null)]).

    NULL entries hold NaN in ``values`` and True in ``is_null``; a stored NaN (float64 path) is told apart by
    ``is_null``, so it is returned as NaN, not as NULL.
    """
    raw = zlib.decompress(payload)
    (hlen,) = struct.unpack_from("<I", raw, 0)
    header = json.loads(raw[4 : 4 + hlen])
    n = int(header["n"])
    pos = 4 + hlen

    def take(nbytes: int) -> bytes:
        nonlocal pos
        out = raw[pos : pos + nbytes]
        pos += nbytes
        return out

    t_mono = _unxor_f64(take(8 * n), n)
    t_wall = _unxor_f64(take(8 * n), n)
    out: list[Column] = []
    for name, has_states, n_vals, k in header["cols"]:
        states = np.frombuffer(take(n), dtype=np.uint8) if has_states else np.zeros(n, dtype=np.uint8)
        if k < 0:
            vals = _unxor_f64(take(8 * n_vals), n_vals)
        else:
            ints = np.cumsum(_unzigzag(_unshuffle(take(8 * n_vals), n_vals)))
            vals = ints.astype(np.float64) / 10.0**k
        present = np.nonzero(states != _ST_ABSENT)[0]
        full = np.full(len(present), np.nan)
        is_value = states[present] == _ST_VALUE
        full[is_value] = vals
        out.append((name, present, full, ~is_value))
    return t_mono, t_wall, out


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
        raw = zlib.decompress(data)
        (hlen,) = struct.unpack_from("<I", raw, 0)
        names.update(c[0] for c in json.loads(raw[4 : 4 + hlen])["cols"])
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


def merge_payloads(payloads: Sequence[bytes]) -> tuple[bytes, int, float, float, int]:
    """Decode blocks of one source (in time order) and re-encode them as one, columnwise with numpy.

    Returns (payload, n_values, t_start, t_end, n_ticks).
    """
    decoded = [decode_block(p) for p in payloads]
    t_mono = np.concatenate([d[0] for d in decoded])
    t_wall = np.concatenate([d[1] for d in decoded])
    order = np.argsort(t_mono, kind="stable")
    names: list[str] = []
    seen: set[str] = set()
    for _tm, _tw, cols in decoded:
        for c in cols:
            if c[0] not in seen:
                seen.add(c[0])
                names.append(c[0])
    n = len(t_mono)
    out_cols: list[tuple[str, np.ndarray, np.ndarray]] = []
    for name in names:
        states = np.full(n, _ST_ABSENT, dtype=np.uint8)
        values = np.full(n, np.nan)
        offset = 0
        for tm, _tw, cols in decoded:
            for cname, idx, vals, nulls in cols:
                if cname == name:
                    states[offset + idx] = np.where(nulls, _ST_NULL, _ST_VALUE)
                    values[offset + idx] = vals
                    break
            offset += len(tm)
        states, values = states[order], values[order]
        out_cols.append((name, states, values[states == _ST_VALUE]))
    tm_sorted, tw_sorted = t_mono[order], t_wall[order]
    payload, n_values = encode_arrays(tm_sorted, tw_sorted, out_cols)
    return payload, n_values, float(tm_sorted[0]), float(tm_sorted[-1]), n


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
