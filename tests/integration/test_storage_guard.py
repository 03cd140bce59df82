"""Databases that must not be written (storage/guard.py, the CLI's write guard and read-only opener): a
foreign SQLite file, a mistyped path, a damaged, read-only or immutable database are each one line before
anything runs, and the file is left as it was. Real `edgeprof` processes, real tiny models, real SQLite."""

from __future__ import annotations

import io
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from support.runs import clean_env, edgeprof, one_line_error, two_quant_plan

from edgeprof.plan import parse_plan
from edgeprof.storage.db import open_engine
from edgeprof.sweep import run_plan


def test_a_foreign_sqlite_file_is_refused_unchanged(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    foreign = tmp_path / "app.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER)")
    before = foreign.read_bytes()
    plan = tmp_path / "p.toml"
    plan.write_text(two_quant_plan(tiny_models))
    assert "not an edgeprof one" in one_line_error(edgeprof("run", str(plan), "--db", str(foreign)))
    assert foreign.read_bytes() == before and not Path(f"{foreign}-wal").exists()


def test_a_mistyped_db_for_a_read_only_command_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "typo.db"
    for command in (["report"], ["status"], ["analyse"], ["compare", "1", "2"]):
        assert "no edgeprof database" in one_line_error(edgeprof(*command, "--db", str(missing)))
    assert not missing.parent.exists()


def _corrupt(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        n = conn.execute("PRAGMA page_count").fetchone()[0]
    assert n > 4
    with db.open("r+b") as fh:
        for k in range(2, n):  # every page but the header page: b-tree pages become garbage
            fh.seek(k * page + 8)
            fh.write(b"\xff\x13" * 40)


def test_a_damaged_database_is_one_line_for_every_command_and_run_does_not_write(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    db = tmp_path / "bad.db"
    engine = open_engine(db)
    plan = parse_plan(two_quant_plan(tiny_models), source=str(tmp_path / "p.toml"), base=tmp_path)
    run_plan(engine, plan, out=io.StringIO(), env=clean_env())
    engine.dispose()
    _corrupt(db)
    before = db.read_bytes()
    plan_file = tmp_path / "p.toml"
    plan_file.write_text(two_quant_plan(tiny_models))
    assert "damaged" in one_line_error(edgeprof("run", str(plan_file), "--db", str(db), "--new"))
    assert db.read_bytes() == before
    commands = (["report"], ["report", "--format", "json"], ["status"], ["analyse"], ["compare", "1", "1"])
    for command in commands:
        proc = edgeprof(*command, "--db", str(db))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, (command, proc.stderr[-1500:])


def test_run_refuses_a_database_damaged_where_the_sweep_would_not_notice(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    """Only the (empty) verdict table's page is damaged: a sweep without telemetry never touches it, so
    without quick_check `run` would write into a DB failing integrity_check and exit 0."""
    db = tmp_path / "v.db"
    open_engine(db).dispose()
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        (pageno,) = conn.execute("SELECT pageno FROM dbstat WHERE name = 'verdict'").fetchone()
    with db.open("r+b") as fh:
        fh.seek((pageno - 1) * page)
        fh.write(b"\xff" * 16)  # not a b-tree page any more
    before = db.read_bytes()
    plan = tmp_path / "p.toml"
    plan.write_text(two_quant_plan(tiny_models))
    line = one_line_error(edgeprof("run", str(plan), "--db", str(db), "--no-telemetry"))
    assert "damaged" in line and ".recover" in line
    assert db.read_bytes() == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_a_read_only_database_is_one_line_before_anything_runs(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    db = tmp_path / "ro.db"
    open_engine(db).dispose()
    db.chmod(0o444)
    plan = tmp_path / "p.toml"
    plan.write_text(two_quant_plan(tiny_models))
    try:
        assert "cannot be written" in one_line_error(edgeprof("run", str(plan), "--db", str(db)))
    finally:
        db.chmod(0o644)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("chattr"), reason="chattr +i needs root")
def test_an_immutable_database_is_one_line_before_anything_runs(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    db = tmp_path / "imm.db"
    open_engine(db).dispose()
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.skip("this filesystem has no immutable attribute")
    plan = tmp_path / "p.toml"
    plan.write_text(two_quant_plan(tiny_models))
    try:
        assert "immutable" in one_line_error(edgeprof("run", str(plan), "--db", str(db)))
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)
