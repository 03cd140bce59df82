"""The plan queue's rules (agent/daemon/queue.py), on a fake clock: when a dropped plan counts as complete,
what happens to a plan replaced while it ran, the backoff of a plan that cannot be archived, and the
watchdog fed through a bounded long step (agent/daemon/agent.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from support.hostile_cases import case

from edgeprof.daemon import Agent, AgentConfig
from edgeprof.daemon.queue import RETRY_FIRST_S, PlanQueue, archive_name
from edgeprof.storage.db import open_engine


class Clocks:
    def __init__(self) -> None:
        self.mono = 1000.0
        self.wall = time.time()

    def advance(self, seconds: float) -> None:
        self.mono += seconds
        self.wall += seconds


def queue_with(tmp_path: Path, settle_s: float = 3.0) -> tuple[PlanQueue, Clocks, Path]:
    folder = tmp_path / "q"
    folder.mkdir()
    clocks = Clocks()
    queue = PlanQueue(folder, settle_s, clock=lambda: clocks.mono, wall=lambda: clocks.wall)
    return queue, clocks, folder


def test_a_fresh_plan_is_taken_once_unchanged_for_the_settle_time(tmp_path: Path) -> None:
    queue, clocks, folder = queue_with(tmp_path)
    plan = folder / "p.toml"
    plan.write_text("name = ")
    os.utime(plan, (clocks.wall, clocks.wall))  # written just now
    assert queue.scan() == (None, True)
    clocks.advance(2.0)
    plan.write_text("name = 'p'\n")  # still being written: the wait starts again
    os.utime(plan, (clocks.wall, clocks.wall))
    assert queue.scan() == (None, True)
    clocks.advance(2.5)
    assert queue.scan() == (None, True)
    clocks.advance(1.0)
    assert queue.scan() == (plan, False)


def test_a_plan_renamed_into_the_queue_is_taken_at_once(tmp_path: Path) -> None:
    queue, _clocks, folder = queue_with(tmp_path)
    plan = folder / "p.toml"
    plan.write_text("name = 'p'\n")
    os.utime(plan, (1_000_000, 1_000_000))  # `mv` keeps the mtime of when it was written
    assert queue.scan() == (plan, False)


def test_a_clock_that_jumped_back_does_not_hold_a_plan_for_ever(tmp_path: Path) -> None:
    queue, clocks, folder = queue_with(tmp_path)
    plan = folder / "p.toml"
    plan.write_text("name = 'p'\n")
    os.utime(plan, (clocks.wall + 86_400, clocks.wall + 86_400))  # an mtime "tomorrow"
    assert queue.scan() == (None, True)
    clocks.mono += 3.0  # the wall clock stays behind; seen unchanged for the settle time is enough
    assert queue.scan() == (plan, False)


def test_a_plan_replaced_while_it_ran_stays_queued_and_the_text_that_ran_is_archived(tmp_path: Path) -> None:
    queue, _clocks, folder = queue_with(tmp_path)
    plan = folder / "p.toml"
    plan.write_text("first\n")
    data, ident = queue.read(plan, 1 << 20)
    plan.write_text("second, dropped during the sweep\n")
    queue.finish(plan, ident, data, "20260101-000000")
    assert plan.read_text() == "second, dropped during the sweep\n"  # never deleted: it runs next
    assert [p.read_text() for p in (folder / "done").iterdir()] == ["first\n"]


def test_an_unarchivable_plan_is_retried_with_a_growing_delay(tmp_path: Path) -> None:
    queue, clocks, folder = queue_with(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (folder / "failed").symlink_to(elsewhere)
    plan = folder / "p.toml"
    plan.write_text("bad\n")
    _data, ident = queue.read(plan, 1 << 20)
    queue.refuse(plan, ident, "why", "20260101-000000")
    held = folder / "p.toml.held"
    assert queue.held == [held] and held.read_text() == "bad\n" and not plan.exists()
    clocks.advance(RETRY_FIRST_S + 1)
    queue.retry_held("20260101-000100")  # failed/ is still a link: next try in twice the delay
    assert queue.held == [held]
    (folder / "failed").unlink()
    clocks.advance(RETRY_FIRST_S + 1)
    queue.retry_held("20260101-000200")
    assert queue.held == [held]  # not due yet
    clocks.advance(RETRY_FIRST_S)
    queue.retry_held("20260101-000300")
    assert queue.held == []
    assert sorted(p.name for p in (folder / "failed").iterdir()) == [
        "p-20260101-000300.error.txt",
        "p-20260101-000300.toml",
    ]
    assert list(elsewhere.iterdir()) == []


def test_plans_an_earlier_agent_set_aside_are_archived_by_the_next_one(tmp_path: Path) -> None:
    # An agent set two plans aside (failed/ was a link), then stopped: the next agent takes up their
    # archiving at once, each into the folder its note names, the refused one with its reason.
    queue, _clocks, folder = queue_with(tmp_path)
    (folder / "failed").symlink_to(tmp_path)
    (folder / "done").symlink_to(tmp_path)
    for name, text in (("bad.toml", "bad\n"), ("ran.toml", "ran\n")):
        (folder / name).write_text(text)
    data, ident = queue.read(folder / "bad.toml", 1 << 20)
    queue.refuse(folder / "bad.toml", ident, "no such model", "20260101-000000")
    data, ident = queue.read(folder / "ran.toml", 1 << 20)
    queue.finish(folder / "ran.toml", ident, data, "20260101-000000")
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == [
        "bad.toml.held", "bad.toml.held.why", "ran.toml.held", "ran.toml.held.why",
    ]  # fmt: skip
    (folder / "failed").unlink()
    (folder / "done").unlink()
    (folder / "lost.toml.held").write_text("lost\n")  # set aside by an agent that stopped before its note
    restarted = PlanQueue(folder, 3.0)
    assert restarted.scan() == (None, False)  # a held plan is never taken as a new one
    assert sorted(p.name for p in restarted.held) == ["bad.toml.held", "lost.toml.held", "ran.toml.held"]
    restarted.retry_held("20260101-000500")
    assert restarted.held == [] and not [p for p in folder.iterdir() if p.is_file()]
    assert sorted(p.name for p in (folder / "done").iterdir()) == ["ran-20260101-000500.toml"]
    failed = {p.name: p.read_text() for p in (folder / "failed").iterdir()}
    assert failed["bad-20260101-000500.toml"] == "bad\n"
    assert failed["bad-20260101-000500.error.txt"] == "no such model\n"
    assert failed["lost-20260101-000500.toml"] == "lost\n"
    assert "earlier run of the agent" in failed["lost-20260101-000500.error.txt"]


def test_archive_names_fit_a_file_name_whatever_the_plan_is_called() -> None:
    name = archive_name("é" * 200 + ".toml", "20260101-000000")
    assert len((name.removesuffix(".toml") + "-999.error.txt").encode()) <= 255
    assert archive_name("p.toml", "20260101-000000") == "p-20260101-000000.toml"


def test_a_bounded_long_step_feeds_the_watchdog_until_its_bound_only(tmp_path: Path) -> None:
    assert case("queue-watchdog").area == "agent queue"
    agent = Agent(open_engine(tmp_path / "a.db"), None, AgentConfig(queue=None, plan=tmp_path / "p.toml"))
    interval = 10.0
    with agent.long_step(100.0):
        start = time.monotonic()
        assert agent.main_loop_alive(start + 50, interval)  # a long validation, still within its bound
        assert not agent.main_loop_alive(start + 101, interval)  # past it: a hang, let systemd restart
    assert not agent.main_loop_alive(time.monotonic() + 50, interval)  # outside any step: beats only
    with agent.long_step(100.0):
        with agent.long_step(1.0):  # archiving inside validation
            pass
        assert agent.main_loop_alive(time.monotonic() + 50, interval)  # the outer bound still holds
    assert agent.main_loop_alive(time.monotonic(), interval)
