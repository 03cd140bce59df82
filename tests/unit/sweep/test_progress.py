"""Sweep progress lines on a plain stream: a phase printed once per change, and the colours of outcomes. A
real sweep under a terminal is tests/integration/test_progress_terminal.py."""

from __future__ import annotations

import io

import pytest

from edgeprof.sweep import Progress, outcome_style

pytestmark = pytest.mark.timeout(60)


def test_plain_progress_prints_a_phase_once_per_change() -> None:
    out = io.StringIO()
    p = Progress(3, out)
    p.start(1, "m ctx=512")
    p.phase("cooldown 61.0 °C")
    p.phase("cooldown 60.2 °C")  # same phase, new temperature: no new line in a log
    p.event({"event": "measurement", "kind": "steady", "rep": 1, "tg_tps": 10.0})
    p.event({"event": "measurement", "kind": "steady", "rep": 2, "tg_tps": 11.0})
    p.finish(1, "run 1 m", "ok", 2.0, 2)
    lines = out.getvalue().splitlines()
    assert lines == [
        "[1/3] m ctx=512 … running",
        "[1/3]   cooldown 61.0 °C",
        "[1/3]   steady rep 1",
        "[1/3] run 1 m  ok  (2.0 s, ETA 0:04)",
    ]


def test_statuses_get_colours_failures_red_noisy_yellow() -> None:
    assert outcome_style("crashed: SIGSEGV") == "red"
    assert outcome_style("timeout after 60 s") == "red"
    assert outcome_style("ok, unstable (CV 14 %)") == "yellow"
    assert outcome_style("ok  tg 51.0 t/s") == "green"
