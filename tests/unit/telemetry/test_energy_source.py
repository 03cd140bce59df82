"""Energy source precedence (agent/telemetry/energy.py) with the real collector classes on fakes: a fake NVML
module (tests/support/fakes.FakeNvml: every energy read adds 1000 mJ) and a synthetic RAPL sysfs tree
(tests/support/fakes.FakeRoot), together and alone; tegrastats rails alone are in test_tegrastats_jp7.py, a
real sweep with both in tests/integration/test_energy_source_sweep.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fakes import SYNTHETIC_RANGE_UJ, FakeNvml, FakeRoot

from edgeprof.collectors import Collector, MetricRole, NvmlCollector, RaplCollector
from edgeprof.telemetry import EnergySource, choose_energy_source, energy_j

pytestmark = pytest.mark.timeout(120)

# RAPL package counter: 1 J below its wrap at t=0, 4 J past zero at t=1 -> 5 J, across the wrap.
RAPL_START_UJ = SYNTHETIC_RANGE_UJ - 1_000_000
RAPL_END_UJ = 4_000_000


def _nvml() -> NvmlCollector:
    collector = NvmlCollector(nvml=FakeNvml())
    assert collector.available().ok
    return collector


def _rapl(root: Path, psys: bool = False) -> RaplCollector:
    fake = FakeRoot(root)
    fake.rapl_zone("0", "package-0", RAPL_START_UJ)
    if psys:
        fake.rapl_zone("1", "psys", 10_000_000)
    collector = RaplCollector(root)
    assert collector.available().ok
    return collector


def _measure(collectors: list[Collector], root: Path | None) -> tuple[EnergySource | None, float | None]:
    """Two readings one (synthetic) second apart; the source chosen from the declared roles and its joules."""
    roles: dict[str, MetricRole] = {}
    wraps: dict[str, float | None] = {}
    for c in collectors:
        for m in c.declared_metrics():
            assert m.role is not None
            roles[m.name], wraps[m.name] = m.role, m.wrap
    series: dict[str, list[tuple[float, float | None]]] = {}
    for t in (0.0, 1.0):
        if t == 1.0 and root is not None:
            (root / "sys/class/powercap/intel-rapl:0/energy_uj").write_text(f"{RAPL_END_UJ}\n")
            psys = root / "sys/class/powercap/intel-rapl:1/energy_uj"
            if psys.exists():
                psys.write_text("22000000\n")  # +12 J
        for c in collectors:
            for name, value in c.sample().items():
                series.setdefault(name, []).append((t, value))
    source = choose_energy_source(roles, wraps)
    return source, energy_j(source, series, 0.0, 1.0)


def test_fake_nvml_and_fake_rapl_together_sum_every_gpu_and_the_package(tmp_path: Path) -> None:
    source, joules = _measure([_nvml(), _rapl(tmp_path)], tmp_path)
    assert source is not None
    assert source.basis == "gpu+cpu" and source.whole_board is False
    # each GPU's counter, never its power gauge too; then the package counter
    assert source.metrics == ["gpu0.energy_mj", "gpu1.energy_mj", "energy.package_uj"]
    assert joules == pytest.approx(1.0 + 1.0 + 5.0)


def test_fake_nvml_alone_uses_the_gpu_energy_counters(tmp_path: Path) -> None:
    source, joules = _measure([_nvml()], None)
    assert source is not None and source.basis == "gpu" and not source.whole_board
    assert source.metrics == ["gpu0.energy_mj", "gpu1.energy_mj"]
    assert joules == pytest.approx(2.0)


def test_fake_rapl_alone_uses_the_package_counter_across_its_wrap(tmp_path: Path) -> None:
    source, joules = _measure([_rapl(tmp_path)], tmp_path)
    assert source is not None and source.basis == "cpu" and not source.whole_board
    assert source.metrics == ["energy.package_uj"]
    assert joules == pytest.approx(5.0)


def test_rapl_psys_is_the_whole_board_and_wins_over_nvml_plus_package(tmp_path: Path) -> None:
    source, joules = _measure([_nvml(), _rapl(tmp_path, psys=True)], tmp_path)
    assert source is not None
    assert (source.name, source.basis, source.whole_board) == ("energy.psys_uj", "board_input", True)
    assert joules == pytest.approx(12.0)


def test_a_missing_part_makes_the_energy_unknown_never_an_understated_sum(tmp_path: Path) -> None:
    source, _ = _measure([_nvml(), _rapl(tmp_path)], tmp_path)
    series = {"gpu0.energy_mj": [(0.0, 0.0), (1.0, 1000.0)], "gpu1.energy_mj": [(0.0, 0.0), (1.0, 1000.0)]}
    assert energy_j(source, series, 0.0, 1.0) is None  # no package readings: None, not 2 J
    assert choose_energy_source({}) is None and energy_j(None, series, 0.0, 1.0) is None
