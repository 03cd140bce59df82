"""Workers and servers start in a process group of their own, inside the agent's session.

A new session is a new scheduler autogroup on kernels that have them: the worker's threads would then share
one group's CPU time beside any other busy group, and every llama.cpp barrier waits for a descheduled thread
(decode on 2 cores beside one busy process fell from about 130 t/s to under 5). A process group of its own
keeps a terminal's Ctrl-C away from the worker and lets ``killpg`` end it with what it started.
"""

from __future__ import annotations

import os
import signal
import sys

import pytest

from edgeprof.runners.child_guard import own_process_group
from edgeprof.runners.llama import _spawn
from edgeprof.runners.llama_server import _Server

SLEEPER = [sys.executable, "-c", "import time; time.sleep(30)"]


def _end(pid: int) -> None:
    os.killpg(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


@pytest.mark.timeout(30)
def test_a_worker_is_its_own_process_group_in_the_agents_session() -> None:
    child = _spawn(SLEEPER, env=None)
    try:
        pid = child.proc.pid
        assert os.getpgid(pid) == pid
        assert os.getpgid(pid) != os.getpgid(0)
        assert os.getsid(pid) == os.getsid(0)
    finally:
        os.close(child.event_fd)
        _end(child.proc.pid)
        child.log_path.unlink(missing_ok=True)


@pytest.mark.timeout(30)
def test_a_server_is_its_own_process_group_in_the_agents_session() -> None:
    server = _Server(SLEEPER, env=None)
    try:
        pid = server.proc.pid
        assert os.getpgid(pid) == pid
        assert os.getsid(pid) == os.getsid(0)
    finally:
        server.stop(grace_s=1.0)
        server.log_path.unlink(missing_ok=True)
    assert server.proc.returncode == -signal.SIGTERM


def test_the_spawn_arguments_never_ask_for_a_new_session() -> None:
    kwargs = own_process_group()
    assert "start_new_session" not in kwargs
    assert kwargs in ({"process_group": 0}, {"preexec_fn": os.setpgrp})
