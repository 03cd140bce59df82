"""Start of every worker process: die with the parent, never import from the user's working directory.

``python -m`` (and ``-c``) put the current directory first on ``sys.path``: a ``json.py`` in the folder where
someone runs ``edgeprof`` would run inside every worker. Python 3.11 has ``-P`` for that, 3.10 (JetPack 6)
has not, and ``-I`` would also drop ``PYTHONPATH`` and user site-packages; so the worker is started as
``python -c BOOTSTRAP``, whose first statement removes the current-directory entry before anything is
imported from it (``site`` and the editable install's ``.pth`` finder were processed at startup, before the
entry was added).

A worker hung inside llama.cpp must not outlive an agent killed with SIGKILL: ``PR_SET_PDEATHSIG`` makes
the kernel kill it when the parent dies, and a check of the parent pid closes the race of a parent that died
before the call.

A worker is its own process group (a terminal's Ctrl-C reaches the agent, which stops the worker itself, and
``killpg`` ends the worker with anything it started) but stays in the agent's session. A new session would
also be a new scheduler autogroup where the kernel has them (``/proc/sys/kernel/sched_autogroup_enabled``,
on by default in desktop and Jetson kernels): CFS then shares the CPUs between groups, not threads, and a
worker's n threads on all cores get one group's share beside any other busy group. Every llama.cpp barrier
then waits for a descheduled thread: measured on 2 cores beside one busy process, decode fell from
124-141 t/s to 1-4 t/s for llama-bench itself started under ``setsid``.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from typing import Any

PARENT_PID_ENV = "EDGEPROF_PARENT_PID"
PR_SET_PDEATHSIG = 1
EXIT_ORPHANED = 6

BOOTSTRAP = (
    "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
    "from edgeprof.runners.child_guard import main; main()"
)


def die_with_parent(parent_pid: int | None) -> bool:
    """Ask the kernel for SIGKILL when the parent dies; False where there is no prctl (not Linux)."""
    armed = False
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(EXIT_ORPHANED)  # the parent died before prctl took effect: nobody will read our results
    return armed


def own_process_group() -> dict[str, Any]:
    """``subprocess.Popen`` arguments for a child in a process group of its own, in the caller's session."""
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}  # 3.10 has no process_group; setpgrp is one async-signal-safe call


def main() -> None:
    raw = os.environ.get(PARENT_PID_ENV)
    die_with_parent(int(raw) if raw and raw.isdigit() else None)
    import runpy

    runpy.run_module("edgeprof.runners.llama_worker", run_name="__main__", alter_sys=True)
