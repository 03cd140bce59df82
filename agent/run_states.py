"""What every reader of runs agrees on, kept free of heavy imports (``status`` starts with it alone)."""

from __future__ import annotations

from datetime import datetime, timezone

# A run in one of these states is not run again when the same plan is run again. "interrupted" is absent:
# an interrupted run is always redone. Failures are kept unless the user asks to retry them.
FINISHED_STATUSES = ("ok", "load_failed", "error", "crashed", "timeout", "skipped_memory")
# A config predicted not to fit in memory: stored with the numbers, never started (it would be OOM-killed).
SKIPPED_MEMORY = "skipped_memory"


def utcnow() -> datetime:
    """Naive UTC, the form every datetime column holds."""
    return datetime.now(timezone.utc).replace(tzinfo=None)
