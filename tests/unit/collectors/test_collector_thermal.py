"""ThermalZonesCollector on trees rebuilt from real captures, plus small synthetic trees built in tmp_path."""

from __future__ import annotations

import errno
import re
import shutil
from pathlib import Path

import pytest
from support.captures import read_capture
from support.fakes import THERMAL, FakeRoot

from edgeprof.collectors.sysfs_thermal import ThermalZonesCollector, hottest_c, is_thermometer, sanitize_type


def tree_from_kernel_doc(root: Path) -> None:
    """The kernel doc's ``|thermal_zoneN:`` / ``|-----key: value`` listing -> files."""
    zone: Path | None = None
    for line in read_capture("thermal_zone-doc-example_kernel.txt"):
        head = re.fullmatch(r"\|(thermal_zone\d+):", line.strip())
        if head:
            zone = root / THERMAL / head.group(1)
            continue
        item = re.fullmatch(r"\|-+([a-z0-9_]+): (.*)", line.strip())
        if item and zone is not None:
            FakeRoot(root).value(zone / item.group(1), item.group(2))


def tree_from_nano_types(root: Path) -> dict[int, str]:
    """``/sys/class/thermal/thermal_zoneN: TYPE`` lines -> type files; returns index -> type."""
    types: dict[int, str] = {}
    for line in read_capture("thermal_zone-types_nano2gb_jp4.txt"):
        match = re.fullmatch(r"/sys/class/thermal/thermal_zone(\d+): (.+)", line.strip())
        if match:
            types[int(match.group(1))] = match.group(2)
            FakeRoot(root).value(root / THERMAL / f"thermal_zone{match.group(1)}" / "type", match.group(2))
    assert types, "capture format changed"
    return types


def test_kernel_doc_zone_temp_and_trip_points(tmp_path: Path) -> None:
    tree_from_kernel_doc(tmp_path)
    collector = ThermalZonesCollector(tmp_path)
    ok, reason = collector.available()
    assert ok, reason
    assert "1 zone: ACPI thermal zone" in reason
    [metric] = collector.metrics()
    assert (metric.name, metric.unit, metric.kind) == ("temp.acpi_thermal_zone_c", "C", "gauge")
    assert collector.sample() == {"temp.acpi_thermal_zone_c": 37.0}
    assert collector.trip_points() == {"temp.acpi_thermal_zone_c": [("critical", 100.0)]}
    assert collector.zone_types() == {"temp.acpi_thermal_zone_c": "ACPI thermal zone"}


def test_nano_zone_names_and_no_temps_yet(tmp_path: Path) -> None:
    tree_from_nano_types(tmp_path)
    collector = ThermalZonesCollector(tmp_path)
    names = [m.name for m in collector.metrics()]
    assert names == [
        "temp.ao_c",
        "temp.cpu_c",
        "temp.gpu_c",
        "temp.pll_c",
        "temp.pmic_die_c",
        "temp.thermal_fan_est_c",
    ]
    # The capture holds types only: without temp files every zone is unreadable, which is None, not 0.
    assert collector.sample() == dict.fromkeys(names)
    ok, reason = collector.available()
    assert not ok
    assert "none readable" in reason
    assert "CPU-therm (offline)" in reason


def test_nano_hottest_skips_pmic_placeholder(tmp_path: Path) -> None:
    types = tree_from_nano_types(tmp_path)
    # Synthetic temperatures (the capture has none); PMIC-Die at its constant 100 C as tegrastats shows it.
    synthetic_temps = {"CPU-therm": 41500, "GPU-therm": 39000, "PMIC-Die": 100000}
    for index, zone_type in types.items():
        FakeRoot(tmp_path).value(
            tmp_path / THERMAL / f"thermal_zone{index}" / "temp", str(synthetic_temps.get(zone_type, 30000))
        )
    collector = ThermalZonesCollector(tmp_path)
    assert collector.available().ok
    sample = collector.sample()
    assert sample["temp.pmic_die_c"] == 100.0
    assert collector.hottest_c(sample) == 41.5
    assert hottest_c(sample) == 41.5
    assert not is_thermometer("temp.pmic_die_zone4_c")
    assert is_thermometer("temp.cpu_c")


def test_disabled_and_offline_zones_read_none(tmp_path: Path) -> None:
    fake = FakeRoot(tmp_path)
    fake.thermal_zone(0, "cpu-thermal", 45250, mode="enabled")
    fake.thermal_zone(1, "gpu-thermal", 40000, mode="disabled")
    fake.thermal_zone(2, "cv0-thermal", -256000)  # Tegra's "sensor off" sentinel
    fake.thermal_zone(3, "tj-thermal", 46000)
    collector = ThermalZonesCollector(tmp_path)
    ok, reason = collector.available()
    assert ok
    assert "gpu-thermal (offline)" in reason
    assert collector.sample() == {
        "temp.cpu_c": 45.25,
        "temp.gpu_c": None,
        "temp.cv0_c": None,
        "temp.tj_c": 46.0,
    }
    assert collector.hottest_c(collector.sample()) == 46.0


@pytest.mark.parametrize("err", [errno.EIO, errno.ENODATA, errno.EAGAIN])
def test_temp_read_error_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, err: int) -> None:
    fake = FakeRoot(tmp_path)
    # A file cannot be made to fail with EIO in tmp_path, so the read itself is patched; the AGX Orin
    # hwmon capture shows sysfs attributes really do answer 'Input/output error'.
    fake.thermal_zone(0, "cpu-thermal", 45000)
    failing = fake.thermal_zone(1, "gpu-thermal", 40000) / "temp"
    real_read_text = Path.read_text

    def read_text(self: Path, *args: object, **kwargs: object) -> str:
        if self == failing:
            raise OSError(err, "simulated sysfs read failure")
        return real_read_text(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", read_text)
    collector = ThermalZonesCollector(tmp_path)
    assert collector.sample() == {"temp.cpu_c": 45.0, "temp.gpu_c": None}
    assert collector.safe_sample().error is None


def test_unreadable_temp_file_is_none(tmp_path: Path) -> None:
    fake = FakeRoot(tmp_path)
    # chmod 000 does not stop root (tests may run as root), so "unreadable" is a directory where the
    # file should be: open() fails with EISDIR, an OSError like EACCES would be.
    zone = fake.thermal_zone(0, "cpu-thermal", None)
    (zone / "temp").mkdir()
    fake.value(zone / "trip_point_0_temp", "garbage")
    collector = ThermalZonesCollector(tmp_path)
    assert collector.sample() == {"temp.cpu_c": None}
    assert collector.trip_points() == {"temp.cpu_c": []}


def test_zone_vanishing_after_discovery(tmp_path: Path) -> None:
    fake = FakeRoot(tmp_path)
    fake.thermal_zone(0, "cpu-thermal", 45000)
    zone = fake.thermal_zone(1, "gpu-thermal", 40000)
    collector = ThermalZonesCollector(tmp_path)
    assert collector.available().ok
    shutil.rmtree(zone)
    assert collector.sample() == {"temp.cpu_c": 45.0, "temp.gpu_c": None}


def test_duplicate_types_get_zone_index(tmp_path: Path) -> None:
    fake = FakeRoot(tmp_path)
    fake.thermal_zone(0, "acpitz", 27800)
    fake.thermal_zone(1, "x86_pkg_temp", 52000)
    fake.thermal_zone(2, "acpitz", 29800)
    fake.thermal_zone(10, "CPU-therm", 30000)  # sanitises onto "cpu" ...
    fake.thermal_zone(11, "cpu", 31000)  # ... as does this one
    collector = ThermalZonesCollector(tmp_path)
    assert [m.name for m in collector.metrics()] == [
        "temp.acpitz_zone0_c",
        "temp.x86_pkg_temp_c",
        "temp.acpitz_zone2_c",
        "temp.cpu_zone10_c",
        "temp.cpu_zone11_c",
    ]
    assert hottest_c(collector.sample()) == 52.0


def test_trip_points_ordered_by_index(tmp_path: Path) -> None:
    fake = FakeRoot(tmp_path)
    zone = fake.thermal_zone(0, "cpu-thermal", 45000)
    for number, trip_type, milli in [(10, "critical", 105000), (0, "passive", 95500), (2, "hot", 100000)]:
        fake.value(zone / f"trip_point_{number}_temp", str(milli))
        fake.value(zone / f"trip_point_{number}_type", trip_type)
    collector = ThermalZonesCollector(tmp_path)
    assert collector.trip_points() == {"temp.cpu_c": [("passive", 95.5), ("hot", 100.0), ("critical", 105.0)]}


def test_no_zones_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / THERMAL).mkdir(parents=True)  # what this project's VM has: the class dir, empty
    ok, reason = ThermalZonesCollector(tmp_path).available()
    assert not ok
    assert reason == "no thermal zones under /sys/class/thermal (common in VMs and containers)"
    ok, _ = ThermalZonesCollector(tmp_path / "nothing-here").available()
    assert not ok
    assert ThermalZonesCollector(tmp_path).sample() == {}


def test_hottest_c_edge_cases() -> None:
    assert hottest_c({}) is None
    assert hottest_c({"temp.cpu_c": None}) is None
    assert hottest_c({"cpu.util_pct": 99.0, "temp.cpu_c": 40.0}) == 40.0


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("CPU-therm", "cpu"),
        ("cpu-thermal", "cpu"),
        ("thermal-fan-est", "thermal_fan_est"),
        ("PMIC-Die", "pmic_die"),
        ("ACPI thermal zone", "acpi_thermal_zone"),
        ("Tboard_tegra", "tboard_tegra"),
        ("therm", "therm"),
        ("", ""),
    ],
)
def test_sanitize_type(raw: str, expected: str) -> None:
    assert sanitize_type(raw) == expected
