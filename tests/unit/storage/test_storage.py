"""Storage: migrations upgrade an older DB in place (from a frozen copy of every shipped SQLite schema), each
step is one transaction, the migrated schema equals the ORM models on SQLite and PostgreSQL, readers never
migrate or write, WAL is on."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import BigInteger, create_engine, inspect, text
from sqlalchemy.exc import SQLAlchemyError
from support.paths import FIXTURES, REPO_ROOT

from edgeprof.storage import migrations
from edgeprof.storage.db import DatabaseError, db_url, mask_url, open_engine
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
    render,
    upgrade,
)
from edgeprof.storage.models import Base

pytestmark = pytest.mark.timeout(300)

FROZEN = FIXTURES / "schemas"
# Versions shipped before PostgreSQL support: their SQLite schema is frozen in tests/fixtures/schemas.
FROZEN_VERSIONS = sorted(int(p.stem[1:]) for p in FROZEN.glob("v*.sql"))


def assert_schema_matches_models(engine: object) -> None:
    insp = inspect(engine)  # type: ignore[call-overload]
    for table in Base.metadata.sorted_tables:
        db_cols = {c["name"]: c for c in insp.get_columns(table.name)}
        assert set(db_cols) == {c.name for c in table.columns}, table.name
        for col in table.columns:
            where = f"{table.name}.{col.name}"
            assert bool(db_cols[col.name]["nullable"]) == bool(col.nullable), where
            # Same kind of value on both sides (an int column is an int column, on every backend).
            assert db_cols[col.name]["type"].python_type is col.type.python_type, where
            if isinstance(col.type, BigInteger) and engine.dialect.name == "postgresql":  # type: ignore[attr-defined]
                assert "BIGINT" in str(db_cols[col.name]["type"]).upper(), f"{where} must be 64-bit"
        db_indexes = {ix["name"]: ix for ix in insp.get_indexes(table.name)}
        for ix in table.indexes:
            assert ix.name in db_indexes, f"{table.name}: index {ix.name} missing"
            assert bool(db_indexes[ix.name]["unique"]) == bool(ix.unique), f"{table.name}: {ix.name} unique"


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


def _load_frozen(path: Path, version: int) -> None:
    con = sqlite3.connect(path)
    con.executescript((FROZEN / f"v{version}.sql").read_text())
    # A little data, so the upgrade must keep rows (and give them identities).
    con.execute(
        "INSERT INTO device (id, fingerprint, hostname, arch, facts_json, first_seen) "
        "VALUES (1, 'fp-old', 'jetson', 'aarch64', '{}', '2026-01-01 00:00:00')"
    )
    con.execute(
        "INSERT INTO sweep (id, name, plan_text, plan_hash, device_id, edgeprof_version, started_at,"
        " status, n_specs) VALUES (1, 'old', 'x', 'h', 1, '0.0.1', '2026-01-01 00:00:00', 'completed', 1)"
    )
    con.execute(
        "INSERT INTO sweep (id, name, plan_text, plan_hash, device_id, edgeprof_version, started_at,"
        " status, n_specs) VALUES (2, 'older', 'x', 'h', 1, '0.0.1', '2026-01-01 00:00:00', 'completed', 1)"
    )
    con.commit()
    con.close()


@pytest.mark.parametrize("version", FROZEN_VERSIONS)
def test_frozen_sqlite_schema_of_each_older_version_upgrades_in_place(tmp_path: Path, version: int) -> None:
    path = tmp_path / f"v{version}.db"
    _load_frozen(path, version)
    engine = open_engine(path)  # what every writing edgeprof command does on start
    with engine.connect() as conn:
        assert current_version(conn) == HEAD_VERSION
        assert conn.execute(text("SELECT name FROM sweep WHERE id = 1")).scalar() == "old"
        uids = [u for (u,) in conn.execute(text("SELECT uid FROM sweep ORDER BY id"))]
        assert len(set(uids)) == 2 and all(len(u) == 36 for u in uids)
        # The device's identity is its content: the same on every DB that ever saw this device.
        assert conn.execute(text("SELECT uid FROM device")).scalar() == content_uid("device", "fp-old")
    assert_schema_matches_models(engine)
    assert upgrade(engine) == []  # again: nothing to do
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


def test_render_keeps_sqlite_ddl_and_ports_it_to_postgresql() -> None:
    ddl = MIGRATIONS[0].statements[0]
    assert render(ddl, "sqlite") == ddl  # an existing SQLite DB looks exactly as before
    pg = render(ddl, "postgresql")
    assert "DATETIME" not in pg and "GENERATED BY DEFAULT AS IDENTITY" in pg
    portable = "CREATE TABLE t (\n id BIGINT NOT NULL,\n ok BOOLEAN NOT NULL DEFAULT 0,\n PRIMARY KEY (id)\n)"
    assert " id INTEGER NOT NULL" in render(portable, "sqlite")  # a rowid alias numbers the rows
    assert "DEFAULT FALSE" in render(portable, "postgresql")


def test_passwords_are_masked() -> None:
    assert mask_url("postgresql+psycopg://u:s3cret@db.example/x") == "postgresql+psycopg://u:***@db.example/x"
    assert "s3cret" not in mask_url("postgresql://u:s3cret@host:5432/x")
    assert mask_url("/var/lib/edgeprof.db") == "/var/lib/edgeprof.db"


def _kill_bench() -> object:
    import importlib.util

    path = REPO_ROOT / "benchmarks" / "migration_kill.py"
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
