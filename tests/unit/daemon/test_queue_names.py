"""A plan whose file name is not UTF-8 is archived by a safe name and reported; the agent never exits on it
(it once crashed in archive_name, and the plan stayed, so every restart crashed again)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from support.hostile_cases import case

from edgeprof.daemon import Agent, AgentConfig
from edgeprof.daemon.queue import archive_name, encodable_name
from edgeprof.storage.db import open_engine

REFUSED = b'name = "bad"\n[matrix]\nmodels = ["/no/such/model.gguf"]\n'


@pytest.mark.timeout(60)
@pytest.mark.parametrize("hostile", [case("queue-name-not-utf8")], ids=lambda c: c.id)
def test_a_plan_named_in_bytes_that_are_not_utf8_is_archived_and_the_next_runs(
    tmp_path: Path, hostile: Any
) -> None:
    queue = tmp_path / "q"
    queue.mkdir()
    bad = os.path.join(os.fsencode(queue), b"\xff\xfe-bad-utf8.toml")
    with open(bad, "wb") as fh:
        fh.write(REFUSED)
    (queue / "2-next.toml").write_bytes(REFUSED)
    for entry in os.listdir(os.fsencode(queue)):
        os.utime(os.path.join(os.fsencode(queue), entry), (1, 1))  # settled long ago
    engine = open_engine(tmp_path / "a.db")
    agent = Agent(engine, None, AgentConfig(queue=queue, plan=None, once=True, telemetry=False, poll_s=0.05))
    assert agent.run() == 0
    failed = sorted(os.listdir(queue / "failed"))
    assert any(n.startswith("__-bad-utf8-") and n.endswith(".toml") for n in failed), failed
    assert any(n.startswith("2-next-") for n in failed), failed
    assert os.listdir(os.fsencode(queue)) == [b"failed"]  # nothing left to crash a restart
    engine.dispose()


def test_archive_names_are_always_encodable() -> None:
    name = os.fsdecode(b"\xff\xfe-bad-utf8.toml")
    assert encodable_name(name) == "__-bad-utf8.toml"
    archive_name(name, "20260101T000000").encode("utf-8")
