"""The real llama-bench the tests compare edgeprof with: where it is, a mark for tests that need it, and
one run of it that must succeed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LLAMA_BENCH_ENV = "EDGEPROF_LLAMA_BENCH"


def find_llama_bench() -> str | None:
    """$EDGEPROF_LLAMA_BENCH, else the venv's (scripts/setup.sh puts it beside llama-server), else PATH."""
    given = os.environ.get(LLAMA_BENCH_ENV)
    if given:
        return given
    venv = Path(sys.prefix) / "bin" / "llama-bench"
    if venv.is_file() and os.access(venv, os.X_OK):
        return str(venv)
    return shutil.which("llama-bench")


LLAMA_BENCH = find_llama_bench()
needs_llama_bench = pytest.mark.skipif(
    LLAMA_BENCH is None and not os.environ.get("CI"),
    reason="llama-bench not built (scripts/setup.sh builds it; CI always has it)",
)


def llama_bench(args: list[str], cwd: Path) -> str:
    """llama-bench's stdout for ``args``, run in ``cwd``; a failure fails the test with its stderr."""
    assert LLAMA_BENCH is not None, "CI builds llama-bench with scripts/setup.sh"
    done = subprocess.run([LLAMA_BENCH, *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
