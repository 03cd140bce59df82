"""One sanitiser on every path a label takes to a reader: ``compare`` (table and md), the live progress
lines, the agent's log, CSV (formula neutralisation, CR) and Markdown (no markup from data). A label with
OSC 52 (a clipboard write), CR, a C1 CSI or a newline is shown as its escapes, on one line."""

from __future__ import annotations

import csv
import io
import logging
import re
from pathlib import Path

import pytest
from support import dbbuild
from support.hostile_cases import case
from typer.testing import CliRunner

from edgeprof.cli import app
from edgeprof.report import build_rows, render_csv
from edgeprof.safetext import SafeLogFormatter, md_text
from edgeprof.storage.db import new_session, open_engine
from edgeprof.sweep.progress import Progress

EVIL = "q4\x1b]52;c;cm0gLXJmIH4=\x07\rX\x9b2J\nforged line"


def _db(path: Path, label: str) -> Path:
    engine = open_engine(path)
    with new_session(engine) as s:
        for name in ("a", "b"):
            sweep = dbbuild.add_sweep(s, name=name)
            dbbuild.add_run(s, sweep, 0, model_label=label, model_group=label)
        s.commit()
    engine.dispose()
    return path


def _no_controls(text: str) -> None:
    assert not any(ch in text for ch in ("\x1b", "\x07", "\r", "\x9b")), repr(text)


@pytest.mark.parametrize("hostile", [case("labels-raw-to-readers")], ids=lambda c: c.id)
@pytest.mark.parametrize("fmt", ["table", "md"])
def test_compare_prints_no_control_sequence_and_no_forged_line(
    tmp_path: Path, fmt: str, hostile: object
) -> None:
    db = _db(tmp_path / "c.db", EVIL)
    result = CliRunner().invoke(app, ["compare", "1", "2", "--db", str(db), "--format", fmt])
    assert result.exit_code == 0, result.output
    _no_controls(result.output)
    assert "\\x1b]52" in result.output
    assert not any(line.startswith("forged line") for line in result.output.splitlines())


def test_progress_lines_show_a_label_as_its_escapes() -> None:
    out = io.StringIO()
    progress = Progress(total=1, out=out)
    progress.start(1, EVIL)
    progress.finish(1, EVIL, "ok", 1.0, 0)
    progress.line(f"warning about {EVIL}")
    progress.close()
    _no_controls(out.getvalue())
    assert not any(line.startswith("forged line") for line in out.getvalue().splitlines())


def test_the_agent_log_is_one_line_per_record_whatever_the_message() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(SafeLogFormatter("edgeprof-agent %(levelname)s %(message)s"))
    logger = logging.getLogger("edgeprof.test-sanitised")
    logger.addHandler(handler)
    try:
        logger.warning("plan %s refused", EVIL + "\udcff")
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    _no_controls(text)
    assert text.count("\n") == 1 and "\\udcff" in text


def test_csv_neutralises_formulas_and_keeps_a_cr_inside_its_row(tmp_path: Path) -> None:
    db = _db(tmp_path / "c.db", "=cmd|' /C calc'!A0\rx")
    engine = open_engine(db, read_only=True)
    with new_session(engine) as s:
        text = render_csv(build_rows(s, 1))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 1 and rows[0]["model_label"].startswith("'=cmd")
    assert "\r" not in text


def test_markdown_labels_never_become_markup() -> None:
    shown = md_text("<script>x</script> [a](javascript:alert(1)) ![i](http://evil/p.png) a|b")
    assert not re.search(r"(?<!\\)(<script|\]\(|!\[)", shown), shown
    assert shown.endswith("a\\|b")


def test_status_shows_a_sweep_name_as_its_escapes(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "s.db")
    with new_session(engine) as s:
        sweep = dbbuild.add_sweep(s, name=EVIL)
        dbbuild.add_run(s, sweep, 0, model_label=EVIL, status="error", reason=EVIL)
        s.commit()
    engine.dispose()
    result = CliRunner().invoke(app, ["status", "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 0, result.output
    _no_controls(result.output)
    assert not any(line.startswith("forged line") for line in result.output.splitlines())


def test_a_warning_quoting_a_label_prints_no_control_sequence() -> None:
    import warnings

    from edgeprof.safetext import install_warning_sanitiser

    original = warnings.formatwarning
    try:
        install_warning_sanitiser()
        text = warnings.formatwarning(f"Glyph 27 ({EVIL}) missing", UserWarning, "x.py", 1, "")
    finally:
        warnings.formatwarning = original
    _no_controls(text)


@pytest.mark.parametrize("extra", [[], ["--show-output"], ["--format", "md"]], ids=["table", "output", "md"])
def test_a_piped_report_has_no_forged_line(tmp_path: Path, extra: list[str]) -> None:
    db = _db(tmp_path / "r.db", EVIL)
    result = CliRunner().invoke(app, ["report", "--sweep", "1", "--db", str(db), *extra])
    assert result.exit_code == 0, result.output
    _no_controls(result.output)
    assert not any(line.startswith("forged line") for line in result.output.splitlines())
