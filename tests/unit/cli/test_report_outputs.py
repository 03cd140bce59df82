"""What ``edgeprof report`` writes where: CSV to a terminal through the one sanitiser (a label's ESC or BEL is
shown, never acted on) and to a file as data (formulas neutralised); ``--html FILE`` alone writes the page
and one line saying where, not the whole table too. A hand-built database, the Typer app in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import dbbuild
from typer.testing import CliRunner

from edgeprof.cli import app
from edgeprof.cli import report as report_cli
from edgeprof.report.render.csv import render_csv
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Measurement

pytestmark = pytest.mark.timeout(120)

LABEL = "=cmd|x\x1b]0;owned\x07q4"  # a formula's start, then an OSC that retitles the window, ended by BEL


def _db(path: Path) -> str:
    engine = open_engine(path)
    with new_session(engine) as s:
        sweep = dbbuild.add_sweep(s)
        run = dbbuild.add_run(
            s, sweep, 0, model_label=LABEL,
            workload_json=json.dumps({"name": "w", "prompt": "Weather?", "n_predict": 8}),
        )  # fmt: skip
        s.add(Measurement(run_id=run.id, kind="steady", rep=0, tg_tps=10.0))
        s.commit()
    engine.dispose()
    return str(path)


def test_csv_to_a_terminal_shows_control_characters_and_to_a_file_keeps_the_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _db(tmp_path / "r.db")
    to_file = CliRunner().invoke(app, ["report", "--db", db, "--format", "csv"])
    assert to_file.exit_code == 0, to_file.output
    assert "'=cmd|x\x1b]0;owned\x07q4" in to_file.output  # data as stored, the formula neutralised
    monkeypatch.setattr(report_cli, "to_terminal", lambda: True)
    shown = CliRunner().invoke(app, ["report", "--db", db, "--format", "csv"])
    assert shown.exit_code == 0, shown.output
    assert "\x1b" not in shown.output and "\x07" not in shown.output
    assert "'=cmd|x\\x1b]0;owned\\x07q4" in shown.output


def test_render_csv_for_a_terminal_escapes_every_text_cell() -> None:
    from edgeprof.report.columns import FIELD_NAMES

    row = dict.fromkeys(FIELD_NAMES)
    row.update(model_label="a\x1b[2Jb", workload="w\x9bx", reason="line\nnext")
    text = render_csv([row], terminal=True)
    assert "\x1b" not in text and "\x9b" not in text and "a\\x1b[2Jb" in text and "line\\nnext" in text
    assert "a\x1b[2Jb" in render_csv([row])  # a file gets the data


def test_html_alone_writes_the_file_and_says_where_without_the_table(tmp_path: Path) -> None:
    db = _db(tmp_path / "r.db")
    out = tmp_path / "r.html"
    alone = CliRunner().invoke(app, ["report", "--db", db, "--html", str(out)])
    assert alone.exit_code == 0, alone.output
    assert out.is_file()
    assert alone.stdout.strip() == f"HTML report written to {out}"  # one line, not the wide table
    both = CliRunner().invoke(app, ["report", "--db", db, "--html", str(out), "--format", "csv"])
    assert both.exit_code == 0, both.output
    assert both.stdout.startswith("model_label,") or "model_label" in both.stdout.splitlines()[0]
    assert f"HTML report written to {out}" in both.stderr
