"""Sweep progress as a person sees it: a real sweep under a pseudo-terminal (40 and 160 columns), its screen
replayed with pyte, and the same sweep without a terminal (plain lines, no control characters)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from support.plans import write_plan_file

pyte = pytest.importorskip("pyte")

EDGEPROF = [sys.executable, "-m", "edgeprof"]
# Header lines (system-check warnings, the bandwidth probe) may come before the first record, never between.
RECORDS = r"edgeprof.*?2configs.*?(\[\d/2\]run\d+q\d.*?ok.*?ETA\d+:\d\d\))+sweep\d+:2ok"

pytestmark = pytest.mark.timeout(300)


def progress_plan(tmp_path: Path, models: dict[str, Path]) -> Path:
    """Two small configs, written where ``edgeprof run`` reads them."""
    return write_plan_file(
        tmp_path / "plan.toml",
        {"q8": models["Q8_0"], "q4": models["Q4_K_M"]},
        name="progress",
        workloads=[{"name": "w", "prompt_tokens": 16, "n_predict": 4}],
        run={"timeout_s": 120},
    )


def _run_in_pty(args: list[str], cols: int, rows: int = 60, timeout_s: float = 180) -> tuple[int, bytes]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env["TERM"] = "xterm-256color"
    proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed its side
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return code, b"".join(chunks)


def _screen(raw: bytes, cols: int, rows: int = 60) -> list[str]:
    screen = pyte.Screen(cols, rows)
    stream = pyte.ByteStream(screen)
    stream.feed(raw.replace(b"\n", b"\r\n") if b"\r\n" not in raw else raw)
    return [line.rstrip() for line in screen.display]


@pytest.mark.llama
@pytest.mark.parametrize("cols", [40, 160])
def test_a_sweep_under_a_terminal_leaves_no_stale_lines(tmp_path: Path, tiny_models, cols: int) -> None:
    plan = progress_plan(tmp_path, tiny_models)
    code, raw = _run_in_pty(
        [*EDGEPROF, "run", str(plan), "--db", str(tmp_path / "p.db"), "--no-telemetry"],
        cols,
    )
    lines = [line for line in _screen(raw, cols) if line]
    text = "\n".join(lines)
    assert code == 0, text
    assert all(len(line) <= cols for line in lines)
    # The live line is gone at the end: only finished records (possibly wrapped) remain.
    assert "running" not in text and "starting" not in text and "ETA ?" not in text
    # Undo the wrapping at 40 columns: what is left must be exactly the finished records, nothing between them
    # (a half-cleared live line leaves a fragment such as "[1/2] q8 ctx=256 ngl=0 t=1 b=5" behind).
    joined = "".join(lines).replace(" ", "")
    assert re.fullmatch(RECORDS, joined), text
    for i in (1, 2):
        assert joined.count(f"[{i}/2]") == 1, text


@pytest.mark.llama
def test_without_a_terminal_progress_is_plain_lines(tmp_path: Path, tiny_models) -> None:
    plan = progress_plan(tmp_path, tiny_models)
    proc = subprocess.run(
        [*EDGEPROF, "run", str(plan), "--db", str(tmp_path / "p.db"), "--no-telemetry"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\r" not in proc.stdout
    lines = proc.stdout.splitlines()
    assert any(line.startswith("[1/2]") and "running" in line for line in lines)
    assert any(line.startswith("[1/2]") and "steady rep" in line for line in lines)
    assert sum(1 for line in lines if line.startswith("[2/2] run") and "ok" in line) == 1
