"""Real device captures (``tests/fixtures/captures``, each with its public source). A fake device root to
replay one into is ``support.fakes.FakeRoot``."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.paths import CAPTURES, SYSFS_CAPTURES, TEGRASTATS_CAPTURES

__all__ = ["CAPTURES", "SYSFS_CAPTURES", "TEGRASTATS_CAPTURES", "capture_path", "read_capture"]


def capture_path(name: str, folder: Path = SYSFS_CAPTURES) -> Path:
    """The path of one capture; a capture the repository should carry and does not is a failure."""
    path = folder / name
    if not path.is_file():
        pytest.fail(f"capture {path} is missing from the repository (tests/fixtures/captures)")
    return path


def read_capture(name: str, folder: Path = SYSFS_CAPTURES) -> list[str]:
    """The lines of a capture after its ``# source:`` line."""
    lines = capture_path(name, folder).read_text().splitlines()
    assert lines[0].startswith("# source:")
    return lines[1:]

