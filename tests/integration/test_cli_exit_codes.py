"""A sweep whose configs failed says so in its exit status, after running to its end and storing everything:
a real ``edgeprof run`` with one crashing config exits 1; resumed, with nothing left to do, 0; the agent,
a service, keeps going and archives the plan as done (its failures are in the database and the report)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support.runs import clean_env, edgeprof, two_quant_plan

pytestmark = pytest.mark.llama

CRASH_Q8 = "segv@load:q8_0"  # the Q8_0 config's worker dies of SIGSEGV while loading; Q4_K_M runs


def _runs(db: Path) -> list[tuple[str, str, str | None, int]]:
    """(label, status, reason, steady measurements) of every run, in order."""
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT r.model_label, r.status, r.reason, "
            "(SELECT count(*) FROM measurement m WHERE m.run_id = r.id AND m.kind = 'steady') "
            "FROM run r ORDER BY r.id"
        ).fetchall()


def test_a_sweep_with_a_crashing_config_exits_1_and_stores_everything(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    db = tmp_path / "x.db"
    plan = tmp_path / "plan.toml"
    plan.write_text(two_quant_plan(tiny_models, name="exits", timeout=120), encoding="utf-8")
    proc = edgeprof("run", str(plan), "--db", str(db), "--no-telemetry", env=clean_env(CRASH_Q8))
    assert proc.returncode == 1, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr + proc.stdout
    # the whole sweep ran, then its summary line, then why the status is 1
    assert proc.stdout.rstrip().splitlines()[-1] == "sweep 1: 1 crashed, 1 ok"
    assert "edgeprof: sweep 1: 1 of 2 configs did not end ok (1 crashed)" in proc.stderr
    runs = _runs(db)
    assert [(label, status) for label, status, _reason, _n in runs] == [("q8", "crashed"), ("q4", "ok")]
    assert runs[0][2] and "SIGSEGV" in runs[0][2]  # the failed config is kept, with its reason
    assert runs[1][3] == 1  # the one that ran is measured
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status, n_specs FROM sweep").fetchall() == [("completed", 2)]
    # Resumed: both configs are finished (the crash too, until --retry-failed), nothing ran, nothing failed.
    again = edgeprof("run", str(plan), "--db", str(db), "--no-telemetry", env=clean_env())
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.rstrip().splitlines()[-1] == "sweep 1: nothing to do"
    # Retried without the fault: the crashed config now runs ok, so the command succeeds.
    retried = edgeprof("run", str(plan), "--db", str(db), "--no-telemetry", "--retry-failed", env=clean_env())
    assert retried.returncode == 0, retried.stderr[-2000:]
    assert retried.stdout.rstrip().splitlines()[-1] == "sweep 1: 1 ok"
    assert len(_runs(db)) == 3  # the crashed attempt stays stored beside its retry


def test_the_agent_goes_on_when_a_config_crashes(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    queue = tmp_path / "queue"
    queue.mkdir()
    db = tmp_path / "a.db"
    (queue / "crashy.toml").write_text(two_quant_plan(tiny_models, name="agent-exits", timeout=120))
    proc = edgeprof(
        "agent", "--queue", str(queue), "--once", "--no-telemetry", "--db", str(db), env=clean_env(CRASH_Q8)
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert [p.name.split("-")[0] for p in (queue / "done").glob("*.toml")] == ["crashy"]
    assert [(label, status) for label, status, _r, _n in _runs(db)] == [("q8", "crashed"), ("q4", "ok")]

