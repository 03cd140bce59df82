"""Energy source precedence (agent/telemetry/energy.py) with the real collector classes on fakes: a fake NVML
module (tests/support/fakes.FakeNvml: every energy read adds 1000 mJ) and a synthetic RAPL sysfs tree,
together and alone; tegrastats rails alone are in test_tegrastats_jp7.py. Then a real sweep with both, whose
report must name the source on every row that has energy."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from support.fakes import SYNTHETIC_RANGE_UJ, FakeNvml, synthetic_zone

from edgeprof.collectors.base import Collector
from edgeprof.collectors.nvml import NvmlCollector
from edgeprof.collectors.rapl import RaplCollector
from edgeprof.collectors.roles import MetricRole
from edgeprof.telemetry.energy import EnergySource, choose_energy_source, energy_j

pytestmark = pytest.mark.timeout(120)

# RAPL package counter: 1 J below its wrap at t=0, 4 J past zero at t=1 -> 5 J, across the wrap.
RAPL_START_UJ = SYNTHETIC_RANGE_UJ - 1_000_000
RAPL_END_UJ = 4_000_000


def _nvml() -> NvmlCollector:
    collector = NvmlCollector(nvml=FakeNvml())
    assert collector.available().ok
    return collector


def _rapl(root: Path, psys: bool = False) -> RaplCollector:
    synthetic_zone(root, "0", "package-0", RAPL_START_UJ)
    if psys:
        synthetic_zone(root, "1", "psys", 10_000_000)
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


@pytest.mark.llama
def test_a_sweep_with_nvml_and_rapl_names_the_source_on_every_row_with_energy(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    from sqlalchemy import select

    from edgeprof.plan.parse import Collect, Cooldown, parse_plan
    from edgeprof.report.rows import build_rows
    from edgeprof.runners.protocol import FAULT_ENV
    from edgeprof.storage.db import new_session, open_engine
    from edgeprof.storage.models import Run
    from edgeprof.sweep import Telemetry, run_plan

    root = tmp_path / "root"
    plan = parse_plan(
        f"""
        [matrix]
        models = ["{tiny_models["Q8_0"]}"]
        ctx = [256]
        threads = [1]
        [[workload]]
        name = "w"
        prompt_tokens = 16
        n_predict = 24
        [repeat]
        warmup = 0
        steady = 2
        """,
        str(tmp_path / "p.toml"),
        tmp_path,
    )
    engine = open_engine(tmp_path / "t.db")
    rapl = _rapl(root)

    class MovingRapl(RaplCollector):
        """The synthetic package counter advances 1 mJ per reading (a real one would move with time)."""

        def sample(self) -> dict[str, float | None]:
            path = root / "sys/class/powercap/intel-rapl:0/energy_uj"
            value = int(path.read_text()) + 1000
            path.write_text(f"{value % SYNTHETIC_RANGE_UJ}\n")
            return super().sample()

    collectors: list[Collector] = [_nvml(), MovingRapl(rapl.root)]

    def factory(sweep_id: int) -> Telemetry:
        collect, cooldown = Collect(interval_ms=50, idle_s=0.3), Cooldown(delay_s=0.0)
        return Telemetry(engine, sweep_id, collect, cooldown, collectors=collectors)

    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    outcome = run_plan(engine, plan, out=io.StringIO(), telemetry=factory, env=env)
    assert outcome.counts == {"ok": 1}
    with new_session(engine) as s:
        run = s.scalars(select(Run)).one()
        assert run.energy_basis == "gpu+cpu" and run.energy_whole_board is False
        rows = build_rows(s)
    with_energy = [r for r in rows if r["decode_j_per_token_median"] is not None]
    assert with_energy, "the fake counters moved during decode: energy must be known"
    for row in with_energy:
        assert row["power_source"] == "gpu0.energy_mj+gpu1.energy_mj+energy.package_uj"
        assert row["energy_basis"] == "gpu+cpu" and row["energy_whole_board"] is False
