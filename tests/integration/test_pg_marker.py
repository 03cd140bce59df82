"""On PostgreSQL, edgeprof's database is known by its ``edgeprof_meta`` row (written with the first schema
step, or on the upgrade of an edgeprof database from before it), never by a table named ``schema_version``:
another application's database is refused by readers and writers alike, and nothing in it changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text
from support.hostile_cases import case
from support.hostile_run import edgeprof_db
from typer.testing import CliRunner

from edgeprof.cli import app
from edgeprof.storage.db import db_url, open_engine
from edgeprof.storage.migrations import META_TABLE, SchemaOutdatedError

pytestmark = pytest.mark.timeout(120)


def _raw(url: str):
    return create_engine(db_url(url))


@pytest.mark.parametrize("hostile", [case("foreign-postgresql")], ids=lambda c: c.id)
@pytest.mark.parametrize("version", ["1", "'1.1'"], ids=["own-shape", "flyway"])
def test_a_foreign_postgresql_database_is_refused_and_unchanged(
    pg_db_url: str, version: str, hostile: object, tmp_path: Path
) -> None:
    edgeprof_db(tmp_path / "e.db")
    raw = _raw(pg_db_url)
    vtype = "INTEGER" if version == "1" else "VARCHAR(20)"
    with raw.begin() as conn:
        conn.execute(text("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)"))
        columns = f"version {vtype}, description TEXT, applied_at TEXT"
        conn.execute(text(f"CREATE TABLE schema_version ({columns})"))
        conn.execute(text(f"INSERT INTO schema_version VALUES ({version}, 'initial', '2024-01-01')"))
    with pytest.raises(SchemaOutdatedError, match="not an edgeprof one"):
        open_engine(pg_db_url)
    commands = (["sweeps"], ["db", "version"], ["db", "upgrade"], ["push", "--all", "--to", pg_db_url])
    for argv in commands:
        argv = [*argv, "--db", pg_db_url] if argv[0] != "push" else [*argv, "--db", str(tmp_path / "e.db")]
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 2 and "not an edgeprof one" in result.output, (argv, result.output)
        assert "Traceback" not in result.output
    with raw.connect() as conn:
        assert set(inspect(conn).get_table_names()) == {"users", "schema_version"}
        assert conn.execute(text("SELECT count(*) FROM schema_version")).scalar() == 1
    raw.dispose()


def test_a_new_postgresql_database_gets_the_meta_row(pg_db_url: str) -> None:
    open_engine(pg_db_url).dispose()
    raw = _raw(pg_db_url)
    with raw.connect() as conn:
        query = text(f"SELECT value FROM {META_TABLE} WHERE key = 'application'")
        assert conn.execute(query).scalar() == "edgeprof"
    raw.dispose()
    open_engine(pg_db_url, read_only=True).dispose()  # and it is known as edgeprof's from then on
