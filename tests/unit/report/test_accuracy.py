"""The report's task-accuracy pieces on hand-made rows: the pairing, the cell, the budget's
``max_accuracy_loss`` just inside and just outside its bound, and the compare line."""

from __future__ import annotations

from typing import Any

import pytest

from edgeprof.plan.budget import QualityBudget, parse_budget
from edgeprof.report.accuracy import (
    accuracy_exclusion,
    compare_accuracy,
    compare_lines,
    fmt_accuracy,
    paired_counts,
)
from edgeprof.storage.task_models import TaskItem

pytestmark = pytest.mark.timeout(10)


def items(correct: list[bool], offset: int = 0) -> list[TaskItem]:
    return [TaskItem(position=i, task_index=i + offset, pred=0, correct=c) for i, c in enumerate(correct)]


def test_pairing_counts_discordant_tasks_only_on_the_same_tasks() -> None:
    ref = items([True, True, False, False, True])
    var = items([True, False, True, False, False])
    assert paired_counts(var, ref) == (5, 1, 2)  # 5 paired, gained 1 (position 2), lost 2 (positions 1, 4)
    assert paired_counts(var, items([True] * 5, offset=1)) is None  # other tasks: no pairing


def row(**kw: Any) -> dict[str, Any]:
    base = {
        "model_label": "q4",
        "task_accuracy_pct": 41.25,
        "task_accuracy_low_pct": 36.5,
        "task_accuracy_high_pct": 46.2,
        "task_reference_label": "f16",
        "task_diff_pts": -3.0,
        "task_diff_low_pts": -5.6,
        "task_diff_high_pts": -0.3,
    }
    return {**base, **kw}


def test_the_cell_says_the_difference_and_whether_it_is_shown() -> None:
    assert fmt_accuracy(row()) == "41.2 [36.5–46.2] -3.0"
    assert fmt_accuracy(row(task_diff_high_pts=0.4)) == "41.2 [36.5–46.2] -3.0 ns"
    assert fmt_accuracy(row(model_label="f16")) == "41.2 [36.5–46.2] ref"
    assert fmt_accuracy({"task_accuracy_pct": None}) == "—"


@pytest.mark.parametrize(("low", "excluded"), [(-2.99, False), (-3.0, False), (-3.01, True)])
def test_max_accuracy_loss_just_inside_and_outside(low: float, excluded: bool) -> None:
    budget = QualityBudget(max_accuracy_loss=3.0)
    why = accuracy_exclusion(row(task_diff_low_pts=low), budget)
    assert (why is not None) == excluded
    if excluded:
        assert why == "outside the quality budget: task accuracy loss up to 3.0 points over 3"


def test_max_accuracy_loss_unmeasured_unset_and_the_reference() -> None:
    budget = QualityBudget(max_accuracy_loss=1.0)
    assert "not measured" in (accuracy_exclusion(row(task_diff_low_pts=None), budget) or "")
    assert accuracy_exclusion(row(task_diff_low_pts=-9.0), QualityBudget()) is None  # no bound asked
    assert accuracy_exclusion(row(model_label="f16", task_diff_low_pts=None), budget) is None


def test_the_budget_key_is_validated() -> None:
    problems: list[str] = []
    assert parse_budget({"max_accuracy_loss": 2}, problems).max_accuracy_loss == 2.0 and not problems
    parse_budget({"max_accuracy_loss": -1}, problems)
    parse_budget({"max_accuracy_loss": 101}, problems)
    assert problems == [
        "quality_budget.max_accuracy_loss: must be between 0 and 100, got -1",
        "quality_budget.max_accuracy_loss: must be between 0 and 100, got 101",
    ]
    assert "task accuracy loss ≤ 2 points" in QualityBudget(max_accuracy_loss=2.0).describe()


def test_compare_pairs_the_same_tasks_across_sweeps() -> None:
    a = {
        "run_id": 1,
        "task_run_id": 1,
        "task_accuracy_pct": 50.0,
        "task_file_sha256": "x",
        "_task_items": [(0, 7, True), (1, 3, True), (2, 9, False), (3, 1, True)],
    }
    b = {
        "run_id": 5,
        "task_run_id": 5,
        "task_accuracy_pct": 25.0,
        "task_file_sha256": "x",
        "_task_items": [(0, 7, True), (1, 3, False), (2, 9, False), (3, 1, False)],
    }
    got = compare_accuracy(a, b)
    assert got["task_paired_n"] == 4 and got["task_diff_pts"] == pytest.approx(-50.0)
    line = compare_lines([{"model_label": "q4", "workload": "hs", **got}])[0]
    assert line.startswith("q4 hs: A 50.00 % -> B 25.00 %; B - A -50.0 points (95 % CI")
    other = compare_accuracy(a, {**b, "task_file_sha256": "y"})
    assert other["task_diff_pts"] is None and other["task_accuracy_b"] == 25.0
    assert "no difference claimed" in compare_lines([{"model_label": "q4", "workload": "hs", **other}])[0]
