"""What the fidelity benchmarks share: where the repository and ``benchmarks/out/`` are, the llama.cpp tools
that ``build_llama_bench.sh`` built from the same sdist as edgeprof's wheel, and a time-stamped log line.

The scripts run as ``python benchmarks/fidelity/<script>.py`` from the repository root, so this folder is
the first entry of ``sys.path`` and ``from common import ...`` finds this module.
"""

from __future__ import annotations

import glob
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT_DIR = REPO / "benchmarks" / "out"  # git-ignored
LLAMA_BUILD_ROOT = OUT_DIR / "llama-bench"  # build_llama_bench.sh's default BUILD_ROOT


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def latest_build() -> Path | None:
    """The newest ``build-<sdist>`` folder of ``build_llama_bench.sh``, if any."""
    builds = sorted(LLAMA_BUILD_ROOT.glob("build-*"))
    return builds[-1] if builds else None


def built_tool(name: str) -> Path | None:
    """``bin/<name>`` of the newest build that has it (``llama-bench``, ``llama-perplexity``), if any."""
    found = sorted(glob.glob(str(LLAMA_BUILD_ROOT / "build-*" / "bin" / name)))
    return Path(found[-1]) if found else None


def find_llama_bench(given: str | None) -> str:
    """``--llama-bench PATH``, else the venv's (scripts/setup.sh puts it there), else PATH's."""
    if given:
        return given
    venv = Path(sys.prefix) / "bin" / "llama-bench"
    if venv.exists():
        return str(venv)
    found = shutil.which("llama-bench")
    if found:
        return found
    sys.exit("llama-bench not found: run scripts/setup.sh, or pass --llama-bench PATH")


def edgeprof_command() -> list[str]:
    """The venv's ``edgeprof``, or ``python -m edgeprof`` where no script was installed."""
    exe = Path(sys.prefix) / "bin" / "edgeprof"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "edgeprof"]
