"""The task-accuracy tables (kind = "task" workloads): one result per run and one row per scored task.

Kept beside storage/models.py (same ``Base``, so the same metadata, schema check and transfer); storage/db.py
imports this module, so every engine edgeprof opens knows the two tables.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Double, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from edgeprof.storage.models import Base


class TaskResult(Base):
    """A variant's accuracy on a task set (HellaSwag, Winogrande, multiple choice), scored as
    llama-perplexity scores it: one per task run. The task file by path and sha256, the subset by its
    size and seed; accuracy with its 95 % Wilson interval and a random pick's accuracy; the energy of the
    scoring while this run measured it. The pairing with the reference is the report's (task_item)."""

    __tablename__ = "task_result"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id"), index=True)
    task: Mapped[str] = mapped_column(String(32))
    file_path: Mapped[str] = mapped_column(Text)
    file_sha256: Mapped[str] = mapped_column(String(64))
    seed: Mapped[int] = mapped_column(Integer)
    tasks_asked: Mapped[int | None] = mapped_column(Integer)
    n_available: Mapped[int] = mapped_column(Integer)
    ctx: Mapped[int] = mapped_column(Integer)
    reference_label: Mapped[str] = mapped_column(String(255))
    reference_sha256: Mapped[str] = mapped_column(String(64))
    is_reference: Mapped[bool] = mapped_column(Boolean)
    n_tasks: Mapped[int] = mapped_column(Integer)
    n_correct: Mapped[int] = mapped_column(Integer)
    accuracy_pct: Mapped[float] = mapped_column(Double)
    accuracy_low_pct: Mapped[float] = mapped_column(Double)
    accuracy_high_pct: Mapped[float] = mapped_column(Double)
    chance_pct: Mapped[float] = mapped_column(Double)
    n_resumed: Mapped[int] = mapped_column(Integer)
    n_tokens: Mapped[int | None] = mapped_column(Integer)
    min_margin: Mapped[float | None] = mapped_column(Double)
    energy_j: Mapped[float | None] = mapped_column(Double)
    n_correct_measured: Mapped[int | None] = mapped_column(Integer)
    correct_per_kj: Mapped[float | None] = mapped_column(Double)


class TaskItem(Base):
    """One scored task of a task run: which ending won, whether it was a right one, and by how much (the
    mean log-prob of the best ending minus the next best)."""

    __tablename__ = "task_item"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    task_index: Mapped[int] = mapped_column(Integer)
    pred: Mapped[int] = mapped_column(Integer)
    correct: Mapped[bool] = mapped_column(Boolean)
    margin: Mapped[float | None] = mapped_column(Double)
    scores_json: Mapped[str | None] = mapped_column(Text)  # each ending's mean log-prob, in file order
