"""Where the repository's own test inputs live (a fresh clone carries all of them)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / "tests" / "fixtures"
CAPTURES = FIXTURES / "captures"
SYSFS_CAPTURES = CAPTURES / "sysfs"
TEGRASTATS_CAPTURES = CAPTURES / "tegrastats"
