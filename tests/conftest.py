"""Shared fixtures.

- ``tiny_models``: the tiny demo models (F16, Q8_0, Q5_K_M, Q4_K_M), built once per test session.
- ``write_plan``: write TOML text to a plan file under the test's ``tmp_path``.
"""

from __future__ import annotations

# The worker's fault injection (EDGEPROF_TEST_FAULT) works only when armed; only the test suite arms it.
import os as _os
from collections.abc import Callable
from pathlib import Path

import pytest

from edgeprof.gguf import build_demo_models
from edgeprof.runners import FAULT_ARM_ENV, FAULT_ARM_VALUE

_os.environ[FAULT_ARM_ENV] = FAULT_ARM_VALUE

# PostgreSQL fixtures (pg_server_url, pg_db_url, any_db): storage tests run on both backends.
from support.pg_server import any_db, pg_db_url, pg_server_url  # noqa: F401


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """quant name -> path of the tiny demo GGUF files (shared by the whole session: copy before changing)."""
    out = tmp_path_factory.mktemp("tiny-models")
    return build_demo_models(out, "tiny")


@pytest.fixture
def write_plan(tmp_path: Path) -> Callable[..., Path]:
    """``write_plan(text, name="plan.toml")`` writes ``text`` under ``tmp_path``; returns the path."""

    def write(text: str, name: str = "plan.toml") -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Captured output as text UTF-8 can carry: tests feed edgeprof undecodable names on purpose, and a lone
    surrogate in a captured log or stream would stop pytest-xdist, which sends each report between its
    processes as UTF-8, from reporting the test at all."""
    report.sections = [
        (title, text.encode("utf-8", "backslashreplace").decode("utf-8")) for title, text in report.sections
    ]
