"""``edgeprof report --html FILE`` (agent/report/html.py through safefs.replace_report) never overwrites the
database itself or a file that is not an earlier edgeprof report. Real tiny models, real processes."""

from __future__ import annotations

import io
from pathlib import Path

from support.runs import clean_env, edgeprof, one_line_error, two_quant_plan

from edgeprof.plan import parse_plan
from edgeprof.storage.db import open_engine
from edgeprof.sweep import run_plan


def test_report_html_refuses_to_overwrite_the_database_or_a_foreign_file(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    db = tmp_path / "r.db"
    engine = open_engine(db)
    plan = parse_plan(two_quant_plan(tiny_models), source=str(tmp_path / "p.toml"), base=tmp_path)
    run_plan(engine, plan, out=io.StringIO(), env=clean_env())
    engine.dispose()
    before = db.read_bytes()
    assert "database itself" in one_line_error(edgeprof("report", "--db", str(db), "--html", str(db)))
    assert db.read_bytes() == before
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    assert "not an earlier edgeprof report" in one_line_error(
        edgeprof("report", "--db", str(db), "--html", str(notes))
    )
    assert notes.read_text() == "my notes"
    out = tmp_path / "r.html"
    for _ in range(2):  # a new file, then an earlier report: both fine
        assert edgeprof("report", "--db", str(db), "--html", str(out)).returncode == 0
    assert b"edgeprof" in out.read_bytes()[:400]
