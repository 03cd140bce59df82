"""Labels, names and prompts with terminal control sequences (clear-screen, OSC 52 clipboard write, a title
change, BEL, CR) are shown as escapes by every command that prints them: ``report`` (table and Markdown),
``sweeps`` and ``run --check``; run as a user would, in a fresh process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from support.hostile import CONTROL, build_hostile_db
from support.plans import plan_toml

from edgeprof.safetext import safe_text
from edgeprof.storage.db import new_session, open_engine

RAW_CONTROLS = ("\x1b", "\x07", "\r", "\x7f", "\x9b")


def edgeprof(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="120", NO_COLOR="1", XDG_DATA_HOME=str(tmp_path / "xdg"))
    env.pop("EDGEPROF_DB", None)
    return subprocess.run(
        [sys.executable, "-m", "edgeprof", *args],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip


def assert_safe(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stderr
    for stream in (result.stdout, result.stderr):
        assert not [c for c in RAW_CONTROLS if c in stream], repr(stream)
    assert "Traceback" not in result.stderr


def hostile_db(tmp_path: Path) -> str:
    db = tmp_path / "hostile.db"
    with new_session(open_engine(db)) as s:
        build_hostile_db(s)
    return str(db)


def test_report_and_its_markdown_show_control_characters_as_escapes(tmp_path: Path) -> None:
    db = hostile_db(tmp_path)
    for args in (["report"], ["report", "--wide"], ["report", "--show-output"], ["report", "--format", "md"]):
        result = edgeprof(tmp_path, *args, "--db", db)
        assert_safe(result)
        assert safe_text(CONTROL) in result.stdout, args


def test_sweeps_shows_control_characters_as_escapes(tmp_path: Path) -> None:
    # every column: the sweep's name too (the plan column is the first left out to fit a width)
    result = edgeprof(tmp_path, "sweeps", "--wide", "--db", hostile_db(tmp_path))
    assert_safe(result)
    assert safe_text(CONTROL) in result.stdout  # the device's hostname and the sweep's name
    assert result.stdout.count(safe_text(CONTROL)) >= 2


def test_run_check_shows_a_hostile_file_name_and_label_as_escapes(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    # a label defaults to the file name: a GGUF named with a clipboard write, a terminal reset (clears the
    # screen) and a CR in it (no "[": a plan's model path is a glob pattern)
    hostile_name = "<img src=x onerror=alert(1)>\x1b]52;c;aGk=\x07\x1bc\r"
    named = tmp_path / f"{hostile_name}.gguf"
    shutil.copy(tiny_models["Q8_0"], named)
    labelled = {"path": str(tiny_models["Q4_K_M"]), "label": f"q4{CONTROL}"}
    plan = tmp_path / "plan.toml"
    plan.write_text(
        plan_toml([named, labelled], workloads=[{"name": "w", "prompt": f"hi{CONTROL}", "n_predict": 4}]),
        encoding="utf-8",
    )
    result = edgeprof(tmp_path, "run", "--check", str(plan))
    assert_safe(result)
    assert f"  q4{safe_text(CONTROL)}: 1 configs" in result.stdout.splitlines()
    assert f"  {safe_text(hostile_name)}: 1 configs" in result.stdout.splitlines()
