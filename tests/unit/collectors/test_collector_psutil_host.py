"""PsutilHostCollector: /proc/stat utilisation from this project's real VM capture, per-CPU clock labelling,
and the child-process metrics of this test's own process (a real short-lived child is sampled in
tests/integration/test_psutil_host_child.py)."""

from __future__ import annotations

import os
from collections import namedtuple
from pathlib import Path

import psutil
import pytest
from support.captures import CAPTURES, read_capture
from support.fakes import FakeRoot

from edgeprof.collectors.psutil_host import (
    CpuTimes,
    PsutilHostCollector,
    parse_meminfo_mb,
    parse_proc_stat,
    util_pct,
)

VM_CAPTURE = CAPTURES / "vm_docker_amd-epyc_2cpu"
FakeFreq = namedtuple("FakeFreq", "current min max")


def vm_proc_stat() -> str:
    return "\n".join(read_capture("proc_stat.txt", VM_CAPTURE)) + "\n"


def advance(stat_text: str, cpu: str, busy: int, idle: int) -> str:
    """The same /proc/stat with ``busy`` jiffies added to user and ``idle`` to idle of one cpu line."""
    out = []
    for line in stat_text.splitlines():
        fields = line.split()
        if fields and fields[0] == cpu:
            fields[1] = str(int(fields[1]) + busy)
            fields[4] = str(int(fields[4]) + idle)
            line = " ".join(fields)
        out.append(line)
    return "\n".join(out) + "\n"


def drop_line(stat_text: str, cpu: str) -> str:
    return "\n".join(line for line in stat_text.splitlines() if line.split()[:1] != [cpu]) + "\n"


def test_parse_real_proc_stat() -> None:
    times = parse_proc_stat(vm_proc_stat())
    assert set(times) == {"cpu", "cpu0", "cpu1"}
    # cpu0 29322 0 2670 13200 24 0 4 46 0 0 -> 8 summed fields; idle + iowait
    assert times["cpu0"].total == 29322 + 2670 + 13200 + 24 + 4 + 46
    assert times["cpu0"].idle == 13200 + 24


def test_util_pct() -> None:
    assert util_pct(CpuTimes(100, 50), CpuTimes(200, 75)) == 75.0
    assert util_pct(CpuTimes(100, 50), CpuTimes(100, 50)) is None  # no time passed: unknown, not 0
    assert util_pct(None, CpuTimes(1, 1)) is None
    assert util_pct(CpuTimes(100, 50), CpuTimes(110, 65)) == 0.0  # iowait stepping back: clamped


def test_utilisation_from_captured_stat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeRoot(tmp_path)
    monkeypatch.setattr(psutil, "cpu_freq", lambda percpu=False: [])
    stat = vm_proc_stat()
    fake.write("proc/stat", stat)
    fake.write("sys/devices/system/cpu/present", "0-1\n")  # as captured on the VM
    collector = PsutilHostCollector(tmp_path)
    ok, reason = collector.available()
    assert ok
    assert "2 CPUs" in reason
    assert "no per-CPU clocks" in reason
    names = [m.name for m in collector.metrics()]
    assert names[:3] == ["cpu.util_pct", "cpu0.util_pct", "cpu1.util_pct"]
    assert not any(n.endswith("freq_mhz") for n in names)

    stat2 = advance(advance(advance(stat, "cpu0", 30, 70), "cpu1", 100, 0), "cpu", 130, 70)
    fake.write("proc/stat", stat2)
    sample = collector.sample()
    assert set(sample) == set(names)
    assert sample["cpu0.util_pct"] == pytest.approx(30.0)
    assert sample["cpu1.util_pct"] == pytest.approx(100.0)
    assert sample["cpu.util_pct"] == pytest.approx(65.0)

    # cpu1 parked (Jetson nvpmodel style): its line leaves /proc/stat; cpu0 keeps its own numbers.
    fake.write("proc/stat", drop_line(advance(stat2, "cpu0", 10, 10), "cpu1"))
    sample = collector.sample()
    assert sample["cpu0.util_pct"] == pytest.approx(50.0)
    assert sample["cpu1.util_pct"] is None


def test_missing_proc_stat_gives_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(psutil, "cpu_count", lambda logical=True: 3)
    collector = PsutilHostCollector(tmp_path)
    ok, reason = collector.available()
    assert ok
    assert "unreadable" in reason
    sample = collector.sample()
    assert [sample[f"cpu{i}.util_pct"] for i in range(3)] == [None, None, None]
    assert sample["cpu.util_pct"] is None


def test_per_cpu_clock_only_when_one_to_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    FakeRoot(tmp_path).write("sys/devices/system/cpu/present", "0-3\n")
    freqs = [
        FakeFreq(1200.0, 0.0, 0.0),
        FakeFreq(0.0, 0.0, 0.0),
        FakeFreq(2400.0, 0, 0),
        FakeFreq(800.0, 0, 0),
    ]
    monkeypatch.setattr(psutil, "cpu_freq", lambda percpu=False: freqs)
    collector = PsutilHostCollector(tmp_path)
    assert collector.available().ok
    sample = collector.sample()
    assert [sample[f"cpu{i}.freq_mhz"] for i in range(4)] == [1200.0, None, 2400.0, 800.0]
    # Per-cluster policies (3 entries for 4 CPUs) cannot be labelled per CPU.
    monkeypatch.setattr(psutil, "cpu_freq", lambda percpu=False: freqs[:3])
    assert all(collector.sample()[f"cpu{i}.freq_mhz"] is None for i in range(4))
    fresh = PsutilHostCollector(tmp_path)
    assert fresh.available().ok
    assert not any(m.name.endswith("freq_mhz") for m in fresh.metrics())


def test_live_memory_and_load() -> None:
    collector = PsutilHostCollector()
    assert collector.available().ok
    sample = collector.sample()
    for name in ("mem.ram_used_mb", "mem.ram_available_mb", "load.avg1"):
        value = sample[name]
        assert isinstance(value, float), name
    assert sample["mem.ram_available_mb"] is not None and sample["mem.ram_available_mb"] > 0
    assert sample["proc.rss_mb"] is None and sample["proc.cpu_pct"] is None
    units = {m.name: m.unit for m in collector.metrics()}
    assert units["mem.ram_used_mb"] == "MB"
    assert units["proc.cpu_pct"] == "pct"


def test_child_pid_in_constructor() -> None:
    collector = PsutilHostCollector(child_pid=os.getpid())
    assert collector.available().ok
    rss = collector.sample()["proc.rss_mb"]
    assert rss is not None and rss > 0


def vm_meminfo() -> str:
    return "\n".join(read_capture("proc_meminfo.txt", VM_CAPTURE)) + "\n"


def test_memory_from_the_captured_meminfo() -> None:
    # MemTotal 24683784 kB, MemAvailable 24198644 kB, SwapTotal = SwapFree = 0 in the capture
    got = parse_meminfo_mb(vm_meminfo())
    assert got == {
        "mem.ram_used_mb": pytest.approx((24683784 - 24198644) / 1024),
        "mem.ram_available_mb": pytest.approx(24198644 / 1024),
        "mem.swap_used_mb": 0.0,
    }


def test_a_meminfo_without_memavailable_is_left_to_psutil() -> None:
    # kernels before 3.14 have no MemAvailable: psutil estimates it, this parser does not guess
    text = "".join(line + "\n" for line in vm_meminfo().splitlines() if not line.startswith("MemAvailable"))
    assert parse_meminfo_mb(text) is None
    assert parse_meminfo_mb("") is None


def test_the_sample_reads_memory_under_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeRoot(tmp_path)
    monkeypatch.setattr(psutil, "cpu_freq", lambda percpu=False: [])
    fake.write("proc/stat", vm_proc_stat())
    fake.write("sys/devices/system/cpu/present", "0-1\n")
    fake.write("proc/meminfo", vm_meminfo())
    sample = PsutilHostCollector(tmp_path).sample()
    assert sample["mem.ram_available_mb"] == pytest.approx(24198644 / 1024)  # the capture, not this machine


def test_the_meminfo_definitions_are_psutils_on_this_machine() -> None:
    ours = parse_meminfo_mb(Path("/proc/meminfo").read_text())
    theirs = psutil.virtual_memory()
    assert ours is not None
    # two reads a few microseconds apart on a machine other tests share: within 64 MiB
    assert ours["mem.ram_used_mb"] == pytest.approx(theirs.used / 2**20, abs=64)
    assert ours["mem.ram_available_mb"] == pytest.approx(theirs.available / 2**20, abs=64)
    assert ours["mem.swap_used_mb"] == pytest.approx(psutil.swap_memory().used / 2**20, abs=64)
