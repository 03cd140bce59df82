"""The agent's schedule and systemd link without a process (agent/daemon/agent.py): the --until window
runs through midnight, and sd_notify is a no-op without systemd."""

from __future__ import annotations

import datetime as dt

import pytest

from edgeprof.daemon import Notifier, window_closed


def test_notifier_is_a_no_op_without_systemd() -> None:
    assert Notifier(address="").send(ready="1") is False


@pytest.mark.parametrize(
    ("start", "now", "closed"),
    [
        ("23:00", "23:30", False),
        ("23:00", "06:59", False),  # the next morning, before the window closes
        ("23:00", "07:00", True),
        ("05:00", "06:00", False),
        ("05:00", "07:01", True),
    ],
)
def test_time_window(start: str, now: str, closed: bool) -> None:
    day = dt.datetime(2026, 11, 29)
    s = dt.datetime.combine(day, dt.time.fromisoformat(start))
    n = dt.datetime.combine(day, dt.time.fromisoformat(now))
    if n < s:
        n += dt.timedelta(days=1)
    assert window_closed(dt.time(7, 0), s, n) is closed
    assert window_closed(None, s, n) is False
