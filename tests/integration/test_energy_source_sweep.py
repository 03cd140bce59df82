"""A real sweep with a fake NVML module and a synthetic, moving RAPL counter (tests/support/fakes): the report
names the energy source on every row that has energy."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from support.fakes import SYNTHETIC_RANGE_UJ, FakeNvml, FakeRoot
from support.plans import plan_toml

from edgeprof.collectors import Collector, NvmlCollector, RaplCollector

pytestmark = pytest.mark.timeout(120)


@pytest.mark.llama
def test_a_sweep_with_nvml_and_rapl_names_the_source_on_every_row_with_energy(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    from sqlalchemy import select

    from edgeprof.plan import Collect, Cooldown, parse_plan
    from edgeprof.report import build_rows
    from edgeprof.runners import FAULT_ENV
    from edgeprof.storage.db import new_session, open_engine
    from edgeprof.storage.models import Run
    from edgeprof.sweep import Telemetry, run_plan

    root = tmp_path / "root"
    text = plan_toml(
        [tiny_models["Q8_0"]],
        workloads=[{"name": "w", "prompt_tokens": 16, "n_predict": 24}],
        repeat={"warmup": 0},
        run={"timeout_s": 600},
    )
    plan = parse_plan(text, str(tmp_path / "p.toml"), tmp_path)
    engine = open_engine(tmp_path / "t.db")
    FakeRoot(root).rapl_zone("0", "package-0", SYNTHETIC_RANGE_UJ - 1_000_000)  # 1 J below its wrap

    class MovingRapl(RaplCollector):
        """The synthetic package counter advances 1 mJ per reading (a real one would move with time)."""

        def sample(self) -> dict[str, float | None]:
            path = root / "sys/class/powercap/intel-rapl:0/energy_uj"
            value = int(path.read_text()) + 1000
            path.write_text(f"{value % SYNTHETIC_RANGE_UJ}\n")
            return super().sample()

    nvml, rapl = NvmlCollector(nvml=FakeNvml()), MovingRapl(root)
    assert nvml.available().ok and rapl.available().ok
    collectors: list[Collector] = [nvml, rapl]

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
