"""An imported log is judged once, at import, and its verdict read back by ``report``, ``analyse`` and
``status`` (a fresh process per command, as a user runs them): a stored verdict planted in the database is
what all three print, so none of them judged the samples again; one of an older judgement is judged
again by ``analyse`` (and by ``report`` in memory, said on stderr); ``analyse --rejudge`` judges a current
one again. SYNTHETIC log from tests/support/synthetic_logs.py."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from support.synthetic_logs import Board, tegrastats_log

from edgeprof.verdicts.log_verdict import RULE_VERSION


def edgeprof(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # a wide terminal: status wraps its lines at the width it is given, and these tests read whole lines
    env = dict(os.environ) | {"XDG_DATA_HOME": str(tmp_path / "x"), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "edgeprof", *args], capture_output=True, text=True, env=env, cwd=tmp_path,
        timeout=120,
    )  # fmt: skip


def plant(db: Path, verdict: str, version: int) -> None:
    """The stored verdict replaced by one that no judgement of the samples would give."""
    with sqlite3.connect(db) as conn:
        (raw,) = conn.execute("SELECT result_json FROM log_verdict").fetchone()
        result = json.loads(raw)
        for s in result["sessions"]:
            s["verdict"], s["reason"] = verdict, "planted by the test"
        update = "UPDATE log_verdict SET result_json = ?, rule_version = ?"
        conn.execute(update, (json.dumps(result), version))


def stored(db: Path) -> tuple[str, int]:
    with sqlite3.connect(db) as conn:
        raw, version = conn.execute("SELECT result_json, rule_version FROM log_verdict").fetchone()
    return json.loads(raw)["sessions"][0]["verdict"], int(version)


def test_report_analyse_and_status_read_the_verdict_stored_at_import(tmp_path: Path) -> None:
    log = tegrastats_log(tmp_path / "night.log", Board(lines=300))
    db = tmp_path / "t.db"
    imported = edgeprof(tmp_path, "import-log", str(log), "--db", str(db))
    assert imported.returncode == 0, imported.stderr
    assert "verdict (session 1: " in imported.stdout and ": throttled: " in imported.stdout
    assert stored(db) == ("throttled", RULE_VERSION)

    plant(db, "planted", RULE_VERSION)
    report = edgeprof(tmp_path, "report", "--db", str(db), "--format", "json")
    assert report.returncode == 0, report.stderr
    shown = json.loads(report.stdout)
    assert shown["sessions"][0]["verdict"] == "planted" and shown["rule_version"] == RULE_VERSION
    assert report.stderr == ""
    analysed = edgeprof(tmp_path, "analyse", "--db", str(db), "--format", "json")
    assert json.loads(analysed.stdout)["sessions"][0]["verdict"] == "planted"
    status = edgeprof(tmp_path, "status", "--db", str(db))
    assert "log session 1: planted: planted by the test" in status.stdout

    # judged again: with --rejudge, and where the stored verdict is by an older judgement
    rejudged = edgeprof(tmp_path, "analyse", "--db", str(db), "--rejudge", "--format", "json")
    assert json.loads(rejudged.stdout)["sessions"][0]["verdict"] == "throttled"
    assert stored(db) == ("throttled", RULE_VERSION)
    plant(db, "planted", RULE_VERSION - 1)
    status = edgeprof(tmp_path, "status", "--db", str(db))
    assert "log verdict: by an older judgement: `edgeprof analyse --sweep 1` judges and stores it" in (
        status.stdout
    )
    report = edgeprof(tmp_path, "report", "--db", str(db), "--format", "json")
    assert json.loads(report.stdout)["sessions"][0]["verdict"] == "throttled"
    assert "is by an older judgement: judged again now" in report.stderr
    assert stored(db) == ("planted", RULE_VERSION - 1)  # a report never writes
    analysed = edgeprof(tmp_path, "analyse", "--db", str(db))
    assert analysed.returncode == 0 and "throttled" in analysed.stdout
    assert stored(db) == ("throttled", RULE_VERSION)
