"""Running the hostile-input cases (support/hostile_cases.py): the small databases and foreign files they
are given, the Typer app in-process, and the one-line refusal they must end in."""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from pathlib import Path

from typer.testing import CliRunner, Result

from edgeprof.cli import app
from edgeprof.storage.db import new_session, open_engine
from support import dbbuild
from support.captures import TEGRASTATS_CAPTURES
from support.hostile_cases import Case

TEGRASTATS_LOG = TEGRASTATS_CAPTURES / "orin-nano-8gb_jp6_1.txt"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def edgeprof_db(path: Path) -> Path:
    """An edgeprof database with sweep 1 (one run), checkpointed so the main file holds everything."""
    engine = open_engine(path)
    with new_session(engine) as s:
        sweep = dbbuild.add_sweep(s)
        dbbuild.add_run(s, sweep, 0)
        s.commit()
    engine.dispose()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def foreign_sqlite(path: Path) -> Path:
    """Another application's SQLite file, in rollback-journal mode (the default)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO customers (name) VALUES ('Ada')")
        conn.commit()
    return path


def invoke(c: Case, **paths: object) -> Result:
    return CliRunner().invoke(app, c.args(**paths))


def refused(result: Result, *words: str) -> str:
    """The one ``edgeprof: error:`` line of a refusal (exit 2, no traceback)."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = [line for line in result.output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("edgeprof: error: ")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    for word in words:
        assert word in errors[0], errors[0]
    return errors[0]


