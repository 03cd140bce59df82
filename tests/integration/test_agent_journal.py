"""The agent's journal under a serving sweep (agent/daemon/agent.py ``configure_logging``): one line per
event, each the agent's; the libraries' per-request lines (httpx's "HTTP Request: GET .../metrics", twice a
second while llama-server is polled) only with -v. A real llama-server on 127.0.0.1, a tiny model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.serving import needs_server, serving_plan_toml

pytestmark = [pytest.mark.llama, pytest.mark.timeout(600)]


def agent_journal(tmp_path: Path, model: Path, *flags: str) -> list[str]:
    plan = tmp_path / "plan.toml"
    plan.write_text(serving_plan_toml(model, conc=[1, 2], requests=4))
    done = subprocess.run(
        [sys.executable, "-m", "edgeprof", "agent", "--db", str(tmp_path / "a.db"), "--plan", str(plan),
         "--once", "--no-telemetry", *flags],
        capture_output=True, text=True, timeout=500,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr.splitlines()


@needs_server
def test_a_serving_sweep_leaves_no_library_line_in_the_journal(tmp_path: Path, tiny_models) -> None:
    lines = agent_journal(tmp_path, tiny_models["Q4_K_M"])
    assert not [line for line in lines if "HTTP Request" in line or "httpx" in line]
    assert all(line.startswith("edgeprof-agent ") for line in lines), lines
    assert any("finished: 2 ok" in line for line in lines), lines


@needs_server
def test_verbose_shows_them(tmp_path: Path, tiny_models) -> None:
    lines = agent_journal(tmp_path, tiny_models["Q4_K_M"], "-v")
    assert any("HTTP Request" in line for line in lines)
    assert all(line.startswith("edgeprof-agent ") for line in lines)  # still one line per event
