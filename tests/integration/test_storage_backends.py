"""Storage on every backend (SQLite and PostgreSQL): a fresh DB is at the head with WAL on, the migrated
schema equals the ORM models, 64-bit values fit, each step is one transaction (a failing one leaves the
previous version intact, gaps are filled), a DB from a newer edgeprof is refused, readers never migrate or
write, and a kill -9 during an upgrade leaves a DB that opens and upgrades. Real PostgreSQL, real processes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import SQLAlchemyError
from support.paths import REPO_ROOT
from support.schema_check import assert_schema_matches_models

from edgeprof.storage import migrations
from edgeprof.storage.db import DatabaseError, db_url, open_engine
from edgeprof.storage.identity import content_uid
from edgeprof.storage.migrations import (
    HEAD_VERSION,
    MIGRATIONS,
    Migration,
    SchemaOutdatedError,
    SchemaTooNewError,
    applied_versions,
    apply_migration,
    current_version,
    upgrade,
)

pytestmark = pytest.mark.timeout(300)


def test_fresh_db_is_at_head(any_db: str) -> None:
    engine = open_engine(any_db)
    with engine.connect() as conn:
        assert current_version(conn) == HEAD_VERSION
        assert applied_versions(conn) == {m.version for m in MIGRATIONS}
        if engine.dialect.name == "sqlite":
            assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
    engine.dispose()


def test_migrated_schema_matches_the_models(any_db: str) -> None:
    engine = open_engine(any_db)
    assert_schema_matches_models(engine)
    engine.dispose()


def test_64_bit_values_fit_on_every_backend(any_db: str) -> None:
    engine = open_engine(any_db)
    big = 1_764_547_200_123_456_789  # an mtime in ns: over 2^31 (PostgreSQL's INTEGER would refuse it)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO model_file (uid, path, sha256, size_bytes, mtime_ns) "
                "VALUES ('u1', '/m.gguf', 'abc', :s, :m)"
            ),
            {"s": 5 * 2**31, "m": big},
        )
        assert conn.execute(text("SELECT mtime_ns FROM model_file")).scalar() == big
    engine.dispose()


def test_each_older_version_upgrades_on_postgresql(pg_db_url: str) -> None:
    """PostgreSQL had no edgeprof schema before: every intermediate version must still upgrade to the head."""
    for start in (1, 3, 6):
        engine = create_engine(pg_db_url)
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
        assert upgrade(engine, target=start) == [m.version for m in MIGRATIONS if m.version <= start]
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO device (fingerprint, hostname, arch, facts_json, first_seen) "
                    "VALUES ('fp', 'orin', 'aarch64', '{}', '2026-01-01 00:00:00')"
                )
            )
        assert upgrade(engine) == [m.version for m in MIGRATIONS if m.version > start]
        with engine.connect() as conn:
            assert conn.execute(text("SELECT uid FROM device")).scalar() == content_uid("device", "fp")
        assert_schema_matches_models(engine)
        engine.dispose()


def test_missing_versions_are_applied_even_with_gaps(any_db: str) -> None:
    """Several people append versions at once: a DB may have 1-6 and 10 but not 7; upgrade fills the holes."""
    later = [m for m in MIGRATIONS if m.version > 7 and m.python is None]
    if not later:
        pytest.skip("no DDL-only version after 7 to leave a gap before")
    engine = create_engine(db_url(any_db))
    upgrade(engine, target=6)
    with engine.begin() as conn:
        apply_migration(conn, later[-1])
    applied = upgrade(engine)
    assert later[-1].version not in applied
    assert 7 in applied
    with engine.connect() as conn:
        assert applied_versions(conn) == {m.version for m in MIGRATIONS}
    engine.dispose()


def test_a_failing_step_leaves_the_previous_version_intact(
    any_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One transaction per step, on SQLite too (whose driver would otherwise commit each DDL on its own)."""
    engine = open_engine(any_db)
    bad = Migration(
        HEAD_VERSION + 1,
        "synthetic: two statements, the second fails",
        ("ALTER TABLE sweep ADD COLUMN half_done TEXT", "ALTER TABLE no_such_table ADD COLUMN x TEXT"),
    )
    monkeypatch.setitem(migrations._BY_VERSION, bad.version, bad)
    monkeypatch.setattr(migrations, "HEAD_VERSION", bad.version)
    with pytest.raises(SQLAlchemyError):
        upgrade(engine)
    engine.dispose()
    monkeypatch.undo()
    engine = open_engine(any_db)
    cols = {c["name"] for c in inspect(engine).get_columns("sweep")}
    assert "half_done" not in cols  # the first ALTER was rolled back with the failed step
    with engine.connect() as conn:
        assert current_version(conn) == HEAD_VERSION
    engine.dispose()


def test_a_db_from_a_newer_edgeprof_is_refused(any_db: str) -> None:
    engine = open_engine(any_db)
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO schema_version VALUES (:v, 'from the future', '2026-01-01 00:00:00')"),
            {"v": HEAD_VERSION + 1},
        )
    engine.dispose()
    with pytest.raises(SchemaTooNewError, match="newer"):
        open_engine(any_db)
    with pytest.raises(SchemaTooNewError, match="newer"):
        open_engine(any_db, read_only=True)


def test_readers_never_migrate_or_create(tmp_path: Path, any_db: str) -> None:
    missing = tmp_path / "nothing" / "here.db"
    with pytest.raises(DatabaseError, match="no edgeprof database"):
        open_engine(missing, read_only=True)
    assert not missing.parent.exists()  # not even the folder

    engine = create_engine(db_url(any_db))
    upgrade(engine, target=3)
    engine.dispose()
    with pytest.raises(SchemaOutdatedError, match="edgeprof db upgrade"):
        open_engine(any_db, read_only=True)
    engine = create_engine(db_url(any_db))
    with engine.connect() as conn:
        assert current_version(conn) == 3  # the reader changed nothing
    upgrade(engine)
    engine.dispose()
    reader = open_engine(any_db, read_only=True)
    with reader.connect() as conn, pytest.raises(SQLAlchemyError):
        conn.execute(text("DELETE FROM sweep"))  # a reader's connection cannot write
    reader.dispose()


def _kill_bench() -> object:
    import importlib.util

    path = REPO_ROOT / "benchmarks" / "self" / "migration_kill.py"
    spec = importlib.util.spec_from_file_location("migration_kill", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_kill_9_during_an_upgrade_leaves_a_db_that_opens_and_upgrades(any_db: str) -> None:
    """Bounded version of benchmarks/migration_kill.py (the >= 20-trial figures are in benchmarks/README)."""
    bench: Any = _kill_bench()
    url = db_url(any_db)
    expect = bench.seed(url, 3000)
    full_s, _ = bench.run_child(url, None)
    for i, share in enumerate((0.15, 0.5, 0.85)):  # early, middle and late in the upgrade
        if "://" in any_db:  # PostgreSQL: the same database, its schema dropped
            engine = create_engine(url)
            with engine.begin() as conn:
                conn.execute(text("DROP SCHEMA public CASCADE"))
                conn.execute(text("CREATE SCHEMA public"))
            engine.dispose()
            url_i = url
        else:  # SQLite: a fresh file per trial
            url_i = f"sqlite:///{Path(any_db).with_name(f'k{i}.db')}"
        expect = bench.seed(url_i, 3000)
        bench.run_child(url_i, full_s * share)
        outcome = bench.check(url_i, expect)
        assert outcome["ok"], outcome
