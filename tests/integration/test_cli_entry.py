"""The CLI as a fresh process meets the user: --version, shell completion, an example in --help,
``python -m edgeprof``, and a start-up that loads no heavy library for --help, --version or status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgeprof import __version__

pytestmark = pytest.mark.timeout(120)

EDGEPROF = [sys.executable, "-m", "edgeprof"]
# Completion is keyed on the program's name: the console script, as a user types it.
SCRIPT = str(Path(sys.executable).parent / "edgeprof")


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EDGEPROF, *args], capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_names_edgeprof_llama_cpp_python_and_the_llama_cpp_build(flag: str) -> None:
    proc = _run(flag)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"edgeprof {__version__}"
    assert lines[1].startswith("llama-cpp-python ") and "not installed" not in lines[1]
    assert any(line.startswith("llama.cpp ggml ") and "commit" in line for line in lines)


def test_an_example_is_shown_by_help() -> None:
    proc = _run("run", "--help")
    assert proc.returncode == 0
    assert "Example: edgeprof run plan.toml --check" in proc.stdout


def test_bash_completion_installs_and_completes_commands(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "SHELL": "/bin/bash"}
    proc = subprocess.run([SCRIPT, "--install-completion", "bash"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    script = tmp_path / ".bash_completions" / "edgeprof.sh"
    assert script.is_file()
    assert "edgeprof.sh" in (tmp_path / ".bashrc").read_text()
    # What the installed script asks the program for, when the user types `edgeprof re<TAB>`:
    complete = subprocess.run(
        [SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "_EDGEPROF_COMPLETE": "complete_bash", "COMP_WORDS": "edgeprof re", "COMP_CWORD": "1"},
    )
    assert "report" in complete.stdout.split()


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_exist_for_each_shell(shell: str) -> None:
    proc = _run("--show-completion", shell, env={**os.environ, "SHELL": f"/bin/{shell}"})
    assert proc.returncode == 0, proc.stderr
    assert "edgeprof" in proc.stdout and len(proc.stdout) > 100


HEAVY = ("sqlalchemy", "numpy", "matplotlib", "llama_cpp")


def _modules_after(args: list[str], tmp_path: Path) -> set[str]:
    """Top-level modules loaded by the time the command ends (run in a fresh interpreter)."""
    code = (
        "import atexit, sys\n"
        "out = sys.argv[1]\n"
        "atexit.register(lambda: open(out, 'w').write('\\n'.join(sorted(sys.modules))))\n"
        "sys.argv = ['edgeprof', *sys.argv[2:]]\n"
        "from edgeprof.cli import main\n"
        "main()\n"
    )
    out = tmp_path / "modules.txt"
    cmd = [sys.executable, "-c", code, str(out), *args]
    subprocess.run(cmd, capture_output=True, timeout=60, cwd=tmp_path)
    return {name.split(".")[0] for name in out.read_text().splitlines()}


def test_help_and_version_load_no_heavy_library(tmp_path: Path) -> None:
    for args in (["--help"], ["--version"], ["run", "--help"]):
        loaded = _modules_after(args, tmp_path)
        assert "edgeprof" in loaded
        assert not loaded & set(HEAVY), (args, sorted(loaded & set(HEAVY)))


def test_status_loads_no_numpy_matplotlib_or_llama_cpp(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    assert _run("db", "upgrade", "--db", str(db)).returncode == 0
    loaded = _modules_after(["status", "--db", str(db)], tmp_path)
    assert "sqlalchemy" in loaded  # it did read the database
    heavy = loaded & {"numpy", "matplotlib", "llama_cpp"}
    assert not heavy, sorted(heavy)
