"""Files edgeprof writes by name and databases it opens, given hostile or careless paths: every case of
``support.hostile_cases`` about them runs here, in-process on small hand-built SQLite files, and leaves the
database and every foreign file byte for byte as it was (sha256 before and after)."""

from __future__ import annotations

import contextlib
import gzip
import os
import sqlite3
import stat
from pathlib import Path

import pytest
from support.hostile_cases import case
from support.hostile_run import TEGRASTATS_LOG, edgeprof_db, foreign_sqlite, invoke, refused, sha
from typer.testing import CliRunner

from edgeprof.cli import app
from edgeprof.storage.db import open_engine

# --- files written -----------------------------------------------------------------------------------


def test_export_onto_its_own_database_is_refused_and_the_database_is_unchanged(tmp_path: Path) -> None:
    db = edgeprof_db(tmp_path / "self.db")
    before = sha(db)
    refused(invoke(case("export-onto-own-db"), db=db), "database")
    assert sha(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["self.db"]  # no temp file left either


def test_export_onto_the_databases_wal_is_refused(tmp_path: Path) -> None:
    db = edgeprof_db(tmp_path / "self.db")
    engine = open_engine(db)  # an open writer keeps -wal and -shm beside the database
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("SELECT 1")
        wal = Path(f"{db}-wal")
        assert wal.exists()
        wal_before, db_before = sha(wal), sha(db)
        refused(invoke(case("export-onto-own-wal"), db=db), "database")
        assert sha(wal) == wal_before and sha(db) == db_before
    finally:
        engine.dispose()


@pytest.mark.parametrize("kind", ["sqlite", "text"])
def test_export_never_replaces_a_file_that_is_not_an_earlier_export(tmp_path: Path, kind: str) -> None:
    db = edgeprof_db(tmp_path / "self.db")
    if kind == "sqlite":
        foreign = foreign_sqlite(tmp_path / "other.db")
        c = case("export-onto-other-db")
    else:
        foreign = tmp_path / "notes.txt"
        foreign.write_text("my notes\n")
        c = case("export-onto-foreign-file")
    before, db_before = sha(foreign), sha(db)
    refused(invoke(c, db=db, foreign=foreign), "not an earlier edgeprof export")
    assert sha(foreign) == before and sha(db) == db_before


@pytest.mark.parametrize("target", ["db", "file", "dangling"])
def test_export_through_a_symbolic_link_is_refused_and_its_target_unchanged(
    tmp_path: Path, target: str
) -> None:
    db = edgeprof_db(tmp_path / "self.db")
    victim = {"db": db, "file": tmp_path / "victim.txt", "dangling": tmp_path / "nothing-here"}[target]
    if target == "file":
        victim.write_text("keep me\n")
    link = tmp_path / "out.jsonl"
    link.symlink_to(victim)
    before = sha(victim) if victim.exists() else None
    refused(invoke(case("export-through-symlink"), db=db, link=link), "symbolic link")
    assert link.is_symlink() and (sha(victim) if victim.exists() else None) == before
    assert target != "dangling" or not victim.exists()


@pytest.mark.parametrize("name", ["sweep.jsonl", "sweep.jsonl.gz"])
def test_export_replaces_an_earlier_export_through_a_new_file(tmp_path: Path, name: str) -> None:
    db = edgeprof_db(tmp_path / "self.db")
    out = tmp_path / name
    first = invoke(case("export-over-earlier-export"), db=db, out=out)
    assert first.exit_code == 0, first.output
    inode = out.stat().st_ino
    out.chmod(0o600)
    second = invoke(case("export-over-earlier-export"), db=db, out=out)
    assert second.exit_code == 0, second.output
    assert out.stat().st_ino != inode  # renamed over, never truncated in place
    assert stat.S_IMODE(out.stat().st_mode) == 0o600  # with the earlier file's mode
    text = gzip.decompress(out.read_bytes()).decode() if name.endswith(".gz") else out.read_text()
    assert text.startswith('{"edgeprof_export"')
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp file left


def test_report_html_onto_its_own_database_is_refused(tmp_path: Path) -> None:
    db = edgeprof_db(tmp_path / "self.db")
    before = sha(db)
    refused(invoke(case("report-html-onto-own-db"), db=db), "database")
    assert sha(db) == before


def test_a_new_database_is_private_whatever_the_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """case db-mode-under-umask: 0600 for a user, 0640 under a systemd service (its Group= reads results)."""
    case("db-mode-under-umask")
    old = os.umask(0o022)
    try:
        monkeypatch.delenv("INVOCATION_ID", raising=False)
        open_engine(tmp_path / "user.db").dispose()
        monkeypatch.setenv("INVOCATION_ID", "0123abcd")
        open_engine(tmp_path / "service.db").dispose()
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "user.db").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "service.db").stat().st_mode) == 0o640
    for side in ("user.db-wal", "user.db-shm"):  # SQLite gives its side files the database's mode
        if (tmp_path / side).exists():
            assert stat.S_IMODE((tmp_path / side).stat().st_mode) == 0o600


# --- databases opened --------------------------------------------------------------------------------

FOREIGN_READERS = [
    "analyse-foreign-sqlite",
    "report-foreign-sqlite",
    "status-foreign-sqlite",
    "sweeps-foreign-sqlite",
    "db-version-foreign-sqlite",
    "tegrastats-import-foreign-sqlite",
]


@pytest.mark.parametrize("case_id", FOREIGN_READERS)
def test_a_foreign_sqlite_file_is_refused_unchanged(tmp_path: Path, case_id: str) -> None:
    foreign = foreign_sqlite(tmp_path / "app.db")
    before = sha(foreign)
    refused(invoke(case(case_id), foreign=foreign, log=TEGRASTATS_LOG), "not an edgeprof one")
    assert sha(foreign) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]  # no -wal, no -journal left
    with contextlib.closing(sqlite3.connect(foreign)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def _damage(db: Path, table: str | None = None) -> None:
    """Garble every b-tree page but the first (``table``: only that table's page, one an import never
    reads, so only quick_check tells): the header still reads as SQLite."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        n = conn.execute("PRAGMA page_count").fetchone()[0]
        pages = (
            [conn.execute("SELECT pageno FROM dbstat WHERE name = ?", (table,)).fetchone()[0] - 1]
            if table
            else list(range(1, n))
        )
    with db.open("r+b") as fh:
        for k in pages:
            fh.seek(k * page + (0 if table else 8))
            fh.write(b"\xff" * 16 if table else b"\xff\x13" * 40)


def test_tegrastats_import_refuses_a_database_failing_its_integrity_check(tmp_path: Path) -> None:
    db = edgeprof_db(tmp_path / "bad.db")
    _damage(db, table="verdict")
    before = sha(db)
    refused(invoke(case("tegrastats-import-damaged-db"), db=db, log=TEGRASTATS_LOG), "damaged", ".recover")
    assert sha(db) == before


@pytest.mark.parametrize("reader", ["report", "sweeps", "status", "analyse"])
def test_a_damaged_database_is_one_line_for_a_reader_and_unchanged(tmp_path: Path, reader: str) -> None:
    case("reader-damaged-db")
    db = edgeprof_db(tmp_path / "bad.db")
    _damage(db)
    before = sha(db)
    refused(CliRunner().invoke(app, [reader, "--db", str(db)]), "damaged")
    assert sha(db) == before


def test_db_version_never_changes_the_journal_mode(tmp_path: Path) -> None:
    db = edgeprof_db(tmp_path / "e.db")
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
    before = sha(db)
    result = invoke(case("db-version-wal-unchanged"), db=db)
    assert result.exit_code == 0, result.output
    assert "schema version" in result.output
    assert sha(db) == before
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_a_dangling_symlink_at_db_is_refused_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "created.db"
    target.parent.mkdir()
    link = tmp_path / "link.db"
    link.symlink_to(target)
    refused(invoke(case("dangling-symlink-db"), link=link), "symbolic link")
    assert not target.exists() and link.is_symlink()
    for reader in (["sweeps"], ["report"], ["db", "version"]):
        refused(CliRunner().invoke(app, [*reader, "--db", str(link)]))
    assert not target.exists()


def test_a_new_quality_cache_is_private_whatever_the_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """case db-mode-under-umask, for the quality worker's reference cache (runners/quality_math.py)."""
    import numpy as np

    from edgeprof.runners.quality_math import CacheWriter, encode_rows

    monkeypatch.delenv("INVOCATION_ID", raising=False)
    path = tmp_path / "cache" / "ref.eplp"
    header = {"model_sha256": "a" * 64, "text_sha256": "b" * 64, "ctx": 4, "chunks": None, "max_chunks": 100}
    header |= {"format": 1, "n_chunks": 1, "n_vocab": 8, "add_bos": True}
    old = os.umask(0o022)
    try:
        writer = CacheWriter(path, header, np.zeros(4, dtype=np.int32))
        writer.write_chunk(*encode_rows(np.zeros((3, 8), dtype=np.float32), np.zeros(3, dtype=np.int64)))
        writer.finish()
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
