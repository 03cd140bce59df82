"""Shared test helpers: real device captures from ../shared/captures (never copied into the project) and
writing small sysfs trees under a test's root."""

from __future__ import annotations

from pathlib import Path

import pytest

CAPTURES = Path(__file__).resolve().parents[2] / "shared" / "captures"
SYSFS_CAPTURES = CAPTURES / "sysfs"


def read_capture(name: str, folder: Path = SYSFS_CAPTURES) -> list[str]:
    """The lines of a capture after its ``# source:`` line; skips the test where the captures are absent."""
    path = folder / name
    if not path.is_file():
        pytest.skip(f"capture {path} is absent (the shared captures live next to the project checkout)")
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# source:")
    return lines[1:]


def write(path: Path, text: str) -> None:
    """Write one sysfs-style file (value plus newline), creating its folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
