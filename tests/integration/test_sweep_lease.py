"""One writer per sweep (agent/sweep/lease.py): a second writer is refused naming the holder, a dead holder
is taken over, the lease works on SQLite and PostgreSQL, it is beaten through long waits, and a kill -9 of
`edgeprof run` leaves nothing running. Real processes, real tiny models, real databases; nothing mocked."""

from __future__ import annotations

import io
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text
from support.runs import (
    children_of,
    clean_env,
    edgeprof,
    one_line_error,
    pid_gone,
    running_runs,
    two_quant_plan,
    wait_for,
)

from edgeprof.plan import Collect, parse_plan
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Phase
from edgeprof.sweep import Telemetry, lease, run_plan
from edgeprof.sweep.lease import LeaseHeld, Owner, acquire


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Any]:
    eng = open_engine(tmp_path / "lease.db")
    yield eng
    eng.dispose()


def test_second_writer_is_refused_naming_the_holder_and_a_dead_holder_is_taken_over(engine: Any) -> None:
    first = acquire(engine, "plan:1:abc")
    other = Owner(host=Owner.me().host, pid=1, proc_start="x")  # pid 1 is alive, but not us: a live holder
    with pytest.raises(LeaseHeld, match=rf"pid {os.getpid()} on "):
        acquire(engine, "plan:1:abc", owner=other)
    first.release()
    acquire(engine, "plan:1:abc", owner=other)  # released: free to take
    # A dead pid on this host is taken over at once.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with engine.begin() as conn:
        conn.execute(text("UPDATE sweep_lease SET pid = :p, released_at = NULL"), {"p": dead.pid})
    acquire(engine, "plan:1:abc", owner=Owner(host=other.host, pid=2, proc_start="y"))


def test_the_lease_works_on_every_backend(any_db: str) -> None:
    """A row, not a file lock: the same exclusion on PostgreSQL as on SQLite."""
    eng = open_engine(any_db)
    key = f"plan:1:{os.getpid()}-{time.monotonic_ns()}"
    held = acquire(eng, key)
    other = Owner(host=Owner.me().host, pid=1, proc_start="x")
    with pytest.raises(LeaseHeld):
        acquire(eng, key, owner=other)
    held.beat(force=True)
    held.release()
    acquire(eng, key, owner=other).release()
    eng.dispose()


def test_kill_9_of_run_leaves_no_running_run_and_no_orphan_worker_and_a_second_writer_exits_2(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    db = tmp_path / "k.db"
    plan = tmp_path / "plan.toml"
    plan.write_text(two_quant_plan(tiny_models, timeout=300))
    proc = subprocess.Popen(
        [sys.executable, "-m", "edgeprof", "run", str(plan), "--db", str(db), "--no-telemetry"],
        env=clean_env("hang@decode:q8_0"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: running_runs(db) == 1 and children_of(proc.pid), what="a hanging worker")
        workers = children_of(proc.pid)
        # Another writer of the same plan: one line naming the holder, exit 2, nothing measured twice.
        second = edgeprof("run", str(plan), "--db", str(db), "--no-telemetry")
        assert f"pid {proc.pid}" in one_line_error(second)
        # status sees the live owner as running
        assert "running" in edgeprof("status", "--db", str(db)).stdout
        proc.kill()
        proc.wait(timeout=30)
        # The hung worker dies with its parent (PR_SET_PDEATHSIG), it is not left holding the model.
        wait_for(lambda: all(pid_gone(w) for w in workers), 20, "the orphaned worker to die")
        shown = edgeprof("status", "--db", str(db))
        assert shown.returncode == 0 and "interrupted" in shown.stdout and "is gone" in shown.stdout
        assert "now: run" not in shown.stdout
    finally:
        if proc.poll() is None:
            proc.kill()
    resumed = edgeprof("run", str(plan), "--db", str(db), "--no-telemetry")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT model_label, status FROM run ORDER BY id").fetchall()
        sweeps = conn.execute("SELECT status FROM sweep").fetchall()
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert ("q8", "interrupted") in rows and not [r for r in rows if r[1] == "running"]
    assert sorted(r for r in rows if r[1] == "ok") == [("q4", "ok"), ("q8", "ok")]
    assert sweeps == [("completed",)]


def test_the_lease_is_beaten_while_models_are_hashed_and_through_cooldowns(
    tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cooldown is the user's max_wait_s long, which may pass the lease's staleness limit: its waits must
    # beat the lease, or a second host takes a live sweep over. Every beat is recorded (no rate limit), and
    # each must find the database free to write (the sampler has no collectors, so nothing else writes):
    # a beat that meets the sweep's own open transaction waits out the busy timeout and is lost.
    beats: list[float] = []
    locked: list[str] = []
    original = lease.Lease.beat

    def beat(self: lease.Lease, force: bool = False) -> None:
        beats.append(time.monotonic())
        probe = sqlite3.connect(tmp_path / "s.db", timeout=0)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.rollback()
        except sqlite3.OperationalError as exc:
            locked.append(str(exc))
        finally:
            probe.close()
        original(self, force)

    monkeypatch.setattr(lease, "HEARTBEAT_EVERY_S", 0.0)
    monkeypatch.setattr(lease.Lease, "beat", beat)
    engine = open_engine(tmp_path / "s.db")
    # Two cold starts (the second child runs after the first one's results are stored) and two steady
    # reps with a cooldown before each config and between the steady reps, while the child waits.
    text_ = two_quant_plan(
        tiny_models, repeat={"cold": 2, "steady": 2}, tables={"cooldown": {"delay_s": 1.2, "per_rep": True}}
    )
    plan = parse_plan(text_, source=str(tmp_path / "p.toml"), base=tmp_path)

    def factory(sweep_id: int) -> Telemetry:
        return Telemetry(engine, sweep_id, Collect(interval_ms=200, idle_s=0.0), plan.cooldown, collectors=[])

    outcome = run_plan(engine, plan, out=io.StringIO(), env=clean_env(), telemetry=factory)
    assert outcome.counts == {"ok": 2}
    assert locked == [], f"{len(locked)} of {len(beats)} beats met a locked database: {locked[0]}"
    with new_session(engine) as session:
        waits = list(session.scalars(select(Phase).where(Phase.name == "cooldown")))
    # one before each config, one before each steady rep
    assert sorted(w.kind or "config" for w in waits) == ["config"] * 2 + ["steady"] * 4
    for w in waits:
        inside = [t for t in beats if w.t_start_mono <= t <= w.t_end_mono]
        assert len(inside) >= 2, (w.t_start_mono, w.t_end_mono, beats)  # at its start and every second
