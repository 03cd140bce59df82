"""What the fidelity benchmarks share: where the repository and ``benchmarks/out/`` are, the llama.cpp tools
that ``build_llama_bench.sh`` built from the same sdist as edgeprof's wheel, and a time-stamped log line.

The scripts run as ``python benchmarks/fidelity/<script>.py`` from the repository root, so this folder is
the first entry of ``sys.path`` and ``from common import ...`` finds this module.
"""

from __future__ import annotations

import glob
import math
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


def median_ci(values: list[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free interval for the median: the order statistics x(k) and x(n+1-k) with the largest
    k for which P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2 (n = 10: x(2) and x(9), 97.9 %). None for
    fewer values than the confidence needs (6 at 95 %)."""
    xs = sorted(values)
    n = len(xs)
    tail = (1.0 - confidence) / 2.0
    cumulative, k = 0.0, 0
    for j in range(n + 1):
        p = math.comb(n, j) / 2.0**n
        if cumulative + p > tail:
            break
        cumulative += p
        k = j + 1
    return (xs[k - 1], xs[n - k]) if k > 0 else None
