"""Fault injection for the unattended agent (agent/daemon/agent.py), bounded in time: kill -9 and restart,
SIGTERM, SIGHUP, a concurrent reader, bad plans, corrupt models, the disk guard, sd_notify; a dead owner's
runs reconciled (never a live one's), a symlinked plan, a second agent on a queue, a plan removed while it
runs, and a database damaged after the agent started. Real processes, real tiny models, real SQLite."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from support.plans import plan_toml
from support.runs import edgeprof, one_line_error, two_quant_plan

from edgeprof.daemon import Agent, AgentConfig, recover_interrupted
from edgeprof.runners import FAULT_ENV
from edgeprof.safefs import QueueLocked, lock_queue
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Device, Run, Sweep, SweepLease
from edgeprof.sweep import Owner, reconcile_dead_owners

llama = pytest.mark.llama


def agent_plan(model: Path, n_predict: int) -> str:
    """Four ctx sizes of one model (four configs), two steady reps, telemetry every 50 ms."""
    return plan_toml(
        [model],
        name="agent-test",
        ctx=[512, 576, 640, 704],
        workloads=[{"name": "w", "prompt_tokens": 16, "n_predict": n_predict}],
        repeat={"warmup": 0, "steady": 2},
        run={"timeout_s": 600},  # the parser's default: this plan once had no [run] table
        tables={"collect": {"interval_ms": 50, "idle_s": 0.3}},
    )


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in (FAULT_ENV, "NOTIFY_SOCKET", "WATCHDOG_USEC")}
    e.update(extra)
    return e


def start_agent(
    args: list[str], db: Path | str, environ: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "edgeprof", "agent", "--db", str(db), *args],
        env=environ or env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def query(db: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def wait_for(cond: Callable[[], bool], timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            if cond():
                return
        except (sqlite3.OperationalError, IndexError):
            pass  # table or row not created yet
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


@llama
def test_kill_9_mid_sweep_then_restart_loses_nothing_and_duplicates_nothing(
    tmp_path: Path, tiny_models
) -> None:
    db = tmp_path / "k.db"
    plan = tmp_path / "plan.toml"
    plan.write_text(agent_plan(tiny_models["Q4_K_M"], n_predict=400))
    proc = start_agent(["--plan", str(plan)], db)
    try:
        wait_for(lambda: query(db, "SELECT count(*) FROM run WHERE status = 'ok'")[0][0] >= 1)
        wait_for(lambda: query(db, "SELECT count(*) FROM run WHERE status = 'running'")[0][0] == 1)
        time.sleep(0.3)  # in the middle of a run and of sample writes
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    before_ok = query(db, "SELECT id, spec_id FROM run WHERE status = 'ok' ORDER BY id")
    before_meas = query(db, "SELECT run_id, count(*) FROM measurement GROUP BY run_id ORDER BY run_id")
    before_samples = query(db, "SELECT count(*) FROM sample")[0][0]
    assert query(db, "PRAGMA integrity_check") == [("ok",)]

    again = start_agent(["--plan", str(plan)], db)
    _out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert "Traceback" not in err
    assert "marked 1 run(s) left running" in err
    runs = query(db, "SELECT spec_id, status FROM run ORDER BY id")
    ok_specs = [s for s, st in runs if st == "ok"]
    assert len(ok_specs) == len(set(ok_specs)) == 4  # every config once, none twice
    assert [st for _s, st in runs].count("interrupted") == 1
    reason = query(db, "SELECT reason FROM run WHERE status = 'interrupted'")[0][0]
    assert "agent stopped during this run" in reason
    after_ok = query(db, "SELECT id, spec_id FROM run WHERE status = 'ok' ORDER BY id")
    assert after_ok[: len(before_ok)] == before_ok  # finished runs were not redone
    after_meas = dict(query(db, "SELECT run_id, count(*) FROM measurement GROUP BY run_id"))
    assert all(after_meas[run_id] == n for run_id, n in before_meas)  # nothing stored was lost
    assert query(db, "SELECT count(*) FROM sample")[0][0] >= before_samples
    assert query(db, "PRAGMA integrity_check") == [("ok",)]


@llama
def test_sigterm_marks_the_run_interrupted_and_exits_0(tmp_path: Path, tiny_models) -> None:
    db = tmp_path / "t.db"
    plan = tmp_path / "plan.toml"
    plan.write_text(agent_plan(tiny_models["Q8_0"], n_predict=60))
    proc = start_agent(["--plan", str(plan)], db, env(**{FAULT_ENV: "hang@decode"}))
    try:
        wait_for(lambda: query(db, "SELECT count(*) FROM run WHERE status = 'running'")[0][0] == 1)
        time.sleep(1.5)  # the child has loaded and now hangs in decode
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert query(db, "SELECT status FROM run") == [("interrupted",)]
    assert query(db, "SELECT status FROM sweep") == [("interrupted",)]
    assert query(db, "SELECT stopped_at IS NOT NULL FROM agent_state") == [(1,)]


@llama
def test_queue_bad_plans_corrupt_models_and_a_concurrent_reader(tmp_path: Path, tiny_models) -> None:
    queue = tmp_path / "queue"
    queue.mkdir()
    db = tmp_path / "q.db"
    corrupt = tmp_path / "corrupt.gguf"
    corrupt.write_bytes(b"GGUF" + os.urandom(200))
    (queue / "1-every-error.toml").write_text(
        'nme = "x"\n[matrix]\nmodels = ["/nope.gguf"]\nctx = [8]\nngl = [-1]\n'
        '[[workload]]\nprompt_tokens = 64\nn_predict = "many"\n'
        '[[workload]]\nname = "ok"\nprompt_tokens = 64\nn_predict = 10\n'
    )
    (queue / "2-corrupt-model.toml").write_text(agent_plan(corrupt, n_predict=4))
    (queue / "3-malformed.toml").write_text("[matrix\n")
    (queue / "4-good.toml").write_text(agent_plan(tiny_models["Q4_K_M"], n_predict=40))
    for i, p in enumerate(sorted(queue.glob("*.toml"))):
        os.utime(p, (1_000_000 + i, 1_000_000 + i))

    # A reader holding a read transaction open for the whole sweep: WAL lets the agent write regardless.
    proc = start_agent(["--queue", str(queue), "--once", "--poll-s", "1"], db)
    reader = None
    try:
        wait_for(lambda: db.exists() and query(db, "SELECT count(*) FROM agent_state")[0][0] >= 1)
        reader = sqlite3.connect(db, timeout=1)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM run").fetchall()
        status_runs = []
        while proc.poll() is None:
            st = subprocess.run(
                [sys.executable, "-m", "edgeprof", "status", "--json", "--db", str(db)],
                capture_output=True,
                text=True,
                timeout=60,
                env=env(),
            )
            assert st.returncode == 0, st.stderr
            assert "locked" not in st.stderr
            status_runs.append(json.loads(st.stdout))
            time.sleep(0.3)
        _out, err = proc.communicate(timeout=120)
    finally:
        if reader is not None:
            reader.close()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    failed = sorted(p.name for p in (queue / "failed").glob("*.toml"))
    done = sorted(p.name for p in (queue / "done").glob("*.toml"))
    assert [n.split("-")[0] for n in failed] == ["1", "2", "3"]
    assert [n.split("-")[0] for n in done] == ["4"]
    every = next((queue / "failed").glob("1-*.error.txt")).read_text()
    for needle in ("nme: unknown key", "no such file", "negative -ngl", "n_predict", "ctx 8 <"):
        assert needle in every
    assert (
        "not a GGUF" in next((queue / "failed").glob("2-*.error.txt")).read_text()
        or "corrupt" in next((queue / "failed").glob("2-*.error.txt")).read_text()
    )
    assert "malformed TOML" in next((queue / "failed").glob("3-*.error.txt")).read_text()
    assert query(db, "SELECT DISTINCT status FROM run") == [("ok",)]
    assert any(s["agent"] and s["agent"]["alive"] for s in status_runs)


@llama
def test_the_agent_runs_a_plan_into_either_backend(tmp_path: Path, tiny_models, any_db: str) -> None:
    """SQLite and PostgreSQL (a fleet's central DB): the agent writes a sweep, `status` and `report` read it
    back."""
    from sqlalchemy import create_engine, text

    plan = tmp_path / "plan.toml"
    plan.write_text(agent_plan(tiny_models["Q4_K_M"], n_predict=4))
    proc = start_agent(["--plan", str(plan), "--once", "--no-telemetry"], any_db)
    try:
        _out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    engine = create_engine(any_db if "://" in any_db else f"sqlite:///{any_db}")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT DISTINCT status FROM run")).all() == [("ok",)]
        assert conn.execute(text("SELECT count(*) FROM run")).scalar() == 4
    engine.dispose()
    for args in (["status", "--json"], ["report", "--format", "json"]):
        done = subprocess.run(
            [sys.executable, "-m", "edgeprof", *args, "--db", any_db],
            capture_output=True,
            text=True,
            timeout=120,
            env=env(),
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)


@llama
def test_disk_guard_pauses_and_says_why(tmp_path: Path, tiny_models) -> None:
    db = tmp_path / "d.db"
    plan = tmp_path / "plan.toml"
    plan.write_text(agent_plan(tiny_models["Q4_K_M"], n_predict=4))
    proc = start_agent(["--plan", str(plan), "--min-free-mb", str(10**9), "--poll-s", "0.5"], db)
    try:
        wait_for(lambda: query(db, "SELECT state, message FROM agent_state")[0][0] == "paused")
        message = query(db, "SELECT message FROM agent_state")[0][0]
        st = subprocess.run(
            [sys.executable, "-m", "edgeprof", "status", "--db", str(db)],
            capture_output=True,
            text=True,
            env=env(),
        )
        assert "MiB free" in st.stdout and "paused" in st.stdout
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert "MiB free" in message
    assert query(db, "SELECT count(*) FROM run") == [(0,)]


@llama
def test_sighup_rereads_the_queue_now(tmp_path: Path, tiny_models) -> None:
    queue = tmp_path / "queue"
    queue.mkdir()
    db = tmp_path / "h.db"
    proc = start_agent(["--queue", str(queue), "--poll-s", "600", "--no-telemetry"], db)
    try:
        wait_for(lambda: query(db, "SELECT state FROM agent_state")[0][0] == "idle")
        (queue / "late.toml").write_text(agent_plan(tiny_models["Q4_K_M"], n_predict=4))
        proc.send_signal(signal.SIGHUP)
        wait_for(
            lambda: any((queue / "done").glob("late-*.toml")) if (queue / "done").exists() else False, 60
        )
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0


@llama
def test_sd_notify_ready_status_and_watchdog(tmp_path: Path, tiny_models) -> None:
    sock_path = tmp_path / "notify.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(str(sock_path))
    server.settimeout(0.2)
    plan = tmp_path / "plan.toml"
    plan.write_text(agent_plan(tiny_models["Q4_K_M"], n_predict=400))
    proc = start_agent(
        ["--plan", str(plan), "--no-telemetry"],
        tmp_path / "n.db",
        env(NOTIFY_SOCKET=str(sock_path), WATCHDOG_USEC="2000000"),
    )
    messages: list[str] = []
    try:
        while proc.poll() is None:
            with contextlib.suppress(TimeoutError):
                messages.append(server.recv(4096).decode())
        proc.communicate(timeout=30)
    finally:
        server.close()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert "READY=1" in messages
    assert any(m.startswith("STATUS=running") for m in messages)
    assert "WATCHDOG=1" in messages  # fed while the run's loop made progress


# -- a dead owner's runs are reconciled at start, never a live one's ------------------------------------


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Any]:
    eng = open_engine(tmp_path / "lease.db")
    yield eng
    eng.dispose()


def _sweep_with_lease(session: Any, pid: int, proc_start: str | None, host: str) -> Sweep:
    device = session.scalars(select(Device)).first() or Device(
        fingerprint="f" * 64, hostname="h", arch="x86_64", facts_json="{}", first_seen=utcnow()
    )
    session.add(device)
    session.flush()
    sweep = Sweep(
        name="s",
        plan_text="",
        plan_hash=str(pid),
        device_id=device.id,
        edgeprof_version="t",
        started_at=utcnow(),
        status="running",
        n_specs=1,
    )
    session.add(sweep)
    session.flush()
    session.add(
        Run(
            sweep_id=sweep.id,
            spec_id="a",
            seq=1,
            model_label="m",
            model_group="g",
            model_path="/m",
            workload_name="w",
            workload_hash="h",
            workload_json="{}",
            params_json="{}",
            repeat_json="{}",
            n_ctx=1,
            n_gpu_layers=0,
            n_threads=1,
            n_batch=1,
            n_ubatch=1,
            flash_attn="off",
            type_k="f16",
            type_v="f16",
            use_mmap=True,
            status="running",
            started_at=utcnow(),
        )
    )
    session.add(
        SweepLease(
            lease_key=f"plan:{pid}",
            sweep_id=sweep.id,
            token="t",
            host=host,
            pid=pid,
            proc_start=proc_start,
            acquired_at=utcnow(),
            heartbeat_at=utcnow(),
            released_at=None,
        )
    )
    session.commit()
    return sweep


def test_agent_start_reconciles_only_dead_owners_never_a_live_one(engine: Any) -> None:
    me = Owner.me()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with new_session(engine) as session:
        live = _sweep_with_lease(session, me.pid, me.proc_start, me.host)
        gone = _sweep_with_lease(session, dead.pid, None, me.host)
        assert recover_interrupted(session) == 1
    with new_session(engine) as session:
        assert session.get(Sweep, live.id).status == "running"  # a live owner keeps its sweep and run
        assert session.get(Sweep, gone.id).status == "interrupted"
        statuses = dict(session.execute(select(Run.sweep_id, Run.status)).all())
        assert statuses == {live.id: "running", gone.id: "interrupted"}
        assert reconcile_dead_owners(session) == {}


# -- the queue: symlinked plans, one agent per queue, plans removed while they run ------------------------


def test_agent_rejects_a_symlinked_plan_without_revealing_its_target(tmp_path: Path) -> None:
    queue = tmp_path / "queue"
    queue.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("[[[ root:$6$supersecret")
    (queue / "evil.toml").symlink_to(secret)
    db = str(tmp_path / "a.db")
    proc = edgeprof("agent", "--queue", str(queue), "--db", db, "--once", "--no-telemetry")
    assert proc.returncode == 0, proc.stderr[-1500:]
    failed = list((queue / "failed").iterdir())
    assert secret.read_text() == "[[[ root:$6$supersecret" and not (queue / "evil.toml").exists()
    text_all = "".join(p.read_text() for p in failed)
    assert "supersecret" not in text_all and "symbolic link" in text_all


def test_a_second_agent_on_a_queue_exits_2_naming_the_first(tmp_path: Path) -> None:
    queue = tmp_path / "q"
    queue.mkdir()
    held = lock_queue(queue)
    try:
        with pytest.raises(QueueLocked, match=rf"pid {os.getpid()}"):
            lock_queue(queue)
        proc = edgeprof("agent", "--queue", str(queue), "--db", str(tmp_path / "a.db"), "--once")
        assert f"pid {os.getpid()}" in one_line_error(proc)
    finally:
        held.release()
    lock_queue(queue).release()  # free again once released (the kernel also frees it when a holder dies)


def test_a_plan_removed_while_it_runs_is_archived_as_it_ran(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    queue = tmp_path / "q"
    queue.mkdir()
    plan = queue / "p.toml"
    original = two_quant_plan(tiny_models)
    plan.write_text(original)

    class RemovingAgent(Agent):
        calls = 0

        def should_start(self) -> str | None:
            self.calls += 1
            if self.calls == 2 and plan.exists():  # 1: the agent's loop; 2: before the sweep's first config
                plan.unlink()  # the user removes (or edits) the plan mid-sweep
            return super().should_start()

    engine = open_engine(tmp_path / "a.db")
    # settle_s 0: taken at once, so that the second should_start is the sweep's, not an idle poll's
    config = AgentConfig(queue=queue, plan=None, once=True, telemetry=False, settle_s=0.0)
    agent = RemovingAgent(engine, None, config)
    assert agent.run() == 0
    done = list((queue / "done").iterdir())
    assert [p.read_text() for p in done] == [original]


def test_the_agent_checks_the_database_before_every_sweep(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    """Damaged after the agent started: the next plan is not run, the agent stops (exit 2), the plan stays."""
    db = tmp_path / "a.db"
    engine = open_engine(db)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        (pageno,) = conn.execute("SELECT pageno FROM dbstat WHERE name = 'verdict'").fetchone()
    with db.open("r+b") as fh:
        fh.seek((pageno - 1) * page)
        fh.write(b"\xff" * 16)
    queue = tmp_path / "q"
    queue.mkdir()
    (queue / "p.toml").write_text(two_quant_plan(tiny_models))
    agent = Agent(engine, db, AgentConfig(queue=queue, plan=None, once=True, telemetry=False))
    assert agent.run() == 2
    assert (queue / "p.toml").exists() and not (queue / "done").exists()
