"""Task runs end to end on the tiny generated models: HellaSwag on the shipped subset stored with its file's
sha256 and paired against the reference in the report; a run killed half-way keeps its finished tasks when
run again; a malformed task file refused at plan check with its line, nothing stored. The scoring itself is
tests/unit/runners/test_task_score.py, the intervals test_task_intervals.py."""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from support.paths import FIXTURES
from support.plans import plan_toml

from edgeprof.plan import PlanError, parse_plan
from edgeprof.report import build_rows, render_json, render_markdown
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Run
from edgeprof.storage.task_models import TaskItem, TaskResult
from edgeprof.sweep import run_plan

HS = FIXTURES / "tasks" / "hellaswag_val_first24.txt"
pytestmark = pytest.mark.timeout(300)


def task_plan(tmp_path: Path, models: dict[str, Path], **workload: Any) -> Any:
    entries = [{"path": str(models["F16"]), "label": "f16"}, {"path": str(models["Q4_K_M"]), "label": "q4"}]
    wl = {
        "name": "hs",
        "kind": "task",
        "task": "hellaswag",
        "file": str(HS),
        "tasks": 6,
        "ctx": 512,
        **workload,
    }
    text = plan_toml(entries, name="tasks", workloads=[wl], repeat={"warmup": 0, "steady": 1})
    return parse_plan(text, source=str(tmp_path / "plan.toml"), base=tmp_path)


def items(engine: Any, label: str) -> list[tuple[int, int, bool]]:
    with new_session(engine) as s:
        run = s.scalars(select(Run).where(Run.status == "ok", Run.model_label == label)).first()
        assert run is not None
        got = s.scalars(select(TaskItem).where(TaskItem.run_id == run.id).order_by(TaskItem.position))
        return [(it.task_index, it.pred, it.correct) for it in got]


@pytest.mark.llama
def test_hellaswag_end_to_end_and_report(
    tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(tmp_path / "cache"))
    engine = open_engine(tmp_path / "t.db")
    log = io.StringIO()
    out = run_plan(engine, task_plan(tmp_path, tiny_models), out=log)
    assert out.counts == {"ok": 2}, log.getvalue()
    assert "hellaswag: 6 tasks;" in log.getvalue() and "tokens to evaluate" in log.getvalue()
    with new_session(engine) as s:
        results = {r.is_reference: r for r in s.scalars(select(TaskResult))}
        rows = {r["model_label"]: r for r in build_rows(s, out.sweep_id)}
        md = render_markdown(list(rows.values()))
        js = json.loads(render_json(list(rows.values())))
    ref, q4 = results[True], results[False]
    assert ref.file_sha256 == hashlib.sha256(HS.read_bytes()).hexdigest() and ref.seed == 1
    assert ref.n_tasks == q4.n_tasks == 6 and ref.chance_pct == 25.0
    assert ref.accuracy_low_pct <= ref.accuracy_pct <= ref.accuracy_high_pct
    assert ref.reference_label == q4.reference_label == "f16"
    # the same 6 tasks in the same order, drawn as llama-perplexity draws them from 24
    assert [i for i, _, _ in items(engine, "f16")] == [i for i, _, _ in items(engine, "q4")]
    row = rows["q4"]
    assert row["task_paired_n"] == 6 and row["task_gained"] + row["task_lost"] <= 6
    assert row["task_diff_low_pts"] <= row["task_diff_pts"] <= row["task_diff_high_pts"]
    assert row["task_verdict"].startswith(("q4 loses", "q4 gains", "q4: no loss shown"))
    assert rows["f16"]["task_reference_label"] == "f16"
    assert "Task accuracy" in md and "q4 hellaswag (hs)" in md
    assert {"task_accuracy_pct", "task_diff_low_pts", "task_correct_per_kj"} <= set(js[0])
    # the checkpoints are gone once stored
    assert not list((tmp_path / "cache" / "tasks").glob("*.jsonl"))


@pytest.mark.llama
def test_a_run_killed_half_way_keeps_its_finished_tasks(
    tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from edgeprof.runners import FAULT_ENV

    # the clean figures, in a database and cache of their own
    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(tmp_path / "clean-cache"))
    clean = open_engine(tmp_path / "clean.db")
    assert run_plan(clean, task_plan(tmp_path, tiny_models), out=io.StringIO()).counts == {"ok": 2}

    monkeypatch.setenv("EDGEPROF_CACHE_DIR", str(tmp_path / "cache"))
    engine = open_engine(tmp_path / "k.db")
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    env[FAULT_ENV] = "kill@task3:q4_k_m"  # the q4 child dies by SIGKILL once 3 tasks are checkpointed
    first = run_plan(engine, task_plan(tmp_path, tiny_models), out=io.StringIO(), env=env)
    assert first.counts == {"ok": 1, "crashed": 1}
    log = io.StringIO()
    again = run_plan(engine, task_plan(tmp_path, tiny_models), out=log, retry_failed=True)
    assert again.counts == {"ok": 1}, log.getvalue()
    assert "3 kept from a run that stopped" in log.getvalue()
    with new_session(engine) as s:
        q4 = s.scalars(select(TaskResult).where(TaskResult.is_reference.is_(False))).one()
        assert q4.n_resumed == 3 and q4.n_tasks == 6
        assert s.scalar(select(func.count()).select_from(TaskResult)) == 2
    # what was kept and what was scored after are the clean run's, task for task
    assert items(engine, "q4") == items(clean, "q4")


def test_a_malformed_task_file_is_one_line_naming_it_and_nothing_runs(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    bad = tmp_path / "hs.txt"
    lines = HS.read_text().split("\n")
    lines[7] = "four"  # task 2's label
    bad.write_text("\n".join(lines))
    with pytest.raises(PlanError) as err:
        task_plan(tmp_path, tiny_models, file=str(bad))
    assert err.value.problems == [
        f"workload[0].file: {bad}: line 8: expected the right ending's index 0-3, got 'four'"
    ]
    truncated = tmp_path / "cut.txt"
    truncated.write_text("\n".join(HS.read_text().split("\n")[:100]) + "\n")
    with pytest.raises(PlanError, match=r"cut.txt: line 97: 100 lines, not a multiple of 6"):
        task_plan(tmp_path, tiny_models, file=str(truncated))
    with pytest.raises(PlanError, match="no such file"):
        task_plan(tmp_path, tiny_models, file=str(tmp_path / "missing.txt"))
