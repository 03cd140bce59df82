"""The tegrastats collector without its child process: finding the executable, why it is unavailable, the
metric units, and the test double the process tests drive (tests/integration/test_tegrastats_process.py)."""

from __future__ import annotations

import os
from pathlib import Path

from support.fakes import FakeRoot
from support.paths import FIXTURES

from edgeprof.collectors.tegrastats import NOT_FOUND_REASON, TegrastatsCollector, metric_for
from edgeprof.collectors.tegrastats_parse import TEGRASTATS_METRIC_UNITS

FAKE = FIXTURES / "fake_tegrastats" / "tegrastats"


def test_fake_is_labelled_synthetic_and_executable() -> None:
    head = FAKE.read_text(encoding="utf-8")[:600]
    assert "SYNTHETIC TEST DOUBLE" in head
    assert os.access(FAKE, os.X_OK)


def test_missing_executable(tmp_path: Path) -> None:
    ok, reason = TegrastatsCollector(root=tmp_path).available()
    assert not ok
    assert reason == NOT_FOUND_REASON

    ok, reason = TegrastatsCollector(executable=str(tmp_path / "nope" / "tegrastats")).available()
    assert not ok
    assert "not found" in reason and "nope" in reason

    collector = TegrastatsCollector(root=tmp_path)
    values = collector.sample()  # never raises; the fixed names read None
    assert values and all(v is None for v in values.values())
    collector.close()


def test_jetson_without_tegrastats_has_its_own_reason(tmp_path: Path) -> None:
    FakeRoot(tmp_path).l4t_release(
        "# R36 (release), REVISION: 4.4, GCID: 1, BOARD: generic, EABI: aarch64, DATE: x"
    )
    ok, reason = TegrastatsCollector(root=tmp_path).available()
    assert not ok
    assert "Jetson detected" in reason and "R36" in reason and "nvidia-l4t-tools" in reason


def test_fallback_path_under_root(tmp_path: Path) -> None:
    target = FakeRoot(tmp_path).write("usr/bin/tegrastats", "#!/bin/sh\nexit 0\n")
    assert TegrastatsCollector(root=tmp_path).find_executable() == str(target)
    target.chmod(0o644)
    ok, reason = TegrastatsCollector(root=tmp_path).available()
    assert not ok and "not executable" in reason


def test_metric_units_cover_every_family() -> None:
    for family in TEGRASTATS_METRIC_UNITS:
        name = f"{family.prefix}x{family.suffix}"
        assert metric_for(name).unit == family.unit
    assert TegrastatsCollector().metrics()  # before any line: the fixed names
    assert {m.name for m in TegrastatsCollector().metrics()} >= {"mem.ram_used_mb", "gpu.util_pct"}
