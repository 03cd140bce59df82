"""The smaller hostile inputs: each a one-line refusal (exit 2, no traceback) or the state said as it is."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.hostile_cases import case
from support.hostile_run import refused
from support.plans import plan_toml
from typer.testing import CliRunner

from edgeprof.cli import app
from edgeprof.run_states import utcnow
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import AgentState

pytestmark = pytest.mark.timeout(120)


def _synthetic_model(tmp_path: Path) -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plan"))
    from test_check_what_run_uses import synthetic_gguf

    return synthetic_gguf(tmp_path / "synthetic.gguf")


@pytest.mark.parametrize("hostile", [case("small-hostile-options")], ids=lambda c: c.id)
def test_until_past_any_hour_is_one_line(tmp_path: Path, hostile: object) -> None:
    (tmp_path / "q").mkdir()
    until = "99999999999999999999:00"
    argv = ["agent", "--queue", str(tmp_path / "q"), "--until", until, "--db", str(tmp_path / "a.db")]
    refused(CliRunner().invoke(app, argv), "--until expects HH:MM")


def test_a_symlinked_queue_folder_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "q").symlink_to(tmp_path / "real")
    queue, db = str(tmp_path / "q"), str(tmp_path / "a.db")
    argv = ["agent", "--queue", queue, "--once", "--no-telemetry", "--db", db]
    refused(CliRunner().invoke(app, argv), "symbolic link")


@pytest.mark.parametrize("name", ["c#1.db", "c?x.db", "c%41.db"])
def test_a_db_path_that_sqlite_would_read_as_a_url_is_refused(tmp_path: Path, name: str, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    refused(CliRunner().invoke(app, ["db", "upgrade", "--db", name]), "would open another file")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_quality_budget_of_nan_or_inf_is_refused(tmp_path: Path, value: str) -> None:
    model = _synthetic_model(tmp_path)
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_toml({"m": model}) + f"\n[quality_budget]\nkld_mean = {value}\n")
    result = CliRunner().invoke(app, ["run", "--check", str(plan), "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2 and "kld_mean: must be a finite number" in result.output, result.output


def test_bench_threads_above_the_machines_cpus_are_refused(tmp_path: Path) -> None:
    model = _synthetic_model(tmp_path)
    argv = ["bench", "-m", str(model), "-t", "1000", "--db", str(tmp_path / "x.db")]
    result = CliRunner().invoke(app, argv)
    refused(result, "-t 1000", "logical CPUs")


@pytest.mark.parametrize("hostile", [case("agent-killed-status")], ids=lambda c: c.id)
def test_status_says_died_for_an_agent_killed_on_this_machine(tmp_path: Path, hostile: object) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that existed and is gone (kill -9 of the agent leaves the same)
    engine = open_engine(tmp_path / "a.db")
    with new_session(engine) as s:
        now = utcnow()
        s.add(AgentState(pid=dead.pid, hostname=socket.gethostname(), started_at=now, heartbeat_at=now,
                         state="running"))  # fmt: skip
        s.commit()
    engine.dispose()
    result = CliRunner().invoke(app, ["status", "--json", "--db", str(tmp_path / "a.db")])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["agent"]["state"] == "died"
