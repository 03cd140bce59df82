"""The collector registry and ``describe`` (doctor), on a tree rebuilt from this project's real VM capture."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.captures import CAPTURES, read_capture
from support.fakes import FakeRoot

from edgeprof.collectors import registry
from edgeprof.collectors.base import Availability, Collector, Metric, SampleValues
from edgeprof.collectors.registry import (
    ALL_HOST_COLLECTORS,
    PLATFORM_COLLECTORS,
    build_collectors,
    collector_names,
    describe,
)

VM_CAPTURE = CAPTURES / "vm_docker_amd-epyc_2cpu"
UNITS = {"C", "MHz", "pct", "MB", "uJ", "count", "ms", "s"}


def tree_from_vm_listing(root: Path) -> None:
    """Replay ``sysfs_listing.txt``: an ``ls -A``/``ls -d`` that printed nothing or names means those
    directories exist; ``cat``/``grep .`` output becomes file contents; errors mean absent."""
    fake = FakeRoot(root)
    blocks: list[tuple[str, list[str]]] = []
    for line in read_capture("sysfs_listing.txt", VM_CAPTURE):
        if line.startswith("$ "):
            blocks.append((line[2:], []))
        elif blocks:
            blocks[-1][1].append(line)
    for command, output in blocks:
        if any("No such file" in line for line in output):
            continue
        args = command.split()
        if args[:2] == ["ls", "-A"]:
            (root / args[2].lstrip("/")).mkdir(parents=True, exist_ok=True)
        elif args[:2] == ["ls", "-d"]:
            for directory in output:
                (root / directory.lstrip("/")).mkdir(parents=True, exist_ok=True)
        elif args[0] == "cat":
            fake.write(args[1], "\n".join(output) + "\n")
        elif args[:2] == ["grep", "."]:
            for row in output:
                file_path, _, value = row.partition(":")
                fake.value(file_path, value)


def test_describe_on_real_vm_tree(tmp_path: Path) -> None:
    tree_from_vm_listing(tmp_path)
    assert (tmp_path / "sys/class/thermal").is_dir()
    report = {entry["name"]: entry for entry in describe(tmp_path)}
    assert list(report) == [
        "psutil_host",
        "sysfs_thermal",
        "sysfs_cpufreq",
        "rapl",
        "x86_throttle",
        "proc_stat",
        "tegrastats",
        "jtop",
        "jetson_gpu_devfreq",
        "jetson_oc",
        "nvml",
        "rpi_firmware",
    ]
    # No Jetson, no NVIDIA GPU, no Pi here: each platform source is unavailable and says why.
    for name in ("tegrastats", "jtop", "jetson_gpu_devfreq", "jetson_oc", "nvml", "rpi_firmware"):
        assert report[name]["ok"] is False and report[name]["reason"], name
    assert "tegrastats not found" in report["tegrastats"]["reason"]
    assert report["jtop"]["reason"].startswith(("jtop:", "jetson-stats not installed"))
    assert report["nvml"]["reason"].startswith(("NVML unavailable", "nvidia-ml-py not installed"))
    assert report["jetson_gpu_devfreq"]["reason"].startswith("no GPU devfreq node under /sys/class/devfreq")
    assert "not a Raspberry Pi" in report["rpi_firmware"]["reason"]
    assert report["psutil_host"]["ok"]
    assert report["sysfs_thermal"] == {
        "name": "sysfs_thermal",
        "ok": False,
        "reason": "no thermal zones under /sys/class/thermal (common in VMs and containers)",
        "metrics": [],
    }
    assert report["sysfs_cpufreq"]["reason"] == "no cpufreq policies (VM or cpufreq driver not loaded)"
    assert report["rapl"]["reason"].startswith("no RAPL zones under /sys/class/powercap")
    assert report["x86_throttle"]["reason"].startswith("no thermal_throttle counters")
    assert not any(report[name]["ok"] for name in ("sysfs_thermal", "sysfs_cpufreq", "rapl", "x86_throttle"))
    # present = 0-1 in the capture, so exactly two per-core utilisation metrics
    metric_names = [m["name"] for m in report["psutil_host"]["metrics"]]
    assert [n for n in metric_names if re.fullmatch(r"cpu\d+\.util_pct", n)] == [
        "cpu0.util_pct",
        "cpu1.util_pct",
    ]
    for entry in report.values():
        for metric in entry["metrics"]:
            assert set(metric) == {"name", "unit", "kind"}
            assert metric["unit"] in UNITS
            assert metric["kind"] in {"gauge", "counter"}


def test_describe_lists_metrics_of_available_collectors(tmp_path: Path) -> None:
    FakeRoot(tmp_path).thermal_zone(0, "cpu-thermal", 41000)  # synthetic one-zone tree
    [entry] = [e for e in describe(tmp_path) if e["name"] == "sysfs_thermal"]
    assert entry["ok"]
    assert entry["metrics"] == [{"name": "temp.cpu_c", "unit": "C", "kind": "gauge"}]


def test_build_collectors_by_name(tmp_path: Path) -> None:
    everything = build_collectors(tmp_path, None)
    assert [type(c) for c in everything] == [*ALL_HOST_COLLECTORS, *PLATFORM_COLLECTORS]
    assert all(c.root == tmp_path for c in everything)
    picked = build_collectors(tmp_path, ["rapl", "sysfs_thermal"])
    assert [c.name for c in picked] == ["sysfs_thermal", "rapl"]  # registry order, not request order
    with pytest.raises(ValueError, match=r"unknown collector\(s\) tegrastat; known: "):
        build_collectors(tmp_path, ["tegrastat"])
    assert len(set(collector_names())) == len(collector_names())


class _Broken(Collector):
    name = "broken_probe"

    def available(self) -> Availability:
        raise RuntimeError("driver exploded")

    def metrics(self) -> list[Metric]:
        return []

    def sample(self) -> SampleValues:
        return {}


class _Fine(Collector):
    name = "fine_platform"

    def available(self) -> Availability:
        return Availability(True, "always here")

    def metrics(self) -> list[Metric]:
        return [Metric("gpu.util_pct", "pct")]

    def sample(self) -> SampleValues:
        return {"gpu.util_pct": None}


def test_platform_collectors_extend_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "PLATFORM_COLLECTORS", [_Broken, _Fine])
    report = {e["name"]: e for e in describe(tmp_path)}
    assert report["broken_probe"]["ok"] is False
    assert report["broken_probe"]["reason"] == "probe failed: RuntimeError: driver exploded"
    assert report["fine_platform"]["metrics"] == [{"name": "gpu.util_pct", "unit": "pct", "kind": "gauge"}]
    assert [c.name for c in build_collectors(tmp_path, ["fine_platform"])] == ["fine_platform"]


def test_duplicate_names_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    class Clash(_Fine):
        name = "rapl"

    monkeypatch.setattr(registry, "PLATFORM_COLLECTORS", [Clash])
    with pytest.raises(ValueError, match="'rapl'"):
        collector_names()
