"""Report fields of the task runs: accuracy with its Wilson interval, the paired loss against the reference.

A task run's own row carries its figures; every other row of the same model label carries those of the
model's first task run in plan order (``task_run_id`` says which), as the quality figures do. The loss
against the reference pairs the two runs' outcomes task by task (same file, same subset, same order): the
discordant tasks give the difference and its Bonett-Price interval (runners/tasks/intervals.py), and the
sentence says "loses" or "gains" only when the whole interval lies on that side of zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.plan.budget import QualityBudget
from edgeprof.runners.tasks.intervals import loss_sentence, paired_difference
from edgeprof.storage.task_models import TaskItem, TaskResult

EMPTY = "—"

# (field, JSON type, unit): every one null where the row's model has no task run
TASK_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("task_workload", "string|null", ""),
    ("task_kind", "string|null", ""),
    ("task_n", "integer|null", "tasks"),
    ("task_correct", "integer|null", "tasks"),
    ("task_accuracy_pct", "number|null", "%"),
    ("task_accuracy_low_pct", "number|null", "%"),
    ("task_accuracy_high_pct", "number|null", "%"),
    ("task_chance_pct", "number|null", "%"),
    ("task_reference_label", "string|null", ""),
    ("task_paired_n", "integer|null", "tasks"),
    ("task_gained", "integer|null", "tasks"),
    ("task_lost", "integer|null", "tasks"),
    ("task_diff_pts", "number|null", "points"),
    ("task_diff_low_pts", "number|null", "points"),
    ("task_diff_high_pts", "number|null", "points"),
    ("task_verdict", "string|null", ""),
    ("task_correct_per_kj", "number|null", "tasks/kJ"),
    ("task_file_sha256", "string|null", ""),
    ("task_run_id", "integer|null", ""),
)


def paired_counts(variant: list[TaskItem], reference: list[TaskItem]) -> tuple[int, int, int] | None:
    """(n paired, gained, lost) over the tasks both runs scored at the same positions; None when the two
    did not score the same tasks (another file, subset or order: no pairing is possible)."""
    ref = {it.position: it for it in reference}
    n = gained = lost = 0
    for it in variant:
        other = ref.get(it.position)
        if other is None:
            continue
        if other.task_index != it.task_index:
            return None
        n += 1
        gained += int(it.correct and not other.correct)
        lost += int(other.correct and not it.correct)
    return (n, gained, lost) if n else None


def _items(session: Session, run_id: int) -> list[TaskItem]:
    return list(
        session.scalars(select(TaskItem).where(TaskItem.run_id == run_id).order_by(TaskItem.position))
    )


def _values(session: Session, tr: TaskResult, row: Mapping[str, Any], ref_run: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "task_workload": row.get("workload"),
        "task_kind": tr.task,
        "task_n": tr.n_tasks,
        "task_correct": tr.n_correct,
        "task_accuracy_pct": tr.accuracy_pct,
        "task_accuracy_low_pct": tr.accuracy_low_pct,
        "task_accuracy_high_pct": tr.accuracy_high_pct,
        "task_chance_pct": tr.chance_pct,
        "task_reference_label": tr.reference_label,
        "task_correct_per_kj": tr.correct_per_kj,
        "task_file_sha256": tr.file_sha256,
        "task_run_id": tr.run_id,
    }
    if tr.is_reference:
        out.update(task_paired_n=tr.n_tasks, task_gained=0, task_lost=0, task_diff_pts=0.0)
        return out
    pair = (
        paired_counts(_items(session, tr.run_id), _items(session, ref_run)) if ref_run is not None else None
    )
    if pair is not None:
        n, gained, lost = pair
        diff, low, high = paired_difference(gained, lost, n)
        out.update(
            task_paired_n=n,
            task_gained=gained,
            task_lost=lost,
            task_diff_pts=100.0 * diff,
            task_diff_low_pts=100.0 * low,
            task_diff_high_pts=100.0 * high,
            task_verdict=loss_sentence(str(row.get("model_label")), gained, lost, n),
        )
    return out


def attach_tasks(session: Session, rows: list[dict[str, Any]]) -> None:
    """Fill the task fields of every row (null where the sweep has no task run for the model)."""
    run_ids = [int(r["run_id"]) for r in rows]
    results: dict[int, TaskResult] = {}
    if run_ids:
        for tr in session.scalars(
            select(TaskResult).where(TaskResult.run_id.in_(run_ids)).order_by(TaskResult.id)
        ):
            results[tr.run_id] = tr  # the last one written for a run speaks
    # the reference's run of each task workload: (workload, reference label) -> run id
    refs = {(r["workload"], r["model_label"]): int(r["run_id"]) for r in rows if int(r["run_id"]) in results}
    first_of_label: dict[str, int] = {}
    values: dict[int, dict[str, Any]] = {}
    for row in rows:
        rid = int(row["run_id"])
        if rid in results and row["status"] == "ok":
            tr = results[rid]
            values[rid] = _values(session, tr, row, refs.get((row["workload"], tr.reference_label)))
            first_of_label.setdefault(row["model_label"], rid)
    for row in rows:
        rid = int(row["run_id"])
        source = rid if rid in values else first_of_label.get(row["model_label"])
        got = values.get(source) if source is not None else None
        for name, _type, _unit in TASK_FIELDS:
            row[name] = got.get(name) if got is not None else None


def fmt_accuracy(row: Mapping[str, Any]) -> str:
    """'41.3 [36.5–46.1] −1.2 pts' : accuracy % with its 95 % interval, then the paired difference against
    the reference ('ref' on the reference itself, '±0 ns' where no difference is shown)."""
    acc = row.get("task_accuracy_pct")
    if acc is None:
        return EMPTY
    head = f"{acc:.1f} [{row['task_accuracy_low_pct']:.1f}–{row['task_accuracy_high_pct']:.1f}]"
    if row.get("task_reference_label") == row.get("model_label"):
        return f"{head} ref"
    diff, low, high = row.get("task_diff_pts"), row.get("task_diff_low_pts"), row.get("task_diff_high_pts")
    if diff is None or low is None or high is None:
        return head
    shown = "" if low > 0 or high < 0 else " ns"  # ns: the interval holds 0, no difference shown
    return f"{head} {diff:+.1f}{shown}"


def accuracy_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per task run: accuracy, interval, chance, the paired verdict and correct answers per kJ."""
    out: list[str] = []
    for row in rows:
        if row.get("task_run_id") is None or row.get("task_run_id") != row.get("run_id"):
            continue
        line = (
            f"{row['model_label']} {row['task_kind']} ({row['task_workload']}): "
            f"{row['task_accuracy_pct']:.2f} % (95 % CI {row['task_accuracy_low_pct']:.1f}–"
            f"{row['task_accuracy_high_pct']:.1f}; chance {row['task_chance_pct']:.1f} %), n={row['task_n']}"
        )
        if row.get("task_reference_label") == row.get("model_label"):
            line += "; the reference"
        elif row.get("task_verdict"):
            line += f"; {row['task_verdict']} vs {row['task_reference_label']}"
        else:
            line += f"; not paired with {row['task_reference_label']} (its run did not finish)"
        if row.get("task_correct_per_kj") is not None:
            line += f"; {row['task_correct_per_kj']:.1f} correct/kJ"
        out.append(line)
    return out


# -- compare: the same task workload in two sweeps -----------------------------------------------------------

COMPARE_TASK_FIELDS = (
    "task_accuracy_a",
    "task_accuracy_b",
    "task_diff_pts",
    "task_diff_low_pts",
    "task_diff_high_pts",
    "task_paired_n",
)


def task_items_of(session: Session, row: Mapping[str, Any]) -> list[tuple[int, int, bool]] | None:
    """(position, task index, correct) of a task run's own row, for pairing across sweeps; None elsewhere."""
    if row.get("task_run_id") is None or row.get("task_run_id") != row.get("run_id"):
        return None
    return [(it.position, it.task_index, it.correct) for it in _items(session, int(row["run_id"]))]


def compare_accuracy(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> dict[str, Any]:
    """B against A for a task run's row in both sweeps: both accuracies and, where both scored the same tasks
    (same file and subset, items attached as ``_task_items``), the paired difference B - A in points."""
    out: dict[str, Any] = dict.fromkeys(COMPARE_TASK_FIELDS)
    if (
        a is None
        or b is None
        or a.get("task_run_id") != a.get("run_id")
        or b.get("task_run_id") != b.get("run_id")
    ):
        return out
    out["task_accuracy_a"], out["task_accuracy_b"] = a.get("task_accuracy_pct"), b.get("task_accuracy_pct")
    items_a, items_b = a.get("_task_items"), b.get("_task_items")
    if not items_a or not items_b or a.get("task_file_sha256") != b.get("task_file_sha256"):
        return out
    by_pos = {pos: (idx, ok) for pos, idx, ok in items_a}
    n = gained = lost = 0
    for pos, idx, ok in items_b:
        other = by_pos.get(pos)
        if other is None or other[0] != idx:
            continue
        n += 1
        gained += int(ok and not other[1])
        lost += int(other[1] and not ok)
    if n:
        diff, low, high = paired_difference(gained, lost, n)
        out.update(
            task_paired_n=n,
            task_diff_pts=100 * diff,
            task_diff_low_pts=100 * low,
            task_diff_high_pts=100 * high,
        )
    return out


def compare_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per task workload in both sweeps: A's and B's accuracy, and B - A with its paired interval."""
    out = []
    for r in rows:
        if r.get("task_accuracy_a") is None or r.get("task_accuracy_b") is None:
            continue
        line = (
            f"{r['model_label']} {r['workload']}: A {r['task_accuracy_a']:.2f} % -> "
            f"B {r['task_accuracy_b']:.2f} %"
        )
        if r.get("task_diff_pts") is not None:
            low, high = r["task_diff_low_pts"], r["task_diff_high_pts"]
            said = "B lower" if high < 0 else "B higher" if low > 0 else "no difference shown"
            line += (
                f"; B - A {r['task_diff_pts']:+.1f} points (95 % CI {low:+.1f} to {high:+.1f}, "
                f"{r['task_paired_n']} paired tasks): {said}"
            )
        else:
            line += "; not paired (other tasks or items missing): no difference claimed"
        out.append(line)
    return out


def accuracy_exclusion(row: Mapping[str, Any], budget: QualityBudget) -> str | None:
    """Why a variant is outside the budget's ``max_accuracy_loss`` (None: no such bound, or within it):
    the upper end of its paired loss's 95 % interval is over the bound, or no paired loss was measured."""
    bound = budget.max_accuracy_loss
    if bound is None or row.get("task_reference_label") == row.get("model_label"):
        return None
    low = row.get("task_diff_low_pts")
    if low is None:
        return 'task accuracy loss not measured (the budget bounds it: add a kind = "task" workload)'
    if -float(low) > bound:
        return f"outside the quality budget: task accuracy loss up to {-float(low):.1f} points over {bound:g}"
    return None
