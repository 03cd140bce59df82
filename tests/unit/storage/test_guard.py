"""One-line storage errors (storage/guard.py): the driver's words, not SQLAlchemy's preamble."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy.exc import OperationalError

from edgeprof.storage.guard import error_line

pytestmark = pytest.mark.timeout(30)


def test_an_autoflush_wrapped_error_gives_the_drivers_line() -> None:
    # SQLAlchemy prefixes an error raised during autoflush with a line of its own; the sweep once reported
    # that line instead of "database or disk is full".
    exc = OperationalError(
        "INSERT INTO x VALUES (?)", (1,), sqlite3.OperationalError("database or disk is full")
    )
    exc.add_detail(
        "raised as a result of Query-invoked autoflush; consider using a session.no_autoflush block"
    )
    assert str(exc).splitlines()[0].startswith("(raised as a result of")
    assert error_line(exc) == "database or disk is full"


def test_a_plain_error_gives_its_first_nonblank_line_or_its_type() -> None:
    assert error_line(OSError(28, "No space left on device")) == "[Errno 28] No space left on device"
    assert error_line(RuntimeError("\n\nfirst\nsecond")) == "first"
    assert error_line(RuntimeError("")) == "RuntimeError"


def test_a_history_with_a_version_that_is_not_a_whole_number_is_not_edgeprofs() -> None:
    """Flyway's ``'1.1'`` (or any non-integer version) beside an edgeprof-looking first step: foreign."""
    from edgeprof.storage.guard import _FIRST_STEP, _FIRST_STEP_TABLES, edgeprof_history

    tables = set(_FIRST_STEP_TABLES) | {"schema_version"}
    assert edgeprof_history([(1, _FIRST_STEP), (2, "telemetry")], tables)
    assert not edgeprof_history([(1, _FIRST_STEP), ("1.1", "add a column")], tables)
    assert not edgeprof_history([(1, _FIRST_STEP), (2.0, "telemetry")], tables)
