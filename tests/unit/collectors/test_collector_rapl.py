"""RaplCollector: zone naming from the kernel-doc capture, the root-only mode from the permissions capture,
counter wraparound, and synthetic multi-zone trees built in tmp_path."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest
from support.captures import read_capture
from support.fakes import POWERCAP, SYNTHETIC_RANGE_UJ, FakeRoot

from edgeprof.collectors.base import counter_delta
from edgeprof.collectors.rapl import ROOT_ONLY_REASON, RaplCollector, energy_j_between


def tree_from_kernel_doc(root: Path) -> Path:
    """``cat .../intel-rapl:0/name`` and its output -> the zone's name file (the doc spells the class
    ``power_cap``; real systems and the collector use ``/sys/class/powercap``)."""
    lines = read_capture("rapl_zone-name_kernel-doc.txt")
    match = re.fullmatch(r"cat (\S+)/(intel-rapl:[\d:]+)/name", lines[0].strip())
    assert match, "capture format changed"
    zone = root / POWERCAP / match.group(2)
    FakeRoot(root).value(zone / "name", lines[1].strip())
    return zone


def apply_permission_capture(root: Path) -> Path:
    """Give the fixture's energy_uj the mode shown by ``ls -la`` in the permissions capture."""
    [line] = read_capture("rapl_energy_uj-permissions_x86.txt")
    fields = line.split()
    mode_text, owner, path = fields[0], fields[2], fields[-1]
    assert owner == "root"
    bits = 0
    for offset, (flag, bit) in enumerate(
        [
            ("r", 0o400),
            ("w", 0o200),
            ("x", 0o100),
            ("r", 0o40),
            ("w", 0o20),
            ("x", 0o10),
            ("r", 4),
            ("w", 2),
            ("x", 1),
        ]
    ):
        if mode_text[1 + offset] == flag:
            bits |= bit
    target = root / path.lstrip("/")
    target.chmod(bits)
    return target


@pytest.fixture
def as_non_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Reads under tmp_path obey the file mode as a non-owner would see it.

    Tests may run as root, and root reads a 0400 file regardless, so the permission check the kernel
    would make for an ordinary user is re-created here from the file's own mode bits.
    """
    real_read_text = Path.read_text
    real_open = Path.open

    def denied(path: Path) -> bool:
        try:
            return path.is_relative_to(tmp_path) and path.is_file() and not path.stat().st_mode & stat.S_IROTH
        except OSError:
            return False

    def read_text(self: Path, *args: object, **kwargs: object) -> str:
        if denied(self):
            raise PermissionError(13, "Permission denied", str(self))
        return real_read_text(self, *args, **kwargs)  # type: ignore[arg-type]

    def open_(self: Path, *args: object, **kwargs: object) -> object:
        if denied(self):
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(Path, "read_text", read_text)
    monkeypatch.setattr(Path, "open", open_)


def test_kernel_doc_zone_name_gives_package_metric(tmp_path: Path) -> None:
    fake = FakeRoot(tmp_path)
    zone = tree_from_kernel_doc(tmp_path)
    fake.value(zone / "energy_uj", "12345678")  # synthetic counter value
    fake.value(zone / "max_energy_range_uj", str(SYNTHETIC_RANGE_UJ))
    collector = RaplCollector(tmp_path)
    ok, reason = collector.available()
    assert ok, reason
    assert reason == "1 RAPL zone: package-0"
    [metric] = collector.metrics()
    assert (metric.name, metric.unit, metric.kind, metric.wrap) == (
        "energy.package_uj",
        "uJ",
        "counter",
        float(SYNTHETIC_RANGE_UJ),
    )
    assert collector.sample() == {"energy.package_uj": 12345678.0}


def test_root_only_energy_uj_is_unavailable(tmp_path: Path, as_non_root: None) -> None:
    fake = FakeRoot(tmp_path)
    zone = tree_from_kernel_doc(tmp_path)
    fake.value(zone / "energy_uj", "12345678")
    fake.value(zone / "max_energy_range_uj", str(SYNTHETIC_RANGE_UJ))
    energy = apply_permission_capture(tmp_path)
    assert stat.S_IMODE(energy.stat().st_mode) == 0o400
    collector = RaplCollector(tmp_path)
    ok, reason = collector.available()
    assert not ok
    assert reason == f"1 RAPL zone found, but {ROOT_ONLY_REASON}"
    assert "root only" in reason
    assert "CVE-2020-8694" in reason
    assert "udev" in reason
    # Sampling anyway must not raise: the counter is simply unread.
    assert collector.sample() == {"energy.package_uj": None}


def test_mixed_permissions_stay_available(tmp_path: Path, as_non_root: None) -> None:
    fake = FakeRoot(tmp_path)
    fake.rapl_zone("0", "package-0", 1000)
    (fake.rapl_zone("0:0", "core", 500) / "energy_uj").chmod(0o400)
    ok, reason = RaplCollector(tmp_path).available()
    assert ok
    assert reason == "1 RAPL zone: package-0; not readable: core"


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file modes; covered via as_non_root above")
def test_root_only_energy_uj_really_denied(tmp_path: Path) -> None:
    (FakeRoot(tmp_path).rapl_zone("0", "package-0", 1000) / "energy_uj").chmod(0o400 & ~stat.S_IRUSR)
    assert RaplCollector(tmp_path).available().ok is False


def test_zone_names_single_and_multi_socket(tmp_path: Path) -> None:
    fake = FakeRoot(tmp_path)
    fake.rapl_zone("0", "package-0", 1)
    fake.rapl_zone("0:0", "core", 2)
    fake.rapl_zone("0:1", "uncore", 3)
    fake.rapl_zone("0:2", "dram", 4)
    fake.rapl_zone("1", "package-1", 5)
    fake.rapl_zone("1:0", "dram", 6)
    fake.rapl_zone("2", "psys", 7)
    # Same energy through MMIO; counting it too would double the package.
    fake.rapl_zone("0", "package-0", 8, kind="intel-rapl-mmio")
    collector = RaplCollector(tmp_path)
    assert collector.available().ok
    assert collector.sample() == {
        "energy.package_uj": 1.0,
        "energy.core_uj": 2.0,
        "energy.uncore_uj": 3.0,
        "energy.dram_uj": 4.0,
        "energy.package1_uj": 5.0,
        "energy.package1.dram_uj": 6.0,
        "energy.psys_uj": 7.0,
    }
    assert {m.kind for m in collector.metrics()} == {"counter"}


def test_laptop_psys_is_not_a_package(tmp_path: Path) -> None:
    fake = FakeRoot(tmp_path)
    fake.rapl_zone("0", "package-0", 1)
    fake.rapl_zone("1", "psys", 2)
    fake.rapl_zone("1:0", "core", 3)  # hypothetical child of psys: keeps the parent prefix
    names = [m.name for m in RaplCollector(tmp_path).metrics()]
    assert names == ["energy.package_uj", "energy.psys_uj", "energy.psys.core_uj"]


def test_counter_wraparound_through_collector(tmp_path: Path) -> None:
    fake = FakeRoot(tmp_path)
    zone = fake.rapl_zone("0", "package-0", SYNTHETIC_RANGE_UJ - 2_000_000)
    collector = RaplCollector(tmp_path)
    [metric] = collector.metrics()
    before = collector.sample()[metric.name]
    fake.value(zone / "energy_uj", "3000000")  # the counter passed max_energy_range_uj and restarted
    after = collector.sample()[metric.name]
    assert after is not None and before is not None and after < before
    assert counter_delta(before, after, metric.wrap) == 5_000_000
    assert energy_j_between(before, after, metric.wrap) == pytest.approx(5.0)
    assert collector.wraps() == {"energy.package_uj": float(SYNTHETIC_RANGE_UJ)}


def test_energy_j_between() -> None:
    wrap = float(SYNTHETIC_RANGE_UJ)
    assert energy_j_between(1_000_000, 3_500_000, wrap) == pytest.approx(2.5)
    assert energy_j_between(wrap - 1_000_000, 500_000, wrap) == pytest.approx(1.5)
    assert energy_j_between(wrap, 0, wrap) == 0.0
    assert energy_j_between(7, 7, wrap) == 0.0
    # Went backwards with no known range: a reset we cannot size, so no number rather than a wrong one.
    assert energy_j_between(5_000_000, 1_000, None) is None
    assert energy_j_between(None, 1_000, wrap) is None
    assert energy_j_between(1_000, None, wrap) is None


def test_missing_range_and_unreadable_counter(tmp_path: Path) -> None:
    fake = FakeRoot(tmp_path)
    fake.rapl_zone("0", "package-0", 1000, wrap=None)
    core = fake.rapl_zone("0:0", "core", 500)
    collector = RaplCollector(tmp_path)
    assert collector.available().ok
    assert collector.wraps() == {"energy.package_uj": None, "energy.core_uj": float(SYNTHETIC_RANGE_UJ)}
    # chmod 000 does not stop root; a directory in the file's place fails to read for everyone.
    (core / "energy_uj").unlink()
    (core / "energy_uj").mkdir()
    assert collector.sample() == {"energy.package_uj": 1000.0, "energy.core_uj": None}


def test_no_powercap_is_unavailable(tmp_path: Path) -> None:
    ok, reason = RaplCollector(tmp_path).available()
    assert not ok
    assert reason.startswith("no RAPL zones under /sys/class/powercap")
    (tmp_path / POWERCAP / "intel-rapl:0").mkdir(parents=True)  # a zone without a counter
    assert RaplCollector(tmp_path).available().ok is False
    assert RaplCollector(tmp_path).sample() == {}
