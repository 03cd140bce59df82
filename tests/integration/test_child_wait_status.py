"""The ``waitpid`` encoding that tests/unit/runners/test_child_end.py simulates (exit code << 8, or the signal
number), pinned on a real child process killed by a signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from edgeprof.runners.child_end import decode_wait_status

pytestmark = pytest.mark.timeout(60)


def test_the_encoding_matches_a_real_child_killed_by_a_signal() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    _, status = os.waitpid(proc.pid, 0)
    proc.returncode = 0  # reaped here: keep Popen from waiting again
    assert status == int(signal.SIGSEGV)
    assert decode_wait_status(status) == (None, "SIGSEGV")
