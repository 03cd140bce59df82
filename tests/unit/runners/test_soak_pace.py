"""The soak's test-only slowdown (runners/soak.py:SlowWhileFileSays, armed by
runners/llama_worker.py:slowdown_for_tests), without llama.cpp: it acts only when the test suite armed it,
does nothing while its file says anything but ``slow F``, and books exactly the time it waited (the
stretched steps add up to the slowdown asked for)."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgeprof.runners import FAULT_ARM_ENV, FAULT_ARM_VALUE, SLOW_FILE_ENV
from edgeprof.runners.llama_worker import slowdown_for_tests
from edgeprof.runners.soak import SlowWhileFileSays


def test_the_slowdown_is_off_unless_the_suite_armed_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SLOW_FILE_ENV, str(tmp_path / "slow"))
    monkeypatch.delenv(FAULT_ARM_ENV, raising=False)
    assert slowdown_for_tests() is None  # a stray variable in a user's shell slows nothing
    monkeypatch.setenv(FAULT_ARM_ENV, "someone-else")
    assert slowdown_for_tests() is None
    monkeypatch.setenv(FAULT_ARM_ENV, FAULT_ARM_VALUE)
    pace = slowdown_for_tests()
    assert isinstance(pace, SlowWhileFileSays) and pace.path == str(tmp_path / "slow")
    monkeypatch.delenv(SLOW_FILE_ENV)
    assert slowdown_for_tests() is None


def test_it_waits_only_while_the_file_says_slow_and_books_what_it_waited(tmp_path: Path) -> None:
    flag = tmp_path / "slow"
    pace = SlowWhileFileSays(str(flag), check_s=0.0)
    assert pace(10.0) == 0.0  # no file: full speed
    flag.write_text("fast\n")
    assert pace(10.0) == 0.0
    flag.write_text("slow 0.2\n")  # a 20 % slowdown: each step owes a quarter of its time
    slept = sum(pace(1.0) for _ in range(40))
    assert slept > 0.0
    # every owed millisecond is either waited (and booked) or still owed (less than 0 when a wait overran):
    # 40 steps x 1 ms x 0.2 / 0.8
    assert slept + pace.owed_s * 1000.0 == pytest.approx(40 * 1.0 * 0.25)
    flag.write_text("fast\n")
    assert pace(10.0) == 0.0 and pace.owed_s == 0.0  # back to full speed, nothing carried over


def test_a_simulated_step_is_booked_at_the_simulations_time_whatever_the_machine_took(tmp_path: Path) -> None:
    flag = tmp_path / "slow"
    pace = SlowWhileFileSays(str(flag), check_s=0.0)
    flag.write_text("sim 10\n")
    assert [3.0 + pace(3.0), 25.0 + pace(25.0)] == [10.0, 10.0]  # a fast and a slow step, both 10 ms
    flag.write_text("sim 16.5\n")  # the simulated device slowed down
    assert 3.0 + pace(3.0) == 16.5
    flag.write_text("fast\n")
    assert pace(3.0) == 0.0  # the machine's own time again
