"""Issue 11, unattended hardening: leases and reconciliation, one writer per sweep and queue, bounded plans,
safe writes, damaged/full storage, workers that die with their parent and ignore the working directory,
test-only fault injection. Real tiny GGUF models, real `edgeprof` processes, real SQLite; nothing mocked.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, select, text
from support.captures import capture_path, read_capture

from edgeprof.daemon.agent import recover_interrupted
from edgeprof.plan.parse import PlanError, expand, parse_plan
from edgeprof.runners.llama import run_child
from edgeprof.runners.protocol import FAULT_ARM_ENV, FAULT_ENV
from edgeprof.safefs import QueueLocked, archive, lock_queue, read_nofollow, replace_report
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Device, Run, Sweep, SweepLease
from edgeprof.sweep import LeaseHeld, Owner, SweepAborted, owner_dead, reconcile_dead_owners, run_plan
from edgeprof.sweep import acquire_lease as acquire

PLAN = """
name = "hard"
[matrix]
models = [{{ path = "{a}", label = "q8" }}, {{ path = "{b}", label = "q4" }}]
ctx = [256]
threads = [1]
[[workload]]
name = "w"
prompt_tokens = 16
n_predict = 4
[repeat]
cold = 1
warmup = 0
steady = 1
[run]
timeout_s = {timeout}
"""


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def plan_text(models: dict[str, Path], timeout: float = 60) -> str:
    return PLAN.format(a=models["Q8_0"], b=models["Q4_K_M"], timeout=timeout)


def clean_env(fault: str | None = None, armed: bool = True) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (FAULT_ENV, "NOTIFY_SOCKET", "WATCHDOG_USEC")}
    if fault:
        env[FAULT_ENV] = fault
    if not armed:
        env.pop(FAULT_ARM_ENV, None)
    return env


def edgeprof(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "edgeprof", *args],
        capture_output=True,
        text=True,
        env=env or clean_env(),
        timeout=timeout,
    )


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def wait_for(predicate: Any, timeout_s: float = 60.0, what: str = "condition") -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def running_runs(db: Path) -> int:
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


# -- 1/2: the lease -------------------------------------------------------------------------------------


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


def test_replace_file_replaces_a_planted_symlink_instead_of_writing_through_it(tmp_path: Path) -> None:
    from edgeprof.safefs import replace_file

    victim = tmp_path / "victim"
    victim.write_text("keep")
    plan = tmp_path / "demo.toml"
    plan.symlink_to(victim)
    replace_file(plan, b"name = 'demo'\n")
    assert victim.read_text() == "keep" and not plan.is_symlink() and plan.read_bytes() == b"name = 'demo'\n"


def test_reused_pid_and_other_hosts_are_judged_by_start_time_and_heartbeat(engine: Any) -> None:
    me = Owner.me()
    now = utcnow()
    lease = SweepLease(
        lease_key="k",
        sweep_id=None,
        token="t",
        host=me.host,
        pid=me.pid,
        proc_start=me.proc_start,
        acquired_at=now,
        heartbeat_at=now,
        released_at=None,
    )
    assert not owner_dead(lease)
    lease.proc_start = "another-boot:123"  # same pid, another process: the owner is gone
    assert owner_dead(lease)
    lease.host = "some-other-host"  # cannot be probed: alive while it beats
    assert not owner_dead(lease, now=now + timedelta(seconds=60))
    assert owner_dead(lease, now=now + timedelta(hours=2))


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


def test_kill_9_of_run_leaves_no_running_run_and_no_orphan_worker_and_a_second_writer_exits_2(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    db = tmp_path / "k.db"
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_text(tiny_models, timeout=300))
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


def test_sigterm_to_run_marks_the_run_and_sweep_interrupted(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    """`edgeprof run`'s own SIGTERM handler: without it the process dies and the sweep stays running."""
    db = tmp_path / "t.db"
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_text(tiny_models, timeout=300))
    proc = subprocess.Popen(
        [sys.executable, "-m", "edgeprof", "run", str(plan), "--db", str(db), "--no-telemetry"],
        env=clean_env("hang@decode:q8_0"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: running_runs(db) == 1 and children_of(proc.pid), what="a hanging worker")
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM sweep").fetchall() == [("interrupted",)]
        assert conn.execute("SELECT status FROM run").fetchall() == [("interrupted",)]


class StopWhileTelemetryStops:
    """A SIGTERM that lands while telemetry is being stopped, after the last config."""

    def __init__(self, _sweep_id: int) -> None:
        pass

    def start(self) -> None:
        pass

    def stop(self) -> None:
        raise KeyboardInterrupt

    def before_run(self, *_a: Any) -> None:
        pass

    def on_child_event(self, *_a: Any) -> None:
        pass

    def after_run(self, *_a: Any) -> None:
        pass


def test_a_stop_after_the_last_config_does_not_leave_the_sweep_running(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    engine = open_engine(tmp_path / "s.db")
    plan = parse_plan(plan_text(tiny_models), source=str(tmp_path / "p.toml"), base=tmp_path)
    try:
        outcome = run_plan(
            engine, plan, out=io.StringIO(), env=clean_env(), telemetry=StopWhileTelemetryStops
        )
    except KeyboardInterrupt:
        pytest.fail("the stop escaped run_plan and left the sweep running")
    assert outcome.interrupted
    with new_session(engine) as session:
        assert session.get(Sweep, outcome.sweep_id).status == "interrupted"
        assert {r.status for r in session.scalars(select(Run))} == {"ok"}
        assert session.scalars(select(SweepLease)).one().released_at is not None


def test_the_lease_is_beaten_while_models_are_hashed_and_through_cooldowns(
    tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cooldown is the user's max_wait_s long, which may pass the lease's staleness limit: its waits must
    # beat the lease, or a second host takes a live sweep over. Every beat is recorded (no rate limit), and
    # each must find the database free to write (the sampler has no collectors, so nothing else writes):
    # a beat that meets the sweep's own open transaction waits out the busy timeout and is lost.
    from edgeprof.plan.parse import Collect
    from edgeprof.storage.models import Phase
    from edgeprof.sweep import Telemetry, lease

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
    text_ = plan_text(tiny_models).replace("cold = 1", "cold = 2").replace("steady = 1", "steady = 2")
    text_ += "[cooldown]\ndelay_s = 1.2\nper_rep = true\n"
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


class FillTheDisk:
    """Before the second config, cap the database at its current size: SQLite's own 'database or disk is
    full' (SQLITE_FULL), as a full filesystem gives it."""

    def __init__(self, _sweep_id: int) -> None:
        self.n = 0

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def before_run(self, session: Any, *_a: Any) -> None:
        self.n += 1
        if self.n == 2:
            session.commit()
            engine = session.get_bind()
            pages = int(session.execute(text("PRAGMA page_count")).scalar())
            session.commit()

            def cap(dbapi_connection: Any, _record: Any) -> None:
                dbapi_connection.execute(f"PRAGMA max_page_count = {pages + 2}")

            event.listen(engine, "connect", cap)
            engine.dispose()  # every connection from now on is capped
            with engine.begin() as conn:
                conn.execute(text("CREATE TABLE filler (b BLOB)"))
            while True:  # use up the free space inside the file, too
                try:
                    with engine.begin() as conn:
                        conn.execute(text("INSERT INTO filler VALUES (zeroblob(512))"))
                except Exception:  # noqa: BLE001 - SQLITE_FULL: the disk is now full
                    break

    def on_child_event(self, *_a: Any) -> None:
        pass

    def after_run(self, *_a: Any) -> None:
        pass


def test_a_full_disk_mid_sweep_is_one_line_the_sweep_interrupted_and_finished_configs_kept(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    db = tmp_path / "full.db"
    engine = open_engine(db)
    # enough output per config that the second config's rows need new pages, which the full disk refuses
    more = plan_text(tiny_models).replace("steady = 1", "steady = 8")
    more = more.replace("n_predict = 4", "n_predict = 64")
    plan = parse_plan(more, source=str(tmp_path / "p.toml"), base=tmp_path)
    with pytest.raises(SweepAborted) as info:
        run_plan(engine, plan, out=io.StringIO(), env=clean_env(), telemetry=FillTheDisk)
    message = str(info.value)
    assert "\n" not in message and "full" in message and "interrupted" in message
    engine.dispose()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM sweep").fetchall() == [("interrupted",)]
        statuses = [r[0] for r in conn.execute("SELECT status FROM run ORDER BY id")]
        assert statuses[0] == "ok" and "running" not in statuses
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# -- 3: bounded plans ------------------------------------------------------------------------------------


BASE = """
name = "b"
[matrix]
models = ["{q4}"]
{matrix}
[[workload]]
name = "w"
prompt_tokens = 8
n_predict = 8
{workload}
{rest}
"""


def bad(models: dict[str, Path], matrix: str = "", workload: str = "", rest: str = "") -> list[str]:
    text_ = BASE.format(q4=models["Q4_K_M"], matrix=matrix, workload=workload, rest=rest)
    with pytest.raises(PlanError) as info:
        parse_plan(text_, source="p.toml")
    return info.value.problems


@pytest.mark.parametrize(
    ("matrix", "rest", "place"),
    [
        ("", "[run]\ntimeout_s = nan", "run.timeout_s"),
        ("", "[collect]\nidle_s = inf", "collect.idle_s"),
        ("", "[cooldown]\ndelay_s = 1e12", "cooldown.delay_s"),
        ("ctx = [4294967424]", "", "matrix.ctx[0]"),
        ("ctx = [1000000000]", "", "matrix.ctx[0]"),
        ("ctx = [4096]", "", "matrix.ctx"),  # the tiny model is trained for 2048
        ("", "[repeat]\nsteady = 1000000000", "repeat.steady"),
        ("threads = [100000]", "", "matrix.threads[0]"),
        ("n_batch = [100000000]", "", "matrix.n_batch[0]"),
    ],
)
def test_out_of_bounds_numbers_are_refused_with_their_place(
    tiny_models: dict[str, Path], matrix: str, rest: str, place: str
) -> None:
    problems = bad(tiny_models, matrix=matrix, rest=rest)
    assert any(p.startswith(place + ":") for p in problems), problems


def test_ctx_beyond_the_trained_context_needs_explicit_permission(tiny_models: dict[str, Path]) -> None:
    text_ = BASE.format(
        q4=tiny_models["Q4_K_M"],
        matrix="ctx = [4096]",
        workload="",
        rest="[run]\nallow_ctx_beyond_train = true",
    )
    assert parse_plan(text_, source="p.toml").axes["ctx"] == (4096,)


def test_a_huge_matrix_needs_max_configs_and_is_never_expanded(tiny_models: dict[str, Path]) -> None:
    matrix = f"ctx = {list(range(1048, 2048))}\nn_batch = {list(range(1, 10001))}\nmmap = [true, false]"
    problems = bad(tiny_models, matrix=matrix + '\nflash_attn = ["on", "off", "auto"]\nn_ubatch = [1]')
    assert any(p.startswith("matrix:") and "max_configs" in p for p in problems), problems
    # Under the limit, or with an explicit max_configs, it validates.
    ok = BASE.format(q4=tiny_models["Q4_K_M"], matrix="ctx = [512, 1024]", workload="", rest="")
    assert parse_plan(ok, source="p.toml").n_specs() == 2
    few = BASE.format(
        q4=tiny_models["Q4_K_M"], matrix="ctx = [512, 1024]", workload="", rest="[run]\nmax_configs = 1"
    )
    with pytest.raises(PlanError, match="max_configs"):
        parse_plan(few, source="p.toml")


def test_a_plan_file_over_the_size_limit_is_refused_before_parsing(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    big.write_bytes(b"# " + b"x" * (1 << 20) + b"\n[[[not toml")
    proc = edgeprof("run", str(big), "--check")
    assert "at most" in one_line_error(proc)


# -- 5: safe writes -------------------------------------------------------------------------------------


def test_archive_never_writes_through_a_planted_symlink(tmp_path: Path) -> None:
    queue = tmp_path / "queue"
    (queue / "failed").mkdir(parents=True)
    victim = tmp_path / "results.db"
    victim.write_bytes(b"precious")
    (queue / "failed" / "p-1.error.txt").symlink_to(victim)
    (queue / "failed" / "p-1.toml").symlink_to(victim)
    stored = archive(queue, "failed", "p-1.toml", b"name = 'p'\n", "problem")
    assert victim.read_bytes() == b"precious"
    assert stored.name != "p-1.toml" and stored.read_bytes() == b"name = 'p'\n"
    errors = [p for p in (queue / "failed").iterdir() if p.name.endswith(".error.txt") and not p.is_symlink()]
    assert len(errors) == 1 and errors[0].read_text() == "problem\n"
    assert oct(errors[0].stat().st_mode & 0o777) == oct(0o640)  # never world-readable
    # A folder swapped for a link is refused.
    (queue / "done").symlink_to(tmp_path)
    with pytest.raises(OSError, match="symbolic link"):
        archive(queue, "done", "p.toml", b"x", None)


def test_a_symlinked_plan_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("root:$6$hash")
    link = tmp_path / "plan.toml"
    link.symlink_to(secret)
    with pytest.raises(OSError, match="symbolic link"):
        read_nofollow(link, 1000)


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


def test_report_html_refuses_to_overwrite_the_database_or_a_foreign_file(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    db = tmp_path / "r.db"
    engine = open_engine(db)
    plan = parse_plan(plan_text(tiny_models), source=str(tmp_path / "p.toml"), base=tmp_path)
    run_plan(engine, plan, out=io.StringIO(), env=clean_env())
    engine.dispose()
    before = db.read_bytes()
    assert "database itself" in one_line_error(edgeprof("report", "--db", str(db), "--html", str(db)))
    assert db.read_bytes() == before
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    assert "not an earlier edgeprof report" in one_line_error(
        edgeprof("report", "--db", str(db), "--html", str(notes))
    )
    assert notes.read_text() == "my notes"
    out = tmp_path / "r.html"
    for _ in range(2):  # a new file, then an earlier report: both fine
        assert edgeprof("report", "--db", str(db), "--html", str(out)).returncode == 0
    assert b"edgeprof" in out.read_bytes()[:400]


def test_replace_report_does_not_follow_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "t.txt"
    target.write_text("keep")
    link = tmp_path / "r.html"
    link.symlink_to(target)
    with pytest.raises(OSError, match="symbolic link"):
        replace_report(link, b"<html>", ())
    assert target.read_text() == "keep"


# -- 5/6: databases that must not be written ------------------------------------------------------------


def test_a_foreign_sqlite_file_is_refused_unchanged(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    foreign = tmp_path / "app.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER)")
    before = foreign.read_bytes()
    plan = tmp_path / "p.toml"
    plan.write_text(plan_text(tiny_models))
    assert "not an edgeprof one" in one_line_error(edgeprof("run", str(plan), "--db", str(foreign)))
    assert foreign.read_bytes() == before and not Path(f"{foreign}-wal").exists()


def test_a_mistyped_db_for_a_read_only_command_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "typo.db"
    for command in (["report"], ["status"], ["analyse"], ["compare", "1", "2"]):
        assert "no edgeprof database" in one_line_error(edgeprof(*command, "--db", str(missing)))
    assert not missing.parent.exists()


def _corrupt(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        n = conn.execute("PRAGMA page_count").fetchone()[0]
    assert n > 4
    with db.open("r+b") as fh:
        for k in range(2, n):  # every page but the header page: b-tree pages become garbage
            fh.seek(k * page + 8)
            fh.write(b"\xff\x13" * 40)


def test_a_damaged_database_is_one_line_for_every_command_and_run_does_not_write(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    db = tmp_path / "bad.db"
    engine = open_engine(db)
    plan = parse_plan(plan_text(tiny_models), source=str(tmp_path / "p.toml"), base=tmp_path)
    run_plan(engine, plan, out=io.StringIO(), env=clean_env())
    engine.dispose()
    _corrupt(db)
    before = db.read_bytes()
    plan_file = tmp_path / "p.toml"
    plan_file.write_text(plan_text(tiny_models))
    assert "damaged" in one_line_error(edgeprof("run", str(plan_file), "--db", str(db), "--new"))
    assert db.read_bytes() == before
    commands = (["report"], ["report", "--format", "json"], ["status"], ["analyse"], ["compare", "1", "1"])
    for command in commands:
        proc = edgeprof(*command, "--db", str(db))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, (command, proc.stderr[-1500:])


def test_run_refuses_a_database_damaged_where_the_sweep_would_not_notice(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    """Only the (empty) verdict table's page is damaged: a sweep without telemetry never touches it, so
    without quick_check `run` would write into a DB failing integrity_check and exit 0."""
    db = tmp_path / "v.db"
    open_engine(db).dispose()
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        (pageno,) = conn.execute("SELECT pageno FROM dbstat WHERE name = 'verdict'").fetchone()
    with db.open("r+b") as fh:
        fh.seek((pageno - 1) * page)
        fh.write(b"\xff" * 16)  # not a b-tree page any more
    before = db.read_bytes()
    plan = tmp_path / "p.toml"
    plan.write_text(plan_text(tiny_models))
    line = one_line_error(edgeprof("run", str(plan), "--db", str(db), "--no-telemetry"))
    assert "damaged" in line and ".recover" in line
    assert db.read_bytes() == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_a_read_only_database_is_one_line_before_anything_runs(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    db = tmp_path / "ro.db"
    open_engine(db).dispose()
    db.chmod(0o444)
    plan = tmp_path / "p.toml"
    plan.write_text(plan_text(tiny_models))
    try:
        assert "cannot be written" in one_line_error(edgeprof("run", str(plan), "--db", str(db)))
    finally:
        db.chmod(0o644)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("chattr"), reason="chattr +i needs root")
def test_an_immutable_database_is_one_line_before_anything_runs(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    db = tmp_path / "imm.db"
    open_engine(db).dispose()
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.skip("this filesystem has no immutable attribute")
    plan = tmp_path / "p.toml"
    plan.write_text(plan_text(tiny_models))
    try:
        assert "immutable" in one_line_error(edgeprof("run", str(plan), "--db", str(db)))
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)


# -- 2: the queue lock ----------------------------------------------------------------------------------


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


# -- 6: a plan removed while it runs ---------------------------------------------------------------------


def test_a_plan_removed_while_it_runs_is_archived_as_it_ran(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    from edgeprof.daemon.agent import Agent, AgentConfig

    queue = tmp_path / "q"
    queue.mkdir()
    plan = queue / "p.toml"
    original = plan_text(tiny_models)
    plan.write_text(original)

    class RemovingAgent(Agent):
        calls = 0

        def should_start(self) -> str | None:
            self.calls += 1
            if self.calls == 2 and plan.exists():  # 1: the agent's loop; 2: before the sweep's first config
                plan.unlink()  # the user removes (or edits) the plan mid-sweep
            return super().should_start()

    engine = open_engine(tmp_path / "a.db")
    agent = RemovingAgent(engine, None, AgentConfig(queue=queue, plan=None, once=True, telemetry=False))
    assert agent.run() == 0
    done = list((queue / "done").iterdir())
    assert [p.read_text() for p in done] == [original]


# -- 7: workers ignore the working directory --------------------------------------------------------------


def test_a_json_py_in_the_working_directory_never_runs_inside_a_worker(
    tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "hijacked"
    (tmp_path / "json.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\nraise SystemExit(9)\n")
    plan = parse_plan(plan_text(tiny_models), source=str(tmp_path / "p.toml"), base=tmp_path)
    spec = expand(plan, {m.path: "0" * 64 for m in plan.models})[0]
    monkeypatch.chdir(tmp_path)
    result = run_child(spec.job(), 120, env=clean_env())
    assert result.status == "ok", result.reason
    assert not marker.exists()


# -- 8: test-only switches ---------------------------------------------------------------------------------


def test_fault_injection_without_the_suite_arming_it_has_no_effect(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    plan = parse_plan(plan_text(tiny_models), source=str(tmp_path / "p.toml"), base=tmp_path)
    spec = expand(plan, {m.path: "0" * 64 for m in plan.models})[0]
    unarmed = run_child(spec.job(), 120, env=clean_env("kill@load", armed=False))
    assert unarmed.status == "ok", unarmed.reason
    armed = run_child(spec.job(), 120, env=clean_env("kill@load"))
    assert armed.status == "crashed" and armed.injected_fault == "kill@load"
    assert (armed.reason or "").startswith("injected by the test suite (kill@load)")


# -- 10: the suite cannot silently shrink -----------------------------------------------------------------


def test_a_missing_capture_fails_instead_of_skipping() -> None:
    """The captures live in the repository: one that is missing is a broken checkout, never a quiet skip."""
    with pytest.raises(pytest.fail.Exception, match="missing from the repository"):
        capture_path("no-such-capture.txt")
    assert read_capture("thermal_zone-doc-example_kernel.txt")  # and the real ones are there


def test_every_test_has_a_timeout(request: pytest.FixtureRequest) -> None:
    """pytest-timeout is active with a bound of minutes: a test losing its own timeout fails, never hangs."""
    assert request.config.pluginmanager.hasplugin("timeout")
    bound = float(request.config.getini("timeout"))
    assert 0 < bound <= 600


# -- 4: untrusted GGUF files are read with bounds -----------------------------------------------------------


def _gguf(kvs: bytes, n_kv: int, n_tensors: int = 0, tail: bytes = b"") -> bytes:
    """A synthetic GGUF v3 (labelled synthetic: hostile headers no real tool writes)."""
    import struct

    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + kvs + tail


def _key(name: str) -> bytes:
    import struct

    return struct.pack("<Q", len(name)) + name.encode()


def test_a_gguf_array_claiming_2_40_items_is_one_line_and_bounded(tmp_path: Path) -> None:
    import struct

    from edgeprof.gguf.info import GGUFError, read_gguf_info

    path = tmp_path / "synthetic-huge-array.gguf"
    # tokenizer.ggml.tokens: array of u32 (type 4) claiming 2^40 items, in a 1 KB file
    kv = _key("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 4, 1 << 40)
    path.write_bytes(_gguf(kv, 1).ljust(1024, b"\0"))
    with pytest.raises(GGUFError, match=r"claims|left in the file"):
        read_gguf_info(path)
    # and through the CLI: one line, exit 2
    plan = tmp_path / "p.toml"
    plan.write_text(
        f'[matrix]\nmodels = ["{path}"]\n[[workload]]\nname = "w"\nprompt_tokens = 8\nn_predict = 8\n'
    )
    assert "synthetic-huge-array.gguf" in one_line_error(edgeprof("run", str(plan), "--check"))


def test_a_gguf_of_a_million_empty_strings_is_refused_without_materialising_them(tmp_path: Path) -> None:
    import struct

    from edgeprof.gguf.info import GGUFError, read_gguf_info

    n = 1_000_000
    kv = _key("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, n) + b"\0" * (8 * n)
    path = tmp_path / "synthetic-empty-strings.gguf"
    path.write_bytes(_gguf(kv, 1))
    with pytest.raises(GGUFError, match="without tensors"):
        read_gguf_info(path)


def test_bounded_reader_agrees_with_the_gguf_package_on_real_files(tiny_models: dict[str, Path]) -> None:
    import gguf

    from edgeprof.gguf.info import read_gguf_info

    for path in tiny_models.values():
        info = read_gguf_info(path)
        reader = gguf.GGUFReader(str(path), "r")
        assert info.n_params == sum(int(t.n_elements) for t in reader.tensors)
        assert info.tensor_bytes == sum(int(t.n_bytes) for t in reader.tensors)
        assert info.vocab_size == len(reader.fields["tokenizer.ggml.tokens"].data)
        assert info.context_length == int(reader.fields["llama.context_length"].contents())


def test_the_agent_checks_the_database_before_every_sweep(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    """Damaged after the agent started: the next plan is not run, the agent stops (exit 2), the plan stays."""
    from edgeprof.daemon.agent import Agent, AgentConfig

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
    (queue / "p.toml").write_text(plan_text(tiny_models))
    agent = Agent(engine, db, AgentConfig(queue=queue, plan=None, once=True, telemetry=False))
    assert agent.run() == 2
    assert (queue / "p.toml").exists() and not (queue / "done").exists()
