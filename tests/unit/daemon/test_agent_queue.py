"""The agent's queue survives whatever is dropped in it (agent/daemon/agent.py, agent/daemon/queue.py): a
plan still being written is not read, a plan that cannot be archived is set aside instead of read again
and again, a refused plan is moved whole into ``failed/`` (never deleted), and a file that breaks the
plan checks is refused, not a crash. The agent runs in-process on plans that are refused before any sweep;
no model is run. Each case checks the stored data: every plan file's sha256 as it was dropped equals its
archived copy's, and the agent's database holds no sweep or run (a refused plan stores nothing)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from support.hostile_cases import case

from edgeprof.daemon import Agent, AgentConfig
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Run, Sweep

# Complete and well-formed, refused by the checks (no model): what lands in failed/ must be all of it.
REFUSED = 'name = "half"\n[matrix]\nmodels = ["/no/such/model.gguf"]\n' + "# padding\n" * 200


class CountingAgent(Agent):
    """Counts plan reads and stops itself after ``limit`` of them: a spinning agent ends the test."""

    limit = 20

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads: list[str] = []

    def _read_plan(self, plan_path: Path) -> Any:
        self.reads.append(plan_path.name)
        if len(self.reads) >= self.limit:
            self.stop_requested.set()
        return super()._read_plan(plan_path)


def make_agent(tmp_path: Path, queue: Path, cls: type[Agent] = CountingAgent, **config: Any) -> Any:
    engine = open_engine(tmp_path / "a.db")
    cfg = AgentConfig(queue=queue, plan=None, once=True, telemetry=False, poll_s=0.05)
    for key, value in config.items():  # set after construction: the same test runs on older agents
        setattr(cfg, key, value)
    return cls(engine, None, cfg)


def sha(data: str | Path) -> str:
    return hashlib.sha256(data.read_bytes() if isinstance(data, Path) else data.encode()).hexdigest()


def nothing_stored(tmp_path: Path) -> bool:
    """The agent's database holds no sweep and no run: a refused plan stores nothing."""
    with new_session(open_engine(tmp_path / "a.db")) as s:
        return not s.scalar(select(func.count()).select_from(Sweep)) and not s.scalar(
            select(func.count()).select_from(Run)
        )


def old(path: Path) -> None:
    os.utime(path, (1_000_000, 1_000_000))  # as a plan renamed into the queue: written long ago


@pytest.mark.parametrize("hostile", [case("queue-half-written")], ids=lambda c: c.id)
def test_a_plan_still_being_written_is_read_only_once_complete(tmp_path: Path, hostile: Any) -> None:
    queue = tmp_path / "q"
    queue.mkdir()
    plan = queue / "half.toml"
    half = REFUSED[: len(REFUSED) // 3]
    plan.write_text(half)  # `cp` has written a third of it so far; its mtime is now

    class Writer(CountingAgent):
        def _idle(self, seconds: float | None = None) -> None:
            # The first time the agent waits, the copy finishes (and its mtime ages past the settle time).
            if plan.read_text() == half:
                plan.write_text(REFUSED)
                old(plan)
            super()._idle(seconds)

    agent = make_agent(tmp_path, queue, Writer, settle_s=3600.0)
    assert agent.run() == 0
    assert agent.reads == ["half.toml"]  # read once, complete
    failed = sorted((queue / "failed").iterdir())
    plans = [p for p in failed if p.suffix == ".toml"]
    assert [p.read_text() for p in plans] == [REFUSED]  # all of it, never the third
    assert [sha(p) for p in plans] == [sha(REFUSED)] and nothing_stored(tmp_path)
    error = next(p for p in failed if p.name.endswith(".error.txt")).read_text()
    assert "malformed TOML" not in error and "model.gguf" in error
    assert not plan.exists()


@pytest.mark.parametrize("hostile", [case("queue-failed-symlink")], ids=lambda c: c.id)
def test_a_plan_that_cannot_be_archived_is_set_aside_not_read_again(tmp_path: Path, hostile: Any) -> None:
    queue = tmp_path / "q"
    queue.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (queue / "failed").symlink_to(elsewhere)  # failed/ replaced by a symlink
    for name in ("1-bad.toml", "2-bad.toml"):
        (queue / name).write_text(REFUSED)
        old(queue / name)
    agent = make_agent(tmp_path, queue)
    assert agent.run() == 0
    assert sorted(agent.reads) == ["1-bad.toml", "2-bad.toml"]  # each once: no spin, the next one ran
    assert list(elsewhere.iterdir()) == []  # nothing written through the link
    kept = sorted(p.name for p in queue.iterdir() if p.is_file() and p.suffix == ".held")
    assert kept == ["1-bad.toml.held", "2-bad.toml.held"]  # set aside whole, not deleted
    assert "model.gguf" in (queue / "1-bad.toml.held.why").read_text()  # for an agent started later
    assert all(sha(queue / n) == sha(REFUSED) for n in kept) and nothing_stored(tmp_path)


@pytest.mark.parametrize("hostile", [case("queue-long-name")], ids=lambda c: c.id)
def test_a_plan_with_a_245_character_name_is_archived_under_a_name_that_fits(
    tmp_path: Path, hostile: Any
) -> None:
    queue = tmp_path / "q"
    queue.mkdir()
    plan = queue / ("p" * 240 + ".toml")
    plan.write_text(REFUSED)
    old(plan)
    agent = make_agent(tmp_path, queue)
    assert agent.run() == 0
    assert agent.reads == [plan.name]
    archived = [p for p in (queue / "failed").iterdir() if p.suffix == ".toml"]
    assert [sha(p) for p in archived] == [sha(REFUSED)] and nothing_stored(tmp_path)
    assert all(len(p.name.encode()) <= 255 for p in (queue / "failed").iterdir())
    assert not plan.exists()


@pytest.mark.parametrize("hostile", [case("queue-nested-arrays")], ids=lambda c: c.id)
def test_a_plan_of_2000_nested_arrays_is_refused_and_the_agent_goes_on(tmp_path: Path, hostile: Any) -> None:
    queue = tmp_path / "q"
    queue.mkdir()
    deep = "x = " + "[" * 2000 + "]" * 2000 + "\n"
    (queue / "1-deep.toml").write_text(deep)
    (queue / "2-next.toml").write_text(REFUSED)
    for p in queue.iterdir():
        old(p)
    agent = make_agent(tmp_path, queue)
    assert agent.run() == 0
    assert agent.reads == ["1-deep.toml", "2-next.toml"]
    errors = {p.name.split("-")[0]: p.read_text() for p in (queue / "failed").glob("*.error.txt")}
    assert "nested 2000 levels deep" in errors["1"]
    assert [sha(p) for p in (queue / "failed").glob("1-*.toml")] == [sha(deep)]
    assert [sha(p) for p in (queue / "failed").glob("2-*.toml")] == [sha(REFUSED)]
    assert nothing_stored(tmp_path)


@pytest.mark.parametrize("hostile", [case("queue-check-crash")], ids=lambda c: c.id)
def test_a_check_that_breaks_on_a_plan_refuses_that_plan_and_never_stops_the_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hostile: Any
) -> None:
    queue = tmp_path / "q"
    queue.mkdir()
    (queue / "p.toml").write_text(REFUSED)
    old(queue / "p.toml")

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr("edgeprof.daemon.agent.parse_plan", broken)
    agent = make_agent(tmp_path, queue)
    assert agent.run() == 0
    error = next((queue / "failed").glob("*.error.txt")).read_text()
    assert "RecursionError" in error
    assert [sha(p) for p in (queue / "failed").glob("*.toml")] == [sha(REFUSED)] and nothing_stored(tmp_path)
