"""A run's telemetry as plain rows (``run_series``): what SQL and Grafana can chart.

The sample blocks (``storage.samples``) are compact but opaque to SQL: zlib payloads on the monotonic clock.
``run_series`` holds, per (run, metric, UTC second), the mean of that second's readings (NULL and
non-finite readings left out) and how many there were; ``series_metric`` names each metric once (source,
name, role and unit), and the ``series`` view joins the two with the run's uid for a dashboard.

Which second: the monotonic clock becomes UTC through the run's anchor, ``ended_at`` and ``t_end_mono``,
which the executor takes at the same instant (``executors.base.end_run``): UTC = ended_at + (t - t_end_mono).
One offset per run keeps the series on the same clock as the run's phases and measurements, even where
the wall clock stepped during the run (a Jetson without an RTC battery setting its clock by NTP mid-night).
A run without an anchor (stopped before it ended) uses the median of its ticks' own ``t_wall - t_mono``.

The rows are derived, never copied: the central database builds them from the blocks a push or an import
brought (``edgeprof.fleet``), so a device's own DB keeps its storage budget (about 1 byte per reading,
where a row here costs ~60 bytes on SQLite, ~105 on PostgreSQL: 12-21 bytes per reading at 5 Hz).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np
from sqlalchemy import Connection, delete, insert, select, tuple_

from edgeprof.storage.identity import insert_ignore
from edgeprof.storage.models import Base, Run, RunSeries, SampleBlock, SeriesMetric
from edgeprof.storage.sample_codec import block_metrics, decode_block

__all__ = [
    "Classifier",
    "MetricKey",
    "build_series",
    "fill_series",
    "metric_ids",
    "runs_without_series",
    "utc_offset",
]

# (source, metric) -> (role, unit); (None, None) for a metric nobody classified
Classifier = Callable[[str, str], tuple[str | None, str | None]]
_INSERT_ROWS = 1000
_EPOCH = datetime(1970, 1, 1)


def utc_offset(ended_at: datetime | None, t_end_mono: float | None) -> float | None:
    """Seconds to add to the run's monotonic clock to get Unix time (UTC), or None without an anchor."""
    if ended_at is None or t_end_mono is None:
        return None
    naive = ended_at.astimezone(timezone.utc).replace(tzinfo=None) if ended_at.tzinfo else ended_at
    return (naive - _EPOCH).total_seconds() - t_end_mono


def _readings(
    conn: Connection, run_id: int
) -> tuple[dict[tuple[str, str], list[tuple[np.ndarray, np.ndarray]]], list[np.ndarray]]:
    """(source, metric) -> [(t_mono, values)] of the run's readings, and the blocks' t_wall - t_mono."""
    parts: dict[tuple[str, str], list[tuple[np.ndarray, np.ndarray]]] = {}
    skews: list[np.ndarray] = []
    blocks = select(SampleBlock.source, SampleBlock.data).where(SampleBlock.run_id == run_id)
    for source, data in conn.execute(blocks):
        t_mono, t_wall, cols = decode_block(data)
        skews.append(t_wall - t_mono)
        for name, idx, vals, nulls in cols:
            keep = ~nulls & np.isfinite(vals)
            if keep.any():
                parts.setdefault((source, name), []).append((t_mono[idx][keep], vals[keep]))
    return parts, skews


MetricKey = tuple[str, str, str, str]  # source, metric, role, unit ('' where unknown)


def build_series(
    conn: Connection, run_id: int, offset: float | None, classify: Classifier
) -> dict[MetricKey, list[tuple[datetime, float, int]]]:
    """One run's series (not stored): metric -> [(UTC second, mean, readings)] in time order."""
    parts, skews = _readings(conn, run_id)
    if not parts:
        return {}
    if offset is None:
        offset = float(np.median(np.concatenate(skews)))
    out: dict[MetricKey, list[tuple[datetime, float, int]]] = {}
    for (source, metric), chunks in sorted(parts.items()):
        t = np.concatenate([c[0] for c in chunks]) + offset
        v = np.concatenate([c[1] for c in chunks])
        seconds, inverse = np.unique(np.floor(t).astype(np.int64), return_inverse=True)
        sums = np.bincount(inverse, weights=v)
        counts = np.bincount(inverse)
        role, unit = classify(source, metric)
        out[(source, metric, role or "", unit or "")] = [
            (datetime.fromtimestamp(sec, timezone.utc).replace(tzinfo=None), total / n, n)
            for sec, total, n in zip(seconds.tolist(), sums.tolist(), counts.tolist(), strict=True)
        ]
    return out


def _metric_keys(conn: Connection, run_ids: Sequence[int], classify: Classifier) -> set[MetricKey]:
    """The metrics the runs' blocks hold (read from the block headers: nothing is decoded)."""
    keys: set[MetricKey] = set()
    blocks = select(SampleBlock.source, SampleBlock.data).where(SampleBlock.run_id.in_(list(run_ids)))
    for source, data in conn.execute(blocks):
        for metric in block_metrics(data):
            role, unit = classify(source, metric)
            keys.add((source, metric, role or "", unit or ""))
    return keys


def metric_ids(conn: Connection, keys: Collection[MetricKey]) -> dict[MetricKey, int]:
    """The ``series_metric`` id of each key, created if new (race-safe: two pushes at once get one row)."""
    cols = ("source", "metric", "role", "unit")
    wanted = sorted(set(keys))  # one order for every writer: two pushes creating the same rows never deadlock
    insert_ignore(
        conn, Base.metadata.tables["series_metric"], [dict(zip(cols, k, strict=True)) for k in wanted]
    )
    m = SeriesMetric
    out: dict[MetricKey, int] = {}
    for i in range(0, len(wanted), _INSERT_ROWS):
        where = tuple_(m.source, m.metric, m.role, m.unit).in_(wanted[i : i + _INSERT_ROWS])
        for source, metric, role, unit, id_ in conn.execute(
            select(m.source, m.metric, m.role, m.unit, m.id).where(where)
        ):
            out[(source, metric, role, unit)] = int(id_)
    return out


def _chunks(rows: Sequence[dict[str, Any]]) -> Iterator[Sequence[dict[str, Any]]]:
    for i in range(0, len(rows), _INSERT_ROWS):
        yield rows[i : i + _INSERT_ROWS]


def fill_series(conn: Connection, run_ids: Collection[int], classify: Classifier) -> int:
    """(Re)build the runs' ``run_series`` rows from their blocks, in the caller's transaction; returns
    the rows written. Idempotent: a run's old rows are replaced, never added to."""
    written = 0
    anchors = conn.execute(
        select(Run.id, Run.ended_at, Run.t_end_mono).where(Run.id.in_(sorted(run_ids)))
    ).all()
    # Every metric of these runs named first, in one sorted insert: rows of series_metric created run by run
    # would be locked in a different order by two pushes at once on PostgreSQL (a deadlock).
    ids = metric_ids(conn, _metric_keys(conn, [a[0] for a in anchors], classify))
    for run_id, ended_at, t_end_mono in anchors:
        conn.execute(delete(RunSeries).where(RunSeries.run_id == run_id))
        series = build_series(conn, run_id, utc_offset(ended_at, t_end_mono), classify)
        rows = [
            {"run_id": run_id, "metric_id": ids[key], "t": t, "value": value, "n": n}
            for key, points in series.items()
            for t, value, n in points
        ]
        for chunk in _chunks(rows):
            conn.execute(insert(RunSeries), list(chunk))
        written += len(rows)
    return written


def runs_without_series(conn: Connection, sweep_id: int) -> set[int]:
    """Runs of the sweep that have sample blocks but no series rows (pushed before the series existed)."""
    blocks = select(SampleBlock.run_id).join(Run, Run.id == SampleBlock.run_id)
    series = select(RunSeries.run_id).join(Run, Run.id == RunSeries.run_id)
    with_blocks = set(conn.execute(blocks.where(Run.sweep_id == sweep_id).distinct()).scalars())
    with_series = set(conn.execute(series.where(Run.sweep_id == sweep_id).distinct()).scalars())
    return {int(r) for r in with_blocks - with_series if r is not None}
