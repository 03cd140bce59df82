"""Two upgraders of one database at once (storage/migrations.py ``upgrade``): both read the same list of
missing steps before either applies one, then race for each step; the step's re-check under the lock
(SQLite's write lock, PostgreSQL's advisory lock) makes the loser skip what the winner applied, so every
step is applied exactly once and neither upgrader fails. On SQLite and on PostgreSQL."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlalchemy import create_engine, event, text

import edgeprof.storage.migrations as migrations
from edgeprof.storage.db import db_url


def test_two_upgraders_at_once_apply_each_step_exactly_once(
    any_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    both_read_the_list = threading.Barrier(2, timeout=60)
    begins = threading.local()

    def before_begin(_conn: Any) -> None:
        # The second transaction of an upgrader is its first step: wait there until the other upgrader has
        # read the missing steps too (its first transaction committed), before either takes the lock.
        begins.n = getattr(begins, "n", 0) + 1
        if begins.n == 2:
            both_read_the_list.wait()

    real_sqlite_engine = migrations._sqlite_migration_engine

    class Gated:
        """SQLite's migration engine, waiting before a transaction begins: its BEGIN IMMEDIATE takes the
        write lock at once, so the wait must come before it."""

        def __init__(self, engine: Any) -> None:
            self.engine = real_sqlite_engine(engine)

        def begin(self) -> Any:
            before_begin(None)
            return self.engine.begin()

        def dispose(self) -> None:
            self.engine.dispose()

    def sqlite_engine(engine: Any) -> Any:
        return Gated(engine)

    monkeypatch.setattr(migrations, "_sqlite_migration_engine", sqlite_engine)
    applied: dict[str, list[int]] = {}
    errors: list[BaseException] = []

    def upgrader(name: str) -> None:
        engine = create_engine(db_url(any_db))
        if engine.dialect.name != "sqlite":  # the advisory lock is taken inside the transaction
            event.listen(engine, "begin", before_begin)
        try:
            applied[name] = migrations.upgrade(engine)
        except BaseException as exc:  # noqa: BLE001 - the test's answer
            errors.append(exc)
            both_read_the_list.abort()
        finally:
            engine.dispose()

    threads = [threading.Thread(target=upgrader, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == [], errors
    every = sorted(m.version for m in migrations.MIGRATIONS)
    assert sorted(applied["a"] + applied["b"]) == every  # each step by one upgrader, none by both
    engine = create_engine(db_url(any_db))
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT version, COUNT(*) FROM schema_version GROUP BY version")).all()
    engine.dispose()
    assert sorted(int(v) for v, _ in rows) == every and {int(n) for _, n in rows} == {1}
