"""The command line as a new user meets it: a fresh process, expected failures as one line and exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

WORKLOAD = '[[workload]]\nname = "w"\nprompt_tokens = 8\nn_predict = 8\n'


def edgeprof(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["EDGEPROF_DB"] = str(tmp_path / "cli.db")
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    return subprocess.run(
        [sys.executable, "-m", "edgeprof", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )


def assert_bad_input(result: subprocess.CompletedProcess[str], *names: str) -> str:
    """Exit code 2, no traceback, first stderr line 'edgeprof: error: ...' naming each of ``names``."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert "Traceback" not in result.stdout
    first = result.stderr.splitlines()[0]
    assert first.startswith("edgeprof: error:"), result.stderr
    for name in names:
        assert name in first, (name, first)
    return first


def test_run_missing_plan_file(tmp_path: Path) -> None:
    first = assert_bad_input(edgeprof(tmp_path, "run", "nothere.toml"), "nothere.toml")
    assert "no such plan file" in first


def test_run_plan_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "plans").mkdir()
    first = assert_bad_input(edgeprof(tmp_path, "run", "plans"), "plans")
    assert "directory" in first


def test_run_malformed_toml(tmp_path: Path, write_plan: Callable[..., Path]) -> None:
    write_plan('name = "x"\n[matrix\n', name="broken.toml")
    assert_bad_input(edgeprof(tmp_path, "run", "broken.toml"), "broken.toml", "malformed TOML")


def test_run_plan_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "latin1.toml").write_bytes('name = "caf\xe9"\n'.encode("latin-1"))
    assert_bad_input(edgeprof(tmp_path, "run", "latin1.toml"), "latin1.toml", "UTF-8")


def test_run_wrong_types(
    tmp_path: Path, write_plan: Callable[..., Path], tiny_models: dict[str, Path]
) -> None:
    model = json.dumps(str(tiny_models["Q4_K_M"]))
    write_plan(f'[matrix]\nmodels = [{model}]\nctx = "big"\n{WORKLOAD}', name="types.toml")
    first = assert_bad_input(edgeprof(tmp_path, "run", "types.toml"), "types.toml", "matrix.ctx")
    assert "expected an integer" in first


def test_run_missing_model(tmp_path: Path, write_plan: Callable[..., Path]) -> None:
    write_plan(f'[matrix]\nmodels = ["gone.gguf"]\n{WORKLOAD}', name="missing.toml")
    first = assert_bad_input(edgeprof(tmp_path, "run", "missing.toml"), "missing.toml", "gone.gguf")
    assert "no such file" in first


def test_run_lists_every_problem(tmp_path: Path, write_plan: Callable[..., Path]) -> None:
    write_plan(f'nmae = "x"\n[matrix]\nmodels = ["gone.gguf"]\nctx = "big"\n{WORKLOAD}', name="many.toml")
    result = edgeprof(tmp_path, "run", "many.toml")
    assert_bad_input(result)
    lines = result.stderr.splitlines()
    assert len(lines) == 4
    assert all(line.startswith("edgeprof: error: many.toml: ") for line in lines[:3])
    assert lines[3] == "edgeprof: 3 problems in the plan; nothing was run"


def test_run_check_valid_plan(
    tmp_path: Path, write_plan: Callable[..., Path], tiny_models: dict[str, Path]
) -> None:
    models = ", ".join(json.dumps(str(tiny_models[q])) for q in ("Q8_0", "Q4_K_M"))
    write_plan(f'name = "ok"\n[matrix]\nmodels = [{models}]\nctx = [256, 512]\nngl = [0]\n{WORKLOAD}')
    result = edgeprof(tmp_path, "run", "--check", "plan.toml")
    assert result.returncode == 0, result.stderr
    assert "plan 'ok' is valid: 4 configs" in result.stdout
    assert not (tmp_path / "cli.db").exists()  # --check runs (and stores) nothing


def test_report_on_empty_db(tmp_path: Path) -> None:
    # A reader never creates the DB (a mistyped --db must not leave a file behind): first the missing file,
    # then an empty upgraded one.
    missing = edgeprof(tmp_path, "report")
    assert "no edgeprof database" in assert_bad_input(missing)
    assert not (tmp_path / "cli.db").exists()
    assert edgeprof(tmp_path, "db", "upgrade").returncode == 0
    result = edgeprof(tmp_path, "report")
    first = assert_bad_input(result)
    assert "no sweep" in first
    assert result.stderr.strip() == first  # one line
    assert result.stdout == ""


def test_report_unknown_sweep(tmp_path: Path) -> None:
    assert edgeprof(tmp_path, "db", "upgrade").returncode == 0
    first = assert_bad_input(edgeprof(tmp_path, "report", "--sweep", "999"))
    assert "999" in first


def test_report_bad_format_is_a_usage_error(tmp_path: Path) -> None:
    result = edgeprof(tmp_path, "report", "--format", "nope")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "nope" in result.stderr


@pytest.mark.parametrize("args", [("--help",), ("run", "--help"), ("report", "--help")])
def test_help(tmp_path: Path, args: tuple[str, ...]) -> None:
    result = edgeprof(tmp_path, *args)
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout
