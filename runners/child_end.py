"""How did a worker child end? One pure function from what the parent observed to a stored status and reason.

``runners/llama.py:run_child`` gathers the observations (the ``waitpid`` status, whether it killed the child
for a timeout or a stop request, the child's last ``error`` event, whether it reported ``done``, the log
tail); ``classify_child_end`` turns them into ``ok | load_failed | error | crashed | timeout | interrupted``
with a human reason. Pure, so every ending -- SIGILL from a wrong build, SIGKILL from the OOM killer, a hang,
a failed load, a non-zero exit -- is tested without starting a process.

Precedence, first match wins: a stop request (the user's, whatever the child did after) > our timeout kill >
death by a signal > the child's own error event (load or request) > a clean exit after ``done`` > any other
exit (a code the worker documents, or the bare number).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from edgeprof.runners.protocol import EXIT_BAD_SPEC, EXIT_LOAD_FAILED, EXIT_REQUEST_FAILED

SIGNAL_REASONS = {
    "SIGILL": "killed by SIGILL: this llama.cpp build uses CPU instructions this machine lacks "
    "(rebuild with scripts/setup.sh, which picks portable flags)",
    "SIGKILL": "killed by SIGKILL: most likely the kernel's OOM killer (model + KV cache too large for RAM; "
    "see `dmesg`), or killed by hand",
    "SIGSEGV": "crashed with SIGSEGV (invalid memory access inside llama.cpp or its backend)",
    "SIGBUS": "crashed with SIGBUS (the model file changed or shrank while mapped, or a bad mmap)",
    "SIGABRT": "aborted (SIGABRT): llama.cpp hit an assertion; the log tail says which",
    "SIGFPE": "crashed with SIGFPE (arithmetic fault inside llama.cpp)",
    "SIGTERM": "terminated by SIGTERM",
}

EXIT_MEANINGS = {
    EXIT_LOAD_FAILED: "load failed",
    EXIT_REQUEST_FAILED: "request failed",
    EXIT_BAD_SPEC: "bad job",
}


@dataclass(frozen=True)
class ChildEnd:
    status: str  # ok | load_failed | error | crashed | timeout | interrupted
    reason: str | None
    exit_code: int | None
    signal_name: str | None


def decode_wait_status(wait_status: int | None) -> tuple[int | None, str | None]:
    """``waitpid`` status -> (exit code, signal name); (None, None) when the child was never reaped."""
    if wait_status is None:
        return None, None
    if os.WIFSIGNALED(wait_status):
        sig = os.WTERMSIG(wait_status)
        try:
            return None, signal.Signals(sig).name
        except ValueError:
            return None, f"SIG{sig}"
    if os.WIFEXITED(wait_status):
        return os.WEXITSTATUS(wait_status), None
    return None, None


def last_error_line(log_tail: str) -> str | None:
    """The last log line that names an error, failure or assertion (llama.cpp's own words), at most 300
    characters; None if none does."""
    for line in reversed(log_tail.splitlines()):
        low = line.lower()
        if "error" in low or "failed" in low or "assert" in low:
            return line.strip()[:300]
    return None


def classify_child_end(
    *,
    wait_status: int | None,
    timed_out: bool,
    interrupted: bool,
    timeout_s: float,
    error_event: Mapping[str, Any] | None = None,
    done: bool = False,
    log_tail: str = "",
    injected_fault: str | None = None,
) -> ChildEnd:
    """Status and reason of one ended child (see the module docstring for the precedence)."""
    exit_code, signal_name = decode_wait_status(wait_status)
    if interrupted:
        status, reason = "interrupted", "stopped by the user (Ctrl-C / SIGTERM) during this run"
    elif timed_out:
        status, reason = "timeout", f"no result within the {timeout_s:g} s timeout; the child was killed"
    elif signal_name is not None:
        status, reason = "crashed", SIGNAL_REASONS.get(signal_name, f"killed by {signal_name}")
    elif error_event is not None:
        stage = error_event.get("stage")
        status = "load_failed" if stage == "load" else "error"
        detail = error_event.get("message") or "unknown error"
        hint = last_error_line(log_tail)
        reason = f"{stage}: {detail}" + (f" — {hint}" if hint and hint not in detail else "")
    elif exit_code == 0 and done:
        status, reason = "ok", None
    else:
        status = "error"
        what = EXIT_MEANINGS.get(exit_code if exit_code is not None else -1, f"exited with code {exit_code}")
        hint = last_error_line(log_tail)
        reason = f"worker {what} before finishing" + (f" — {hint}" if hint else "")
    if injected_fault is not None and status != "ok":
        # Never stored as a real crash, OOM kill or hang: the reason says the test suite caused it.
        reason = f"injected by the test suite ({injected_fault}): {reason}"
    return ChildEnd(status, reason, exit_code, signal_name)
