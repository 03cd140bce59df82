"""pyperf-style system check (agent/device/syscheck.py) on synthetic /proc and /sys trees built in tmp_path,
whose answer is known: each rule fires on its condition and stays silent without it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.fakes import FakeRoot

from edgeprof.device import BusyScan, busy_processes, render, system_warnings

pytestmark = pytest.mark.timeout(60)


def _quiet_tree(root: Path) -> FakeRoot:
    """One idle process, no swap in use, the performance governor: nothing to warn about."""
    fake = FakeRoot(root)
    fake.process(10, "sshd", 100)
    fake.meminfo(MemTotal=8000000, SwapTotal=2097148, SwapFree=2097148)
    fake.scaling_governor(0, "performance")
    return fake


def test_a_quiet_tuned_machine_gets_no_warning(tmp_path: Path) -> None:
    root = _quiet_tree(tmp_path).root
    assert system_warnings(root, sleep=lambda s: None, sample_s=0.5) == []


def test_a_busy_process_is_named_with_its_share_of_a_core(tmp_path: Path) -> None:
    fake = _quiet_tree(tmp_path)
    root = fake.root
    fake.process(20, "ffmpeg (camera)", 1000)

    tck = os.sysconf("SC_CLK_TCK")

    def sleep(seconds: float) -> None:  # while "sleeping", ffmpeg burns 0.8 core over the 0.5 s
        fake.process(20, "ffmpeg (camera)", 1000 + round(0.8 * 0.5 * tck))
        fake.process(10, "sshd", 100 + round(0.02 * 0.5 * tck))  # 2 % of a core: below the limit

    busy = busy_processes(root, sample_s=0.5, sleep=sleep, clk_tck=float(tck))
    assert busy == [(20, "ffmpeg (camera)", pytest.approx(0.8))]
    fake.process(20, "ffmpeg (camera)", 1000)
    fake.process(10, "sshd", 100)
    warnings = system_warnings(root, sample_s=0.5, sleep=sleep)
    assert len(warnings) == 1 and "ffmpeg (camera) (pid 20) 80%" in warnings[0]


class Clock:
    """Simulated time: the scan's window is what the test says passed, its sleeps are recorded."""

    def __init__(self) -> None:
        self.now, self.slept = 100.0, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


def test_a_scan_started_earlier_waits_only_for_what_is_left_of_its_window(tmp_path: Path) -> None:
    fake = _quiet_tree(tmp_path)
    tck = os.sysconf("SC_CLK_TCK")
    clock = Clock()
    scan = BusyScan(fake.root, sample_s=0.5, sleep=clock.sleep, clock=clock, clk_tck=float(tck))
    clock.now += 0.3  # the sweep hashed its models meanwhile, and ffmpeg burnt 0.8 core of the 0.5 s
    fake.process(20, "ffmpeg", 0)  # not there when the scan began: never called busy on half a window
    fake.process(10, "sshd", 100 + round(0.8 * 0.5 * tck))
    assert scan.result() == [(10, "sshd", pytest.approx(0.8))]
    assert clock.slept == [0.2]


def test_a_scan_whose_window_already_passed_does_not_wait(tmp_path: Path) -> None:
    fake = _quiet_tree(tmp_path)
    tck = os.sysconf("SC_CLK_TCK")
    clock = Clock()
    scan = BusyScan(fake.root, sample_s=0.5, sleep=clock.sleep, clock=clock, clk_tck=float(tck))
    clock.now += 1.0  # two windows long: the share is over the whole of it (0.4 core, not 0.8)
    fake.process(10, "sshd", 100 + round(0.4 * 1.0 * tck))
    assert scan.result() == [(10, "sshd", pytest.approx(0.4))]
    assert clock.slept == []


def test_a_window_grown_past_four_samples_is_sampled_afresh(tmp_path: Path) -> None:
    """A sweep that waited minutes for another's lease: a hog that started late would be averaged away
    over the long window, so the scan looks again over a window of its own."""
    fake = _quiet_tree(tmp_path)
    tck = os.sysconf("SC_CLK_TCK")
    clock = Clock()
    scan = BusyScan(fake.root, sample_s=0.5, sleep=clock.sleep, clock=clock, clk_tck=float(tck))
    clock.now += 2.01  # just past 4 x 0.5 s
    fake.process(10, "sshd", 100 + round(0.9 * 2.0 * tck))  # busy before the fresh window: not counted

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        fake.process(10, "sshd", 100 + round(0.9 * 2.0 * tck) + round(0.6 * 0.5 * tck))

    scan.sleep = sleep
    assert scan.result() == [(10, "sshd", pytest.approx(0.6))]
    assert clock.slept == [0.5]
    # just inside four samples the long window is kept, and nothing is waited
    scan2 = BusyScan(fake.root, sample_s=0.5, sleep=clock.sleep, clock=clock, clk_tck=float(tck))
    clock.now += 1.99
    assert scan2.result() == [] and clock.slept == [0.5]


def test_governor_turbo_boost_swap_and_jetson_clocks(tmp_path: Path) -> None:
    fake = _quiet_tree(tmp_path)
    root = fake.root
    fake.scaling_governor(0, "schedutil")
    fake.intel_no_turbo(0)
    fake.meminfo(SwapTotal=2097148, SwapFree=1048572)
    unlocked = {"jetson_clocks": {"locked": False}}
    text = "\n".join(system_warnings(root, sleep=lambda s: None, jetson=unlocked))
    assert "governor schedutil on 1 of 1 policies" in text
    assert "Intel turbo boost is on" in text
    assert "swap in use: 1024 MiB" in text
    assert "Jetson clocks are not locked" in text
    locked = system_warnings(root, sleep=lambda s: None, jetson={"jetson_clocks": {"locked": True}})
    assert not any("Jetson" in w for w in locked)
    fake.intel_no_turbo(1)
    fake.cpufreq_boost(1)
    assert any("CPU frequency boost is on" in w for w in system_warnings(root, sleep=lambda s: None))


def test_doctor_renders_the_system_check() -> None:
    none_ll = {"ok": False, "reason": "x"}
    info = {"device": {}, "llama_cpp": none_ll, "collectors": [], "system_check": ["swap in use: 5 MiB"]}
    assert "system check" in render(info) and "warning: swap in use: 5 MiB" in render(info)
    assert "nothing found" in render(info | {"system_check": []})
