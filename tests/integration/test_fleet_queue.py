"""The fleet's job queue on a real PostgreSQL, without llama.cpp: claims are exclusive under concurrency,
``--each`` jobs wait for their own board, ``--any`` jobs only reach matching boards (also boards that join
later), an expired lease re-queues (``--any``) or waits (``--each``), a lost lease can no longer finish,
N failures fail the job with every reason, cancel, an unhealthy board claims nothing, and the CLI's bad
input is one line. The fleet tables exist only on PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from support.plans import plan_toml

from edgeprof.fleet.boards import list_boards, list_jobs, record_health
from edgeprof.fleet.jobfiles import SubmittedPlan, identify_plan
from edgeprof.fleet.queue import (
    Job,
    cancel,
    claim,
    fail_attempt,
    finish,
    heartbeat,
    register_board,
    release_own,
    submit,
)
from edgeprof.storage.migrations import upgrade

pytestmark = pytest.mark.timeout(120)

PLAN = SubmittedPlan("synthetic", "# synthetic plan\n", "0" * 64, [])


def facts(board: str, jetpack: str, ram: int) -> dict[str, object]:
    return {"board": board, "jetpack": jetpack, "ram_mb": ram, "fingerprint": f"synthetic-{board}-{ram}"}


@pytest.fixture
def central(pg_db_url: str):  # type: ignore[no-untyped-def]
    engine = create_engine(pg_db_url)
    upgrade(engine)
    yield engine
    engine.dispose()


def edgeprof(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edgeprof", *args], capture_output=True, text=True, timeout=60
    )


def expire(engine, job_id: int) -> None:  # type: ignore[no-untyped-def]
    """Stand-in for a lease running out: no test waits on the wall clock for it."""
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE fleet_job SET lease_until = now() - interval '1 second' WHERE id = :j"),
            {"j": job_id},
        )


def test_each_waits_for_its_board_and_any_reaches_only_matches(central) -> None:  # type: ignore[no-untyped-def]
    nano = register_board(central, "nano", facts("orin-nano", "6.1", 7620), {"lab": "1"}, 1.0)
    agx = register_board(central, "agx", facts("agx-orin", "6.1", 62800), {"lab": "2"}, 1.0)
    each, boards = submit(central, PLAN, "jetpack>=6.1", "each", None)
    assert len(each) == 2 and sorted(boards) == sorted([nano, agx])
    (only_agx,), _ = submit(central, PLAN, "label:lab=2", "any", None)
    (later,), matched = submit(central, PLAN, "board=orin-nx", "any", None)
    assert matched == []  # no such board yet: queued, waiting for one
    got = []
    while (job := claim(central, nano, 30)) is not None:
        got.append(job.id)
        assert finish(central, job, lambda _c: None)
    assert got == [each[0]]  # its own --each job; never the agx's, never a --any job it does not match
    got = []
    while (job := claim(central, agx, 30)) is not None:
        got.append(job.id)
        assert finish(central, job, lambda _c: None)
    assert got == [each[1], only_agx]
    nx = register_board(central, "nx", facts("orin-nx", "6.0", 15600), {}, 1.0)  # joins after the submit
    job = claim(central, nx, 30)
    assert job is not None and job.id == later


def test_concurrent_claims_never_hand_one_job_to_two_boards(central) -> None:  # type: ignore[no-untyped-def]
    boards = [register_board(central, f"b{i}", facts("orin-nano", "6.1", 7620), {}, 1.0) for i in range(8)]
    for _ in range(60):
        submit(central, PLAN, "ram_mb>=7000", "any", None)
    claimed: list[tuple[int, int]] = []
    lock = threading.Lock()

    def board(b: int) -> None:
        engine = create_engine(central.url)
        while (job := claim(engine, b, 30)) is not None:
            with lock:
                claimed.append((job.id, b))
            finish(engine, job, lambda _c: None)
        engine.dispose()

    threads = [threading.Thread(target=board, args=(b,)) for b in boards]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    ids = [j for j, _ in claimed]
    assert len(ids) == 60 and len(set(ids)) == 60
    assert all(r["state"] == "done" and r["attempts"] == 1 for r in list_jobs(central))


def test_an_expired_lease_requeues_any_keeps_each_and_fences_the_old_claim(central) -> None:  # type: ignore[no-untyped-def]
    a = register_board(central, "a", facts("orin-nano", "6.1", 7620), {}, 1.0)
    b = register_board(central, "b", facts("orin-nano", "6.1", 7620), {}, 1.0)
    (any_job,), _ = submit(central, PLAN, "board=orin-nano", "any", None)
    each_jobs, _ = submit(central, PLAN, "board=orin-nano", "each", None)
    first = claim(central, a, 30)
    assert first is not None and first.id == any_job
    assert heartbeat(central, a, 30, first)
    expire(central, any_job)
    second = claim(central, b, 30)  # b reaps a's expired lease, then claims the job itself
    assert second is not None and second.id == any_job and second.attempts == 2
    assert not heartbeat(central, a, 30, first)  # a learns it lost the job
    assert not finish(central, first, lambda _c: pytest.fail("a lost claim must push nothing"))  # type: ignore[arg-type,return-value]
    assert finish(central, second, lambda _c: "sweep-b")
    job = next(r for r in list_jobs(central) if r["job"] == any_job)
    assert job["board"] == "b" and "lease expired" in job["reasons"][0] and job["sweep_uid"] == "sweep-b"
    # a's --each job: an expired lease puts it back for a only; b never takes it
    mine = claim(central, a, 30)
    assert mine is not None and mine.id == each_jobs[0]
    expire(central, mine.id)
    other = claim(central, b, 30)
    assert other is not None and other.id == each_jobs[1]
    again = claim(central, a, 30)
    assert again is not None and again.id == each_jobs[0] and again.attempts == 2


def test_a_board_that_joins_while_an_any_job_runs_can_take_it_over(central) -> None:  # type: ignore[no-untyped-def]
    a = register_board(central, "a", facts("orin-nano", "6.1", 7620), {}, 1.0)
    (job_id,), _ = submit(central, PLAN, "board=orin-nano", "any", None)
    assert claim(central, a, 30) is not None
    b = register_board(central, "b", facts("orin-nano", "6.1", 7620), {}, 1.0)  # joins while a runs it
    expire(central, job_id)
    taken = claim(central, b, 30)
    assert taken is not None and taken.id == job_id


def test_a_restarted_board_takes_its_each_job_back_at_once(central) -> None:  # type: ignore[no-untyped-def]
    a = register_board(central, "a", facts("orin-nano", "6.1", 7620), {}, 1.0)
    (job_id,), _ = submit(central, PLAN, "board=orin-nano", "each", None)
    held = claim(central, a, 300)
    assert held is not None
    assert release_own(central, a, "its agent restarted mid-job") == 1
    again = claim(central, a, 300)
    assert again is not None and again.id == job_id and again.attempts == 2
    assert "restarted mid-job" in list_jobs(central)[0]["reasons"][0]


def test_n_failures_fail_the_job_with_every_reason(central) -> None:  # type: ignore[no-untyped-def]
    a = register_board(central, "a", facts("orin-nano", "6.1", 7620), {}, 1.0)
    submit(central, PLAN, "board=orin-nano", "any", None, max_attempts=2)
    first = claim(central, a, 30)
    assert first is not None and fail_attempt(central, first, "a", "boom 1") == "queued"
    second = claim(central, a, 30)
    assert second is not None and fail_attempt(central, second, "a", "boom 2") == "failed"
    assert claim(central, a, 30) is None  # never retried forever
    row = list_jobs(central)[0]
    assert row["state"] == "failed" and row["reasons"] == ["attempt 1 on a: boom 1", "attempt 2 on a: boom 2"]


def test_an_unhealthy_board_claims_nothing_until_it_passes_and_boards_say_why(central) -> None:  # type: ignore[no-untyped-def]
    a = register_board(central, "a", facts("orin-nano", "6.1", 7620), {}, 1.0)
    submit(central, PLAN, "board=orin-nano", "any", None)
    record_health(central, a, "1" * 64, False, 12.0, "tg 12.0 t/s below its band", 60)
    assert claim(central, a, 30) is None
    assert list_boards(central)[0]["state"] == "unhealthy (tg 12.0 t/s below its band)"
    record_health(central, a, "1" * 64, True, 50.0, "tg 50.0 t/s within its band", 60)
    assert claim(central, a, 30) is not None


def test_cancel_and_boards_states(central) -> None:  # type: ignore[no-untyped-def]
    a = register_board(central, "a", facts("orin-nano", "6.1", 7620), {}, 1.0)
    (queued,), _ = submit(central, PLAN, "board=orin-nano", "any", None)
    (running,), _ = submit(central, PLAN, "board=orin-nano", "any", None)
    assert cancel(central, queued) == "queued"
    job = claim(central, a, 30)
    assert isinstance(job, Job) and job.id == running
    assert heartbeat(central, a, 30, job, {"done": 1, "total": 4, "eta_s": 600.0, "sweep_uid": "s"})
    assert list_boards(central)[0]["state"] == "running job 2 (synthetic, config 2 of 4, ETA 10 min)"
    assert cancel(central, running) == "running"
    assert not heartbeat(central, a, 30, job)  # the board stops it after its current config
    with central.begin() as conn:
        conn.execute(text("UPDATE fleet_board SET heartbeat_at = now() - interval '1 hour'"))
    assert list_boards(central)[0]["state"].startswith("offline since ")


def test_the_cli_maps_submit_boards_jobs_cancel_and_bad_input_is_one_line(
    pg_db_url: str, tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_toml([tiny_models["Q4_K_M"]], name="cli"))
    bad = edgeprof("fleet", "submit", str(plan), "--to", pg_db_url, "--select", "rammb>=7000", "--any")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown fact 'rammb'" in bad.stderr
    none = edgeprof("fleet", "submit", str(plan), "--to", pg_db_url, "--select", "board=x", "--each")
    assert none.returncode == 1 and "no registered board matches" in none.stderr
    ok = edgeprof(
        "fleet", "submit", str(plan), "--to", pg_db_url, "--select", "board=x", "--any", "--format", "json"
    )
    assert ok.returncode == 0, ok.stderr
    sent = json.loads(ok.stdout)
    assert sent["jobs"] == [1] and sent["plan_sha256"] == identify_plan(plan).sha256
    jobs = json.loads(edgeprof("fleet", "jobs", "--db", pg_db_url, "--format", "json").stdout)
    assert jobs[0]["state"] == "queued" and jobs[0]["plan"] == "cli" and jobs[0]["select"] == "board=x"
    assert "no boards have joined" in edgeprof("fleet", "boards", "--db", pg_db_url).stdout
    assert edgeprof("fleet", "cancel", "1", "--db", pg_db_url).returncode == 0
    again = edgeprof("fleet", "cancel", "1", "--db", pg_db_url)
    assert again.returncode == 2 and "already ended (cancelled)" in again.stderr
    sqlite = edgeprof("fleet", "boards", "--db", str(tmp_path / "local.db"))
    assert sqlite.returncode != 0 and "PostgreSQL" in sqlite.stderr and "Traceback" not in sqlite.stderr
    down = edgeprof("agent", "--fleet", "postgresql://fleet:s3cret@127.0.0.1:1/central", "--db",
                    str(tmp_path / "board.db"))  # fmt: skip
    assert down.returncode == 2 and "Traceback" not in down.stderr and "s3cret" not in down.stderr
    assert "edgeprof: error: --fleet postgresql://fleet:***@127.0.0.1:1/central" in down.stderr
    neither = edgeprof("fleet", "submit", str(plan), "--to", pg_db_url, "--select", "board=x")
    assert neither.returncode == 2 and "exactly one of --each, --any or --health" in neither.stderr
