"""Every command that prints a table or a list fits an 80-column terminal, as ``report`` does; piped without
COLUMNS, or with ``--wide``, lines stay whole for a script. Read from the golden fixture database (two real
sweeps, both runners, every row of the compare caveated: the widest output there is)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.golden import env_for, load_db


@pytest.fixture(scope="module")
def golden_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = load_db(tmp_path_factory.mktemp("width") / "golden.db")
    upgraded = run(["db", "upgrade"], db, columns=None)
    assert upgraded.returncode == 0, upgraded.stderr
    return db


def run(args: list[str], db: Path, columns: int | None = 80) -> subprocess.CompletedProcess[str]:
    env = env_for(db)
    env.pop("COLUMNS")
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run(
        [sys.executable, "-m", "edgeprof", *args], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "args", [["compare", "1", "2"], ["status"], ["sweeps"], ["doctor"], ["report", "--sweep", "1"]]
)
def test_fits_80_columns(golden_db: Path, args: list[str]) -> None:
    result = run(args, golden_db)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) >= 3
    too_long = [(len(line), line) for line in lines if len(line) > 80]
    assert too_long == [], "\n".join(f"{n}: {line}" for n, line in too_long)


def test_compare_and_sweeps_say_what_they_left_out(golden_db: Path) -> None:
    compare = run(["compare", "1", "2"], golden_db).stdout
    assert compare.startswith("A: sweep 1 'golden' on ") and "\nB: sweep 2 'golden' on " in compare
    assert "(left out to fit 80 columns: " in compare and "tg t/s" in compare and "caveat" in compare
    sweeps = run(["sweeps"], golden_db).stdout
    assert "(left out to fit 80 columns: board, L4T, started; --wide shows every column)" in sweeps


@pytest.mark.parametrize(("args", "widest"), [(["compare", "1", "2"], 200), (["sweeps"], 90)])
def test_piped_or_wide_lines_stay_whole(golden_db: Path, args: list[str], widest: int) -> None:
    for result in (run(args, golden_db, columns=None), run([*args, "--wide"], golden_db)):
        assert result.returncode == 0, result.stderr
        assert max(len(line) for line in result.stdout.splitlines()) > widest
        assert "left out" not in result.stdout
