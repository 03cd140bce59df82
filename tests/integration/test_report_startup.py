"""``edgeprof report`` without ``--html`` never loads matplotlib: the report package imports the figures
only when the HTML page draws them (a second of start-up on a Jetson for nothing otherwise)."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_report_package_loads_no_matplotlib() -> None:
    code = "import sys, edgeprof.report; print(sorted(m for m in sys.modules if m.startswith('matplotlib')))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]"
