"""Stored verdicts read back for reports (agent/verdicts/summary.py): one value per config."""

from __future__ import annotations

from edgeprof.verdicts import VerdictLikeRow, config_verdict


def test_config_verdict_takes_the_worst_attempt() -> None:
    rows = [
        VerdictLikeRow("throttle", "not_throttled"),
        VerdictLikeRow("throttle", "throttled"),
        VerdictLikeRow("stability", "stable"),
        VerdictLikeRow("stability", "inconclusive"),
        VerdictLikeRow("interference", "quiet"),
        VerdictLikeRow("interference", "contended"),
    ]
    assert config_verdict(rows) == {
        "throttle": "throttled",
        "stability": "inconclusive",
        "interference": "contended",
    }
    assert config_verdict([]) == {"throttle": None, "stability": None, "interference": None}
