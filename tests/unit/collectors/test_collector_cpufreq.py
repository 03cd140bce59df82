"""CpuFreqCollector on a tree rebuilt from the x86 ``grep .`` capture and on synthetic policy trees."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from support.captures import read_capture
from support.fakes import CPU, FakeRoot

from edgeprof.collectors.sysfs_cpufreq import CpuFreqCollector, parse_cpu_list


def tree_from_grep(root: Path, name: str) -> int:
    """``grep . files`` output (``/abs/path:value``) -> files under root; returns how many were written."""
    count = 0
    for line in read_capture(name):
        path, sep, value = line.partition(":")
        if sep and path.startswith("/sys/"):
            FakeRoot(root).value(path, value)
            count += 1
    assert count, "capture format changed"
    return count


def test_x86_capture_per_cpu_fallback(tmp_path: Path) -> None:
    tree_from_grep(tmp_path, "cpufreq_x86_pastebin.txt")
    collector = CpuFreqCollector(tmp_path)
    ok, reason = collector.available()
    assert ok, reason
    assert reason.startswith("1 cpufreq policy: policy0 (cpu0-3")
    # The capture stops before scaling_cur_freq/scaling_max_freq: current comes from cpuinfo_cur_freq and
    # the cap, absent, is not declared at all.
    assert [(m.name, m.unit) for m in collector.metrics()] == [
        ("cpufreq.policy0.cur_mhz", "MHz"),
        ("cpufreq.policy0.hw_max_mhz", "MHz"),
    ]
    assert collector.sample() == {"cpufreq.policy0.cur_mhz": 2501.0, "cpufreq.policy0.hw_max_mhz": 2501.0}
    assert collector.policy_cpus() == {"policy0": [0, 1, 2, 3]}
    assert collector.governors() == {"policy0": None}


def test_x86_capture_shared_policy_reported_once(tmp_path: Path) -> None:
    tree_from_grep(tmp_path, "cpufreq_x86_pastebin.txt")
    # Old kernels link cpuN/cpufreq of CPUs sharing a clock to one directory; related_cpus names cpu0-3.
    for cpu in (1, 2, 3):
        (tmp_path / CPU / f"cpu{cpu}").mkdir(parents=True)
        (tmp_path / CPU / f"cpu{cpu}" / "cpufreq").symlink_to(tmp_path / CPU / "cpu0" / "cpufreq")
    collector = CpuFreqCollector(tmp_path)
    assert collector.available().ok
    assert list(collector.policy_cpus()) == ["policy0"]


def test_cluster_policies(tmp_path: Path) -> None:
    fake = FakeRoot(tmp_path)
    # Synthetic Orin-like layout: two 4-core clusters, the second capped below its hardware maximum.
    fake.cpufreq_policy(0, "0 1 2 3", 1984000, 2201600, 2201600, "schedutil", driver="tegra194")
    fake.cpufreq_policy(4, "4 5 6 7", 729600, 1190400, 2201600, "performance", driver="tegra194")
    collector = CpuFreqCollector(tmp_path)
    ok, reason = collector.available()
    assert ok
    assert reason == (
        "2 cpufreq policies via tegra194: policy0 (cpu0-3, schedutil), policy4 (cpu4-7, performance)"
    )
    assert collector.sample() == {
        "cpufreq.policy0.cur_mhz": 1984.0,
        "cpufreq.policy0.max_mhz": 2201.6,
        "cpufreq.policy0.hw_max_mhz": 2201.6,
        "cpufreq.policy4.cur_mhz": 729.6,
        "cpufreq.policy4.max_mhz": 1190.4,
        "cpufreq.policy4.hw_max_mhz": 2201.6,
    }
    assert collector.governors() == {"policy0": "schedutil", "policy4": "performance"}
    assert {m.kind for m in collector.metrics()} == {"gauge"}


def test_unreadable_and_vanished_files_read_none(tmp_path: Path) -> None:
    fake = FakeRoot(tmp_path)
    policy0 = fake.cpufreq_policy(0, "0-1", 1000000, 2000000, 2000000, "schedutil", driver="tegra194")
    policy2 = fake.cpufreq_policy(2, "2-3", 1000000, 2000000, 2000000, "schedutil", driver="tegra194")
    collector = CpuFreqCollector(tmp_path)
    assert collector.available().ok
    # chmod 000 does not stop root, so the file becomes a directory: reading it fails like EACCES would.
    (policy0 / "scaling_cur_freq").unlink()
    (policy0 / "scaling_cur_freq").mkdir()
    (policy2 / "scaling_max_freq").unlink()
    fake.value(policy2 / "cpuinfo_max_freq", "0")
    sample = collector.sample()
    assert sample["cpufreq.policy0.cur_mhz"] is None
    assert sample["cpufreq.policy2.max_mhz"] is None
    assert sample["cpufreq.policy2.hw_max_mhz"] is None  # 0 kHz is not a clock
    assert sample["cpufreq.policy2.cur_mhz"] == 1000.0


def test_inactive_policy_ebusy_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeRoot(tmp_path)
    # The kernel answers EBUSY for a policy whose CPUs are all offline (a parked Jetson cluster); tmp_path
    # files cannot do that, so the read is patched.
    fake.cpufreq_policy(0, "0-3", 1000000, 2000000, 2000000, "schedutil", driver="tegra194")
    fake.cpufreq_policy(4, "4-7", 1000000, 2000000, 2000000, "schedutil", driver="tegra194")
    real_read_text = Path.read_text

    def read_text(self: Path, *args: object, **kwargs: object) -> str:
        if self.parent.name == "policy4" and self.name.startswith(("scaling_", "cpuinfo_")):
            raise OSError(errno.EBUSY, "Device or resource busy")
        return real_read_text(self, *args, **kwargs)  # type: ignore[arg-type]

    collector = CpuFreqCollector(tmp_path)
    assert collector.available().ok
    monkeypatch.setattr(Path, "read_text", read_text)
    sample = collector.sample()
    assert sample["cpufreq.policy0.cur_mhz"] == 1000.0
    assert [sample[f"cpufreq.policy4.{k}"] for k in ("cur_mhz", "max_mhz", "hw_max_mhz")] == [None] * 3
    assert collector.governors()["policy4"] is None


def test_no_policies_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / CPU / "cpufreq").mkdir(parents=True)  # this project's VM: the directory exists, empty
    (tmp_path / CPU / "cpu0").mkdir()
    ok, reason = CpuFreqCollector(tmp_path).available()
    assert not ok
    assert reason == "no cpufreq policies (VM or cpufreq driver not loaded)"
    assert CpuFreqCollector(tmp_path / "absent").available().ok is False
    assert CpuFreqCollector(tmp_path).sample() == {}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0-3", [0, 1, 2, 3]),
        ("0 1 2 3", [0, 1, 2, 3]),
        ("0-1,4-5,7", [0, 1, 4, 5, 7]),
        ("", []),
        (None, []),
        ("x", []),
    ],
)
def test_parse_cpu_list(text: str | None, expected: list[int]) -> None:
    assert parse_cpu_list(text) == expected
