"""The central database's per-second series (``run_series``), built where a push or an import lands.

Built in the target, in the sweep's own transaction, for the runs the copy added or changed, and for runs
that have telemetry but no series yet (a sweep pushed by an edgeprof from before the series existed:
``push --recheck`` fills them in). Each metric is labelled with its role as the collector declared it when
the sweep ran (stored with the collector status), else as this installation's collectors classify the name,
so a dashboard selects "temperature" or "power" rather than sensor names that differ per board.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, select

from edgeprof.collectors import MetricRole
from edgeprof.storage.models import CollectorStatus
from edgeprof.storage.transfer import TransferCounts

# (source, metric) -> (role, unit), as ``edgeprof.storage.series`` takes it
Classifier = Callable[[str, str], tuple[str | None, str | None]]


def _stored_roles(conn: Connection, sweep_id: int) -> dict[str, MetricRole]:
    """metric -> role as stored with the sweep's collector status (entries without one are left out)."""
    out: dict[str, MetricRole] = {}
    query = select(CollectorStatus.metrics_json).where(CollectorStatus.sweep_id == sweep_id)
    for raw in conn.execute(query).scalars():
        try:
            entries: Any = json.loads(raw)
        except (TypeError, ValueError):
            continue
        for entry in entries if isinstance(entries, list) else []:
            role = entry.get("role") if isinstance(entry, dict) else None
            parsed = MetricRole.from_json(role) if isinstance(role, dict) else None
            if parsed is not None:
                out.setdefault(str(entry.get("name")), parsed)
    return out


def sweep_classifier(conn: Connection, sweep_id: int) -> Classifier:
    """(source, metric) -> (role, unit) for the sweep's metrics: stored roles first, then the registry."""
    declared = _stored_roles(conn, sweep_id)
    cache: dict[tuple[str, str], tuple[str | None, str | None]] = {}

    def classify(source: str, metric: str) -> tuple[str | None, str | None]:
        if (source, metric) not in cache:
            role = declared.get(metric)
            if role is None:
                from edgeprof.collectors import roles_for  # the registry loads every driver: only if needed

                role = roles_for([metric], {metric: source}).get(metric)
            cache[(source, metric)] = (role.role, role.unit or None) if role is not None else (None, None)
        return cache[(source, metric)]

    return classify


def fill_sweep_series(conn: Connection, counts: TransferCounts) -> int:
    """Build the series of the sweep just applied on ``conn`` (see the module docstring); returns rows."""
    # Imported here: the series need numpy, which `status` and the other readers of this package never load.
    from edgeprof.storage.series import fill_series, runs_without_series

    if counts.sweep_id is None:
        return 0
    runs = counts.changed_runs | runs_without_series(conn, counts.sweep_id)
    if not runs:
        return 0
    counts.series = fill_series(conn, runs, sweep_classifier(conn, counts.sweep_id))
    return counts.series
