"""Global identity of rows: what lets rows from many devices merge into one central database.

Every table whose rows leave the device has a ``uid`` column (unique, VARCHAR(36)). Rows with a natural
content identity (a device, a build, a model file) get a name-based UUID of that content, so the same device
pushing from two local DBs, or two devices sharing a build, meet in one central row; every other row (a
sweep, a run, a measurement...) gets a random UUID when it is created.

``insert_ignore`` + ``find_or_create`` are the concurrency-safe find-or-create: ``INSERT ... ON CONFLICT DO
NOTHING`` then ``SELECT``, on SQLite and PostgreSQL alike, so N writers creating the same device or build at
once give one row and no error.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Table, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

# Fixed namespace of edgeprof's name-based UUIDs (never change it: central rows are keyed by it).
EDGEPROF_NAMESPACE = uuid.UUID("6f1c2a52-5d0e-4f3e-9a51-0d9e2c1b7e13")

# Tables that stay on the device: they describe this machine's agent and its write leases, not results.
LOCAL_ONLY_TABLES = frozenset({"agent_state", "sweep_lease"})
# Tables derived from other tables of a sweep (the per-second series from the sample blocks): never copied,
# rebuilt in the target from what was copied, so the two can never disagree.
# An imported log's stored verdict is derived too: judged again in the target on its first read.
DERIVED_TABLES = frozenset({"run_series", "series_metric", "log_verdict"})


def random_uid() -> str:
    return str(uuid.uuid4())


def content_uid(kind: str, *parts: object) -> str:
    """The name-based (v5) UUID of ``kind`` + ``parts``: equal content, equal uid, on every device."""
    return str(uuid.uuid5(EDGEPROF_NAMESPACE, "\x1f".join([kind, *(str(p) for p in parts)])))


def content_default(kind: str, *columns: str) -> Callable[[Any], str]:
    """A column default computing ``content_uid`` from the row's own ``columns`` (Core and ORM inserts)."""

    def default(context: Any) -> str:
        params = context.get_current_parameters()
        return content_uid(kind, *(params[c] for c in columns))

    return default


def insert_ignore(conn: Connection | Session, table: Table, rows: Sequence[Mapping[str, Any]]) -> int:
    """INSERT the rows, skipping any that conflict with a row (any unique key); returns rows added.

    Counted from ``RETURNING`` (one row back per row inserted, none for a skipped one), not from the
    cursor's ``rowcount``: the PostgreSQL driver reports -1 for a multi-row insert, so a push printed
    "-1 build" while the rows arrived. SQLite has RETURNING since 3.35.
    """
    if not rows:
        return 0
    name = conn.bind.dialect.name if isinstance(conn, Session) else conn.dialect.name  # type: ignore[union-attr]
    if name == "postgresql":
        stmt: Any = postgresql.insert(table).on_conflict_do_nothing()
    elif name == "sqlite":
        stmt = sqlite.insert(table).on_conflict_do_nothing()
    else:  # pragma: no cover - only SQLite and PostgreSQL are supported backends
        raise RuntimeError(f"no INSERT ... ON CONFLICT for {name}")
    key = next(iter(table.primary_key.columns))
    result: Any = conn.execute(stmt.returning(key), [dict(r) for r in rows])
    return len(result.all())


def find_or_create(
    session: Session, model: type[Any], key: Mapping[str, Any], values: Mapping[str, Any]
) -> Any:
    """The ``model`` row matching ``key``, inserted from ``key`` + ``values`` first if absent (race-safe)."""
    where = [getattr(model, k) == v for k, v in key.items()]
    found = session.scalar(select(model).where(*where))
    if found is not None:
        return found
    insert_ignore(session, model.__table__, [{**values, **key}])
    found = session.scalar(select(model).where(*where).execution_options(populate_existing=True))
    if found is None:  # pragma: no cover - the row exists: either we or a concurrent writer inserted it
        raise RuntimeError(f"{model.__tablename__}: row vanished after insert")
    return found


def add_unique(session: Session, obj: Any, **key: Any) -> Any:
    """Store the new ORM object ``obj`` unless a row with ``key`` exists (race-safe); returns the stored row.

    Instead of ``session.add(obj); session.flush()``, which fails with a duplicate key when another writer
    (a second device or agent on the same central DB) created the same device/build/model file meanwhile.
    """
    from sqlalchemy import inspect as sa_inspect

    values = {
        attr.key: getattr(obj, attr.key)
        for attr in sa_inspect(type(obj)).column_attrs
        if getattr(obj, attr.key) is not None
    }
    return find_or_create(session, type(obj), key, values)
