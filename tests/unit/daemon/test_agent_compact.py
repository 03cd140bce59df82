"""The agent's housekeeping after a sweep (``--compact-keep-raw``, agent/daemon/agent.py): what compaction
freed goes to the log, and a compaction that fails is logged, never a failed sweep or a stopped agent.
Synthetic databases, no sweep run."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from edgeprof.daemon import Agent, AgentConfig
from edgeprof.storage.db import open_engine


def _agent(engine: object, tmp_path: Path) -> Agent:
    config = AgentConfig(queue=None, plan=tmp_path / "p.toml", once=True, compact_keep_raw_s=0.0)
    return Agent(engine, None, config)  # type: ignore[arg-type]


def test_what_compaction_freed_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    engine = open_engine(tmp_path / "a.db")
    with caplog.at_level(logging.INFO, logger="edgeprof.agent"):
        _agent(engine, tmp_path)._compact(0.0)
    assert any(m.startswith("db compact: compacted 0 sweep(s)") for m in caplog.messages), caplog.messages


def test_a_failing_compaction_is_logged_and_never_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = create_engine(f"sqlite:///{tmp_path / 'no-such-folder' / 'a.db'}")  # cannot even be opened
    with caplog.at_level(logging.INFO, logger="edgeprof.agent"):
        _agent(broken, tmp_path)._compact(0.0)
    assert "db compact after the sweep failed" in caplog.messages
