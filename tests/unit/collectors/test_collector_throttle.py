"""ThrottleCountersCollector on synthetic thermal_throttle trees built in tmp_path.

No capture of these files exists in tests/fixtures/captures and this project's VM has none (see
tests/fixtures/captures/vm_docker_amd-epyc_2cpu), so every tree here is synthetic; file names follow the
kernel's arch/x86/kernel/cpu/mce/therm_throt.c.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from support.fakes import CPU, FakeRoot

from edgeprof.collectors.x86_throttle import ThrottleCountersCollector


def test_two_packages_deduped(tmp_path: Path) -> None:
    fake = FakeRoot(tmp_path)
    fake.throttle_counters(0, 0, 3, 11)
    fake.throttle_counters(1, 0, 0, 11)
    fake.throttle_counters(2, 1, 1, 4)
    fake.throttle_counters(3, 1, 0, 4)
    collector = ThrottleCountersCollector(tmp_path)
    ok, reason = collector.available()
    assert ok
    assert reason == "4 CPUs, 2 packages with thermal-throttle counters"
    metrics = {m.name: m for m in collector.metrics()}
    assert metrics["throttle.cpu0.core_count"].unit == "count"
    assert metrics["throttle.cpu0.core_time_ms"].unit == "ms"
    assert metrics["throttle.package1.count"].kind == "counter"
    assert collector.sample() == {
        "throttle.cpu0.core_count": 3.0,
        "throttle.cpu0.core_time_ms": 30.0,
        "throttle.cpu1.core_count": 0.0,
        "throttle.cpu1.core_time_ms": 0.0,
        "throttle.cpu2.core_count": 1.0,
        "throttle.cpu2.core_time_ms": 10.0,
        "throttle.cpu3.core_count": 0.0,
        "throttle.cpu3.core_time_ms": 0.0,
        "throttle.package0.count": 11.0,
        "throttle.package0.time_ms": 110.0,
        "throttle.package1.count": 4.0,
        "throttle.package1.time_ms": 40.0,
    }
    assert set(collector.sample()) == set(metrics)


def test_without_total_time_files(tmp_path: Path) -> None:
    # Older kernels (before the throttle-time files were added) have only the *_count files.
    FakeRoot(tmp_path).throttle_counters(0, 0, 2, 5, with_time=False)
    collector = ThrottleCountersCollector(tmp_path)
    assert [m.name for m in collector.metrics()] == ["throttle.cpu0.core_count", "throttle.package0.count"]


def test_offline_cpu_reads_none_and_package_uses_sibling(tmp_path: Path) -> None:
    fake = FakeRoot(tmp_path)
    cpu0 = fake.throttle_counters(0, 0, 3, 11)
    fake.throttle_counters(1, 0, 1, 11)
    collector = ThrottleCountersCollector(tmp_path)
    assert collector.available().ok
    shutil.rmtree(cpu0 / "thermal_throttle")  # what CPU hotplug does to the directory
    sample = collector.sample()
    assert sample["throttle.cpu0.core_count"] is None
    assert sample["throttle.cpu1.core_count"] == 1.0
    assert sample["throttle.package0.count"] == 11.0


def test_unreadable_counter_is_none(tmp_path: Path) -> None:
    cpu0 = FakeRoot(tmp_path).throttle_counters(0, 0, 3, 11)
    collector = ThrottleCountersCollector(tmp_path)
    assert collector.available().ok
    # chmod 000 does not stop root, so the counter becomes a directory: the read fails for any user.
    for name in ("core_throttle_count", "package_throttle_count"):
        (cpu0 / "thermal_throttle" / name).unlink()
        (cpu0 / "thermal_throttle" / name).mkdir()
    sample = collector.sample()
    assert sample["throttle.cpu0.core_count"] is None
    assert sample["throttle.package0.count"] is None
    assert sample["throttle.cpu0.core_time_ms"] == 30.0


def test_missing_topology_skips_package_counters(tmp_path: Path) -> None:
    FakeRoot(tmp_path).throttle_counters(0, None, 1, 2)
    collector = ThrottleCountersCollector(tmp_path)
    ok, reason = collector.available()
    assert ok
    assert "no physical_package_id" in reason
    assert all(not m.name.startswith("throttle.package") for m in collector.metrics())


def test_no_counters_is_unavailable(tmp_path: Path) -> None:
    # This project's VM: cpu0/cpu1 with topology but no thermal_throttle directory.
    for index in (0, 1):
        FakeRoot(tmp_path).value(tmp_path / CPU / f"cpu{index}" / "topology" / "physical_package_id", "0")
    ok, reason = ThrottleCountersCollector(tmp_path).available()
    assert not ok
    assert reason.startswith("no thermal_throttle counters under /sys/devices/system/cpu/cpu*/")
    assert ThrottleCountersCollector(tmp_path / "absent").available().ok is False
    assert ThrottleCountersCollector(tmp_path).sample() == {}
