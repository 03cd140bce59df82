"""The newer surfaces given hostile or careless input (support.hostile_cases NEW_SURFACES): the metrics
textfile through the one output guard, edgeprof's database known by its mark (never by a table name),
secrets masked in URLs and libpq strings. Every foreign file and database is byte for byte as it was."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

import pytest
from support.hostile_cases import case
from support.hostile_run import TEGRASTATS_LOG, edgeprof_db, invoke, refused, sha
from typer.testing import CliRunner

from edgeprof.cli import app
from edgeprof.storage.db import DatabaseError, mask_url, open_engine, scrub
from edgeprof.storage.guard import APPLICATION_ID

# --- the metrics textfile ---------------------------------------------------------------------------


def test_a_textfile_named_as_the_database_is_refused_and_the_database_unchanged(tmp_path: Path) -> None:
    db = edgeprof_db(tmp_path / "r.prom")
    before = sha(db)
    refused(invoke(case("textfile-onto-own-db"), db=db), "database")
    assert sha(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.prom"]


def _foreign_prom(tmp_path: Path, kind: str, db: Path) -> tuple[Path, Path | None]:
    """(the --textfile path, the file whose bytes must not change)."""
    out = tmp_path / "other.prom"
    if kind == "exporter":
        out.write_text("# HELP node_load1 1m load average.\nnode_load1 0.5\n")
        return out, out
    if kind == "fifo":
        os.mkfifo(out)
        return out, None
    if kind == "symlink":
        victim = tmp_path / "victim.prom"
        victim.write_text("# HELP edgeprof_agent_up x\n")  # even one that looks like ours
        out.symlink_to(victim)
        return out, victim
    os.link(db, out)  # a hard link to the database
    return out, db


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["exporter", "fifo", "symlink", "hardlink-to-db"])
def test_a_textfile_edgeprof_did_not_write_is_never_replaced(tmp_path: Path, kind: str) -> None:
    db = edgeprof_db(tmp_path / "self.db")
    out, keep = _foreign_prom(tmp_path, kind, db)
    before, db_before = (sha(keep) if keep else None), sha(db)
    refused(invoke(case("textfile-foreign-or-fifo"), db=db, foreign=out))
    assert (sha(keep) if keep else None) == before and sha(db) == db_before
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_an_earlier_textfile_is_replaced_through_a_new_file(tmp_path: Path) -> None:
    db = edgeprof_db(tmp_path / "self.db")
    out = tmp_path / "edgeprof.prom"
    first = CliRunner().invoke(app, ["metrics", "--db", str(db), "--textfile", str(out)])
    assert first.exit_code == 0, first.output
    inode = out.stat().st_ino
    second = CliRunner().invoke(app, ["metrics", "--db", str(db), "--textfile", str(out)])
    assert second.exit_code == 0, second.output
    assert out.stat().st_ino != inode and out.read_text().startswith("# HELP edgeprof_")


# --- edgeprof's database known by its mark --------------------------------------------------------------


def app_db_with_schema_version(path: Path, version_type: str = "INTEGER", version: object = 1) -> Path:
    """Another application's SQLite file with a schema_version table (shaped like edgeprof's, or Flyway's)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO users (name) VALUES ('Ada')")
        conn.execute(
            f"CREATE TABLE schema_version (version {version_type}, description TEXT, applied_at TEXT)"
        )
        conn.execute("INSERT INTO schema_version VALUES (?, 'initial', '2024-01-01')", (version,))
        conn.commit()
    return path


def _commands(db: Path, other: Path, export: Path) -> list[list[str]]:
    return [
        ["db", "upgrade", "--db", str(db)],
        ["db", "compact", "--db", str(db)],
        ["db", "version", "--db", str(db)],
        ["import", str(export), "--db", str(db)],
        ["import-tegrastats", str(TEGRASTATS_LOG), "--db", str(db)],
        ["push", "--all", "--to", str(db), "--db", str(other)],
        ["report", "--db", str(db)],
        ["status", "--db", str(db)],
        ["sweeps", "--db", str(db)],
        ["analyse", "--db", str(db)],
        ["metrics", "--db", str(db)],
    ]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("hostile", "version_type", "version"),
    [
        (case("foreign-sqlite-own-schema-version"), "INTEGER", 1),
        (case("foreign-sqlite-flyway"), "VARCHAR", "1.1"),
    ],
    ids=["own-shape", "flyway"],
)
def test_a_foreign_database_with_a_schema_version_table_is_refused_by_every_command(
    tmp_path: Path, hostile: object, version_type: str, version: object
) -> None:
    foreign = app_db_with_schema_version(tmp_path / "app.db", version_type, version)
    other = edgeprof_db(tmp_path / "mine.db")
    export = tmp_path / "x.jsonl"
    exported = CliRunner().invoke(app, ["export", "--sweep", "1", "-o", str(export), "--db", str(other)])
    assert exported.exit_code == 0, exported.output
    before = sha(foreign)
    for argv in _commands(foreign, other, export):
        line = refused(CliRunner().invoke(app, argv), "not an edgeprof one")
        assert "db upgrade" not in line, (argv, line)
        assert sha(foreign) == before, argv
    with pytest.raises(DatabaseError, match="not an edgeprof one"):  # the agent and every writer open this
        open_engine(foreign)
    assert sha(foreign) == before
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("app.db-")]  # no -wal, -shm


def test_an_edgeprof_database_from_before_the_mark_is_recognised_and_marked_by_a_writer(
    tmp_path: Path,
) -> None:
    case("edgeprof-db-before-the-mark")
    db = edgeprof_db(tmp_path / "old.db")
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID  # a new DB has it
        conn.execute("PRAGMA application_id = 0")  # as every edgeprof before it wrote them
        conn.commit()
    before = sha(db)
    assert CliRunner().invoke(app, ["sweeps", "--db", str(db)]).exit_code == 0
    assert sha(db) == before  # a reader changes nothing, not even the mark
    open_engine(db).dispose()
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


def test_a_database_with_another_applications_mark_is_refused(tmp_path: Path) -> None:
    db = edgeprof_db(tmp_path / "x.db")
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA application_id = 1234")
        conn.commit()
    before = sha(db)
    with pytest.raises(DatabaseError, match="application_id 0x4d2"):
        open_engine(db)
    assert sha(db) == before


# --- secrets ---------------------------------------------------------------------------------------------


def test_password_parameters_are_masked_in_every_message() -> None:
    c = case("url-password-parameter")
    result = invoke(c)
    line = refused(result)
    assert "hunter" not in result.output and "password=***" in line
    url = "postgresql://u@h/db?password=p%40ss&passfile=/home/u/.pg&sslpassword=s3"
    assert mask_url(url) == "postgresql://u@h/db?password=***&passfile=***&sslpassword=***"
    assert scrub("could not connect with p@ss, s3 and /home/u/.pg", url).count("***") == 3
    assert mask_url("host=h password='a b' user=u") == "host=h password=*** user=u"


def test_a_libpq_connection_string_is_refused_not_taken_for_a_path(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke(case("url-libpq-conninfo"))
    line = refused(result, "libpq connection string", "password=***")
    assert "hunter2" not in result.output, line
    assert list(tmp_path.iterdir()) == []


def test_a_url_in_edgeprof_db_is_used_as_a_url_and_its_secrets_masked(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EDGEPROF_DB", "postgresql://u:s3cretpw@127.0.0.1:1/db?password=p2xx")
    result = CliRunner().invoke(app, ["sweeps"])
    line = refused(result, "postgresql://u:***@127.0.0.1:1/db?password=***")
    assert "s3cretpw" not in result.output and "p2xx" not in result.output, line
    assert list(tmp_path.iterdir()) == []  # never taken for a file name
