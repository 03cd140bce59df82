"""Storage: migrations upgrade an older DB in place, the migrated schema equals the ORM models, WAL is on."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from edgeprof.storage.db import open_engine
from edgeprof.storage.migrations import HEAD_VERSION, MIGRATIONS, SchemaTooNewError, current_version, upgrade
from edgeprof.storage.models import Base


def test_fresh_db_is_at_head_and_in_wal_mode(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "a.db")
    with engine.connect() as conn:
        assert current_version(conn) == HEAD_VERSION
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1


def test_migrated_schema_matches_the_models(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "b.db")
    insp = inspect(engine)
    for table in Base.metadata.sorted_tables:
        db_cols = {c["name"]: c for c in insp.get_columns(table.name)}
        assert set(db_cols) == {c.name for c in table.columns}, table.name
        for col in table.columns:
            assert bool(db_cols[col.name]["nullable"]) == bool(col.nullable), f"{table.name}.{col.name}"
        db_indexes = {ix["name"] for ix in insp.get_indexes(table.name)}
        assert {ix.name for ix in table.indexes} <= db_indexes, table.name


def test_v1_database_is_upgraded_in_place_keeping_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = create_engine(f"sqlite:///{path}")
    assert upgrade(old, target=1) == [1]
    with old.begin() as conn:
        assert "sample" not in inspect(conn).get_table_names()
        conn.execute(
            text(
                "INSERT INTO device (id, fingerprint, hostname, arch, facts_json, first_seen) "
                "VALUES (1, 'fp', 'jetson', 'aarch64', '{}', '2026-01-01 00:00:00')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO sweep (id, name, plan_text, plan_hash, device_id, edgeprof_version, started_at,"
                " status, n_specs) "
                "VALUES (1, 'old', 'x', 'h', 1, '0.0.1', '2026-01-01 00:00:00', 'completed', 1)"
            )
        )
    old.dispose()

    engine = open_engine(path)  # what every edgeprof command does on start
    with engine.connect() as conn:
        assert current_version(conn) == HEAD_VERSION
        assert conn.execute(text("SELECT name FROM sweep WHERE id = 1")).scalar() == "old"
        assert "sample" in inspect(conn).get_table_names()
        versions = [r[0] for r in conn.execute(text("SELECT version FROM schema_version ORDER BY version"))]
    assert versions == [m.version for m in MIGRATIONS]
    # Upgrading again is a no-op.
    assert upgrade(engine) == []


def test_a_db_from_a_newer_edgeprof_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    engine = open_engine(path)
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO schema_version VALUES (:v, 'from the future', datetime('now'))"),
            {"v": HEAD_VERSION + 1},
        )
    engine.dispose()
    with pytest.raises(SchemaTooNewError, match="newer"):
        open_engine(path)
