#!/usr/bin/env python3
"""Quick check that every benchmark still starts: each script's ``--help`` from the repository root, and
every ``edgeprof`` name the benchmarks import (at the top or inside a function) still exists.

The benchmarks import the package's inner modules and run only by hand, so a module moved inside the
package breaks them silently; this finds it in a few seconds, without running a benchmark.

    .venv/bin/python benchmarks/smoke.py
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
FOLDERS = ("fidelity", "self", "diagnostics")
# Shared modules with no command line of their own.
HELPERS = {"bracketing.py", "common.py", "probe_build.py", "diag_context.py"}
# fidelity_merge.py takes only result files: without one it prints its usage and exits 2.
HELP_EXIT = {"fidelity_merge.py": 2}


def scripts() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (BENCH / folder).glob("*.py"))


def edgeprof_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of every ``import edgeprof...`` / ``from edgeprof... import name``."""
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "edgeprof":
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] == "edgeprof"]
    return found


def check_imports(path: Path) -> list[str]:
    bad = []
    for line, module, name in edgeprof_imports(path):
        try:
            mod = importlib.import_module(module)
            if name is not None and not hasattr(mod, name):
                importlib.import_module(f"{module}.{name}")  # a submodule imported by name
        except ImportError as exc:
            bad.append(f"{path.relative_to(REPO)}:{line}: from {module} import {name}: {exc}")
    return bad


def check_help(path: Path) -> str | None:
    proc = subprocess.run(
        [sys.executable, str(path.relative_to(REPO)), "--help"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    want = HELP_EXIT.get(path.name, 0)
    if proc.returncode != want:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
        return f"{path.relative_to(REPO)} --help: exit {proc.returncode} (want {want}): {' '.join(tail)}"
    return None


def main() -> int:
    problems: list[str] = []
    for path in scripts():
        problems += check_imports(path)
        if path.name not in HELPERS:
            problem = check_help(path)
            status = "ok" if problem is None else "FAILED"
            print(f"{status:6s} {path.relative_to(REPO)} --help", flush=True)
            if problem:
                problems.append(problem)
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"{len(scripts())} scripts, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
