"""Helpers of the tests that run edgeprof for real: a fresh ``edgeprof`` process and its one-line error, the
workers it starts, and the small plan those tests run (both quants of the tiny model, one short request).

    proc = edgeprof("run", str(plan), "--db", str(db), env=clean_env("hang@decode:q8_0"))
    assert "damaged" in one_line_error(proc)
"""

from __future__ import annotations

import io
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from edgeprof.runners import FAULT_ARM_ENV, FAULT_ENV
from support.plans import plan_toml


def two_quant_plan(
    models: Mapping[str, Path],
    *,
    name: str = "hard",
    timeout: float = 60,
    n_predict: int = 4,
    repeat: Mapping[str, Any] | None = None,
    run: Mapping[str, Any] | None = None,
    tables: Mapping[str, Mapping[str, Any]] | None = None,
    apart: bool = False,
) -> str:
    """Q8_0 (label q8) then Q4_K_M (q4) of the tiny models at ctx 256, one thread, 16 prompt tokens and
    ``n_predict`` generated; one cold and one steady rep, no warm-up, ``timeout`` s per config.
    ``apart``: each model in a group of its own, so the two are no rivals and q8 finishes before q4 starts
    (rivals with more than one block of steady reps are measured interleaved and finish together)."""
    entries: Any = {"q8": models["Q8_0"], "q4": models["Q4_K_M"]}
    if apart:
        entries = [{"path": str(path), "label": label, "group": label} for label, path in entries.items()]
    return plan_toml(
        entries,
        name=name,
        workloads=[{"name": "w", "prompt_tokens": 16, "n_predict": n_predict}],
        repeat={"cold": 1, "warmup": 0, "steady": 1, **(repeat or {})},
        run={"timeout_s": timeout, **(run or {})},
        tables=tables,
    )


def clean_env(fault: str | None = None, armed: bool = True) -> dict[str, str]:
    """This environment without a fault, systemd's variables, a terminal size or (``armed=False``) the
    suite's arming of fault injection; ``fault``: the worker fault to inject (``hang@decode:q8_0``, ...).
    pytest-xdist's workers carry COLUMNS=80 and LINES=24: passed on, they would make every piped edgeprof
    wrap its output as on an 80-column terminal, which a script reading it never sees (a test that wants a
    width sets COLUMNS itself)."""
    dropped = (FAULT_ENV, "NOTIFY_SOCKET", "WATCHDOG_USEC", "COLUMNS", "LINES")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    if fault:
        env[FAULT_ENV] = fault
    if not armed:
        env.pop(FAULT_ARM_ENV, None)
    return env


def sigint_as_at_a_terminal() -> None:
    """``preexec_fn`` of a child a test sends Ctrl-C: SIGINT with its default action, as a terminal's Ctrl-C
    finds it. A shell without job control starts ``cmd &`` with SIGINT ignored, and the child of a child
    inherits that: a suite started so would hand it to every edgeprof it runs, whose Ctrl-C does nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def edgeprof(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python -m edgeprof ARGS`` in a fresh process (``clean_env()`` unless ``env`` is given)."""
    return subprocess.run(
        [sys.executable, "-m", "edgeprof", *args],
        capture_output=True,
        text=True,
        env=env or clean_env(),
        timeout=timeout,
    )


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The one stderr line of an expected failure (exit 2, no traceback)."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def wait_for(predicate: Callable[[], Any], timeout_s: float = 60.0, what: str = "condition") -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def running_runs(db: Path) -> int:
    """Runs marked running in the SQLite file ``db`` (0 before the table exists)."""
    with sqlite3.connect(db) as conn:
        try:
            return int(conn.execute("SELECT count(*) FROM run WHERE status = 'running'").fetchone()[0])
        except sqlite3.OperationalError:
            return 0


def children_of(parent_pid: int) -> list[int]:
    """Workers started by ``parent_pid`` (their environment names it; see runners/child_guard.py)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if f"EDGEPROF_PARENT_PID={parent_pid}".encode() in environ.split(b"\0"):
            found.append(int(entry))
    return found


def pid_gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] == "Z"


def one_config_sweep(
    tmp_path: Path,
    model: Path,
    collect: Any,
    *,
    steady: int = 3,
    n_predict: int = 32,
    collectors: Any = None,
    tables: Mapping[str, Any] | None = None,
) -> Any:
    """One small generation config run in this process with live telemetry (``collect``, a ``Collect``;
    ``collectors``: built ones instead of the registry's), no cooldown and no armed fault; it must end ok.
    Returns the engine of ``tmp_path / "t.db"``, where the sweep is stored."""
    from edgeprof.plan import Cooldown, parse_plan
    from edgeprof.storage.db import open_engine
    from edgeprof.sweep import Telemetry, run_plan

    text = plan_toml(
        [model],
        workloads=[{"name": "w", "prompt_tokens": 16, "n_predict": n_predict}],
        repeat={"warmup": 0, "steady": steady},
        run={"timeout_s": 600},
        tables=tables,
    )
    plan = parse_plan(text, str(tmp_path / "p.toml"), tmp_path)
    engine = open_engine(tmp_path / "t.db")

    def factory(sweep_id: int) -> Telemetry:
        return Telemetry(engine, sweep_id, collect, Cooldown(delay_s=0.0), collectors=collectors)

    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    outcome = run_plan(engine, plan, out=io.StringIO(), telemetry=factory, env=env)
    assert outcome.counts == {"ok": 1}
    return engine
