"""The stored verdict on an imported log (agent/verdicts/log_store.py): a table of the schema's head (step 19
of ``storage.migrations``) kept in its own module beside ``storage.models``, whose classes it extends."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Double, ForeignKey, Integer, Text
from sqlalchemy.orm import Mapped, mapped_column

from edgeprof.storage.models import Base


class LogVerdict(Base):
    """The verdict on an imported log (agent/verdicts/log_verdict.py), judged once and read by report,
    analyse and status: ``rule_version`` is the judgement's version (a stored verdict of another one is
    judged again), ``interval_ms`` the line spacing the user stated (None: as imported)."""

    __tablename__ = "log_verdict"

    id: Mapped[int] = mapped_column(primary_key=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweep.id"), unique=True)
    rule_version: Mapped[int] = mapped_column(Integer)
    interval_ms: Mapped[float | None] = mapped_column(Double)
    judged_at: Mapped[datetime]
    result_json: Mapped[str] = mapped_column(Text)
