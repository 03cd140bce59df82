"""Parent side of a llama.cpp run: spawn the worker, enforce the timeout, turn any ending into a result.

Each child is a fresh process in its own session (so a terminal's Ctrl-C reaches only the agent, which then
stops the child itself). A child that dies by a signal, hangs past its timeout or fails to load still gives a
``ChildResult`` with a status and a human reason: the sweep stores it and goes on.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.runners.child_end import classify_child_end
from edgeprof.runners.child_guard import BOOTSTRAP, PARENT_PID_ENV, own_process_group
from edgeprof.runners.protocol import vm_hwm_mb

PROJECT_ROOT = Path(__file__).resolve().parents[1]
LOG_TAIL_BYTES = 4000


@dataclass
class ChildResult:
    """Everything one worker process said before it ended, and how it ended."""

    status: str  # ok | load_failed | error | crashed | timeout | interrupted
    reason: str | None
    exit_code: int | None
    signal_name: str | None
    t_spawn: float
    t_exit: float
    peak_rss_mb: float | None
    hello: dict[str, Any] | None = None
    loaded: dict[str, Any] | None = None
    measurements: list[dict[str, Any]] = field(default_factory=list)
    phases: list[dict[str, Any]] = field(default_factory=list)
    log_tail: str = ""
    injected_fault: str | None = None  # EDGEPROF_TEST_FAULT spec the worker acted on (tests only)


def worker_command() -> list[str]:
    # Not ``-m``: that puts the working directory first on sys.path (see runners/child_guard.py).
    return [sys.executable, "-c", BOOTSTRAP]


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - LOG_TAIL_BYTES))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def run_child(
    job: dict[str, Any],
    timeout_s: float,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    env: dict[str, str] | None = None,
    heartbeat: Callable[[], None] | None = None,
    between_reps: Callable[[dict[str, Any]], float] | None = None,
    command: list[str] | None = None,
) -> ChildResult:
    """Run one worker process for ``job`` and wait for it, at most ``timeout_s`` seconds.

    ``command`` is another worker speaking the same protocol (the quality worker); default: llama_worker.
    The steps: spawn, send the job, watch (events, timeout, heartbeat, Ctrl-C), reap and classify the end.
    """
    child = _spawn(command or worker_command(), env)
    paced = bool(job.get("pause_between_reps")) and between_reps is not None
    _send_job(child.proc, job, keep_open=paced)
    events = _Events(child, child.t_spawn + timeout_s, on_event, between_reps if paced else None)
    timed_out, interrupted = _watch(child, events, heartbeat)
    result = _finish(child, events, timed_out=timed_out, interrupted=interrupted, timeout_s=timeout_s)
    if interrupted:
        raise RunInterrupted(result)
    return result


@dataclass
class _Child:
    """A started worker: the process, the read end of its event pipe, the file its output goes to."""

    proc: subprocess.Popen[bytes]
    event_fd: int
    log_path: Path
    t_spawn: float


def _spawn(command: list[str], env: dict[str, str] | None) -> _Child:
    """Start the worker in its own session, events on a pipe, stdout and stderr into a temporary log."""
    read_fd, write_fd = os.pipe()
    log_file = tempfile.NamedTemporaryFile(prefix="edgeprof-worker-", suffix=".log", delete=False)  # noqa: SIM115
    child_env = dict(os.environ if env is None else env)
    child_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(PROJECT_ROOT), child_env.get("PYTHONPATH", "")) if p
    )
    child_env[PARENT_PID_ENV] = str(os.getpid())  # the child dies with us (PR_SET_PDEATHSIG + this check)
    t_spawn = time.monotonic()
    proc = subprocess.Popen(
        [*command, "--event-fd", str(write_fd)],
        stdin=subprocess.PIPE,
        stdout=log_file,
        stderr=log_file,
        pass_fds=(write_fd,),
        **own_process_group(),  # not a new session: see child_guard
        env=child_env,
        close_fds=True,
    )
    os.close(write_fd)
    log_file.close()
    return _Child(proc, read_fd, Path(log_file.name), t_spawn)


def _send_job(proc: subprocess.Popen[bytes], job: dict[str, Any], keep_open: bool) -> None:
    """The job as one JSON line; stdin stays open only when the parent paces the reps ("go" lines)."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps(job).encode() + b"\n")
        proc.stdin.flush()
        if not keep_open:
            proc.stdin.close()
    except BrokenPipeError:
        pass


class _Events:
    """What the child has said so far, sorted into the result, and the deadline its cooldowns moved."""

    def __init__(
        self,
        child: _Child,
        deadline: float,
        on_event: Callable[[dict[str, Any]], None] | None,
        between_reps: Callable[[dict[str, Any]], float] | None,  # None unless the reps are paced
    ) -> None:
        self.child = child
        self.deadline = deadline
        self.on_event = on_event
        self.between_reps = between_reps
        self.result = ChildResult(
            status="error",
            reason=None,
            exit_code=None,
            signal_name=None,
            t_spawn=child.t_spawn,
            t_exit=child.t_spawn,
            peak_rss_mb=None,
        )
        self.error_event: dict[str, Any] | None = None
        self.done = False
        self.peak_mb: float | None = None

    def poll_peak(self) -> None:
        now = vm_hwm_mb(self.child.proc.pid)
        if now is not None and (self.peak_mb is None or now > self.peak_mb):
            self.peak_mb = now

    def handle(self, line: bytes) -> None:
        self.poll_peak()
        try:
            event = json.loads(line)
        except ValueError:
            return
        kind = event.get("event")
        result = self.result
        if kind == "hello":
            result.hello = event
        elif kind == "loaded":
            result.loaded = event
        elif kind == "measurement":
            result.measurements.append(event)
        elif kind == "phase":
            result.phases.append(event)
        elif kind == "error":
            self.error_event = event
        elif kind == "done":
            self.done = True
        elif kind == "fault_injected":
            result.injected_fault = str(event.get("spec"))
        elif kind == "await" and self.between_reps is not None:
            self._resume_after(self.between_reps, event)
        if self.on_event is not None:
            self.on_event(event)

    def _resume_after(self, between_reps: Callable[[dict[str, Any]], float], event: dict[str, Any]) -> None:
        # The child waits while the device cools down; that time is not the run's, so the timeout moves.
        self.deadline += between_reps(event)
        try:
            stdin = self.child.proc.stdin
            assert stdin is not None
            stdin.write(b"go\n")
            stdin.flush()
        except (BrokenPipeError, ValueError):
            pass


def _watch(child: _Child, events: _Events, heartbeat: Callable[[], None] | None) -> tuple[bool, bool]:
    """Read events until the child closes its end, the deadline passes or Ctrl-C arrives; a child that
    timed out or was interrupted is stopped. Returns (timed_out, interrupted)."""
    timed_out = interrupted = False
    buffer = b""
    sel = selectors.DefaultSelector()
    sel.register(child.event_fd, selectors.EVENT_READ)
    try:
        eof = False
        while not eof:
            if heartbeat is not None:
                heartbeat()  # proves to a watchdog that this loop, not just some thread, is alive
            events.poll_peak()
            remaining = events.deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for _key, _mask in sel.select(timeout=min(remaining, 1.0)):
                chunk = os.read(child.event_fd, 65536)
                if not chunk:
                    eof = True
                    break
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    events.handle(line)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        sel.close()
        os.close(child.event_fd)
        if child.proc.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                child.proc.stdin.close()
        if timed_out or interrupted:
            _stop(child.proc.pid)
    return timed_out, interrupted


def _finish(
    child: _Child, events: _Events, *, timed_out: bool, interrupted: bool, timeout_s: float
) -> ChildResult:
    """Reap the child, keep its log tail and peak memory, and classify how it ended."""
    result = events.result
    status_code, _rusage = _wait(child.proc.pid, grace_s=10.0)
    child.proc.returncode = status_code
    result.t_exit = time.monotonic()
    # The child's own last word on its peak (sent with each event) beats our last poll; NULL if neither.
    reported = [e.get("peak_rss_mb") for e in result.measurements if e.get("peak_rss_mb") is not None]
    result.peak_rss_mb = max([v for v in (events.peak_mb, *reported) if v is not None], default=None)
    result.log_tail = _tail(child.log_path)
    with contextlib.suppress(OSError):
        child.log_path.unlink()
    end = classify_child_end(
        wait_status=status_code,
        timed_out=timed_out,
        interrupted=interrupted,
        timeout_s=timeout_s,
        error_event=events.error_event,
        done=events.done,
        log_tail=result.log_tail,
        injected_fault=result.injected_fault,
    )
    result.status, result.reason = end.status, end.reason
    result.exit_code, result.signal_name = end.exit_code, end.signal_name
    return result


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C/SIGTERM arrived during a run; carries what the child had reported so it can be stored."""

    def __init__(self, result: ChildResult) -> None:
        super().__init__("interrupted")
        self.result = result


def _stop(pid: int, grace_s: float = 3.0) -> None:
    """SIGTERM the child's process group, then SIGKILL whatever is left after ``grace_s``."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    end = time.monotonic() + grace_s
    while time.monotonic() < end:
        try:
            done_pid, status, rusage = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done_pid == 0:
            time.sleep(0.05)
            continue
        _REAPED[pid] = (status, rusage)  # reaped here; _wait picks the status up
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


_REAPED: dict[int, tuple[int, Any]] = {}


def _wait(pid: int, grace_s: float) -> tuple[int | None, Any]:
    """Reap the child (its status; the resource usage is kept for callers that want CPU times)."""
    if pid in _REAPED:
        return _REAPED.pop(pid)
    end = time.monotonic() + grace_s
    while True:
        try:
            done_pid, status, rusage = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            return None, None
        if done_pid == pid:
            return status, rusage
        if time.monotonic() > end:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            _pid, status, rusage = os.wait4(pid, 0)
            return status, rusage
        time.sleep(0.02)
