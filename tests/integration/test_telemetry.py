"""Telemetry wired into a real sweep: fake sysfs tree + a constant-power source with known answers."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from support.fakes import FakeRoot
from support.plans import plan_toml

from edgeprof.collectors import Availability, Collector, Metric, SampleValues, build_collectors
from edgeprof.plan import Collect, Cooldown, Plan, parse_plan
from edgeprof.report import build_rows
from edgeprof.runners import FAULT_ENV
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import CollectorStatus, Measurement, Phase, PhaseStat, Run, Sample, Sweep
from edgeprof.storage.samples import read_samples
from edgeprof.sweep import Telemetry, run_plan

pytestmark = pytest.mark.llama

POWER_MW = 5000.0


class ConstantPower(Collector):
    """Synthetic: a board-input rail that always reads 5 W, so every energy figure has a known answer."""

    name = "synthetic_power"

    def available(self) -> Availability:
        return Availability(True, "synthetic constant 5 W")

    def metrics(self) -> list[Metric]:
        return [
            Metric("power.vdd_in_mw", "mW"),
            Metric("mem.shared_mb", "MB"),
            Metric("gpu0.mem_used_mb", "MB"),
            Metric("gpu1.mem_used_mb", "MB"),
        ]

    def sample(self) -> SampleValues:
        # also synthetic Jetson shared memory and two dGPUs' memory, for the per-run memory peaks
        return {
            "power.vdd_in_mw": POWER_MW,
            "mem.shared_mb": 1234.0,
            "gpu0.mem_used_mb": 567.0,
            "gpu1.mem_used_mb": 100.0,
        }


def small_plan(tmp_path: Path, model: Path, **kw: Any) -> Plan:
    """One model, one config: an 8-token prompt generating 4 unless the test says, and the parser's default
    600 s timeout (these plans never needed a tighter one)."""
    kw.setdefault("workloads", [{"prompt_tokens": 8, "n_predict": 4}])
    kw["run"] = {"timeout_s": 600, **kw.get("run", {})}
    return parse_plan(plan_toml([model], name="p", **kw), str(tmp_path / "p.toml"), tmp_path)


def test_a_sweep_with_telemetry_stores_samples_phases_and_known_energy(tmp_path: Path, tiny_models) -> None:
    root = tmp_path / "root"  # synthetic sysfs tree: one thermal zone and one cpufreq policy (not a capture)
    fake = FakeRoot(root)
    fake.thermal_zone(0, "cpu-thermal", 45000, mode="enabled", trips=[("passive", 95000)])
    fake.cpufreq_policy(0, "0", cur_khz=1500000, cap_khz=2000000, hw_max_khz=2000000, governor="schedutil")
    plan = small_plan(
        tmp_path,
        tiny_models["Q8_0"],
        workloads=[{"name": "w", "prompt_tokens": 32, "n_predict": 16}],
        repeat={"warmup": 0, "steady": 3},
    )
    engine = open_engine(tmp_path / "t.db")
    collectors = [*build_collectors(root), ConstantPower(root)]

    def factory(sweep_id: int) -> Telemetry:
        return Telemetry(
            engine,
            sweep_id,
            Collect(interval_ms=50, idle_s=0.5),
            Cooldown(below_c=50.0, max_wait_s=5),
            collectors=collectors,
        )

    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    outcome = run_plan(engine, plan, out=io.StringIO(), telemetry=factory, env=env)
    assert outcome.counts == {"ok": 1}

    with new_session(engine) as s:
        run = s.scalars(select(Run)).one()
        assert run.start_temp_c == 45.0 and run.cooldown_reason == "below_limit"
        assert run.power_source == "power.vdd_in_mw"
        assert run.idle_power_mw == pytest.approx(POWER_MW)
        assert run.peak_shared_mb == 1234.0 and run.peak_gpu_mem_mb == 667.0  # both GPUs together
        stored = read_samples(s, None, run_ids=[run.id])
        assert len(stored) > 10
        # written as compact blocks, not legacy rows
        assert s.scalar(select(func.count()).select_from(Sample)) == 0
        sources = {r.source for r in stored}
        assert {"psutil_host", "sysfs_thermal", "sysfs_cpufreq", "synthetic_power"} <= sources
        status = {c.name: c for c in s.scalars(select(CollectorStatus))}
        assert status["sysfs_thermal"].ok and status["rapl"].ok is False and status["rapl"].reason
        thermal = {m["name"]: m for m in json.loads(status["sysfs_thermal"].metrics_json)}
        assert thermal["temp.cpu_c"]["trip_points"] == [["passive", 95.0]]
        cpufreq = {m["name"]: m for m in json.loads(status["sysfs_cpufreq"].metrics_json)}
        assert cpufreq["cpufreq.governors"]["governors"] == {"policy0": "schedutil"}
        for m in s.scalars(select(Measurement).where(Measurement.kind == "steady")):
            decode_s = m.t_end_mono - (m.t_start_mono + m.ttft_ms / 1000.0)
            assert m.decode_energy_j == pytest.approx(POWER_MW / 1000.0 * decode_s, rel=1e-6)
            assert m.decode_j_per_token == pytest.approx(m.decode_energy_j / m.n_gen)
            assert m.decode_j_per_token_net == pytest.approx(0.0, abs=1e-9)  # all of it is idle power
            assert m.decode_power_mw == pytest.approx(POWER_MW)
            assert m.temp_max_c == 45.0

        def phase_values(phase: str, metric: str, stat: str) -> list[float | None]:
            return list(
                s.scalars(
                    select(PhaseStat.value).where(
                        PhaseStat.phase == phase, PhaseStat.metric == metric, PhaseStat.stat == stat
                    )
                )
            )

        assert phase_values("idle", "temp.cpu_c", "max") == [45.0]
        # A tiny model's decode lasts a few ms, shorter than the 50 ms interval: no reading falls inside,
        # and the aggregate says so (NULL) instead of borrowing a neighbour's value.
        assert set(phase_values("decode", "temp.cpu_c", "max")) <= {None, 45.0}
        assert phase_values("idle", "cpufreq.policy0.cur_mhz", "mean") == [pytest.approx(1500.0)]
        assert phase_values("idle", "power.vdd_in_mw", "mean") == [pytest.approx(POWER_MW)]
        sweep = s.scalars(select(Sweep)).one()
        assert sweep.sampler_json and '"missed_ticks"' in sweep.sampler_json
        row = build_rows(s, sweep.id)[0]
    assert row["start_temp_c"] == 45.0 and row["temp_max_c"] == 45.0
    assert row["decode_power_mw_median"] == pytest.approx(POWER_MW)


def test_without_a_power_source_energy_is_null_never_zero(tmp_path: Path, tiny_models) -> None:
    root = tmp_path / "empty-root"
    root.mkdir()
    plan = small_plan(tmp_path, tiny_models["Q4_K_M"], ctx=[128], repeat={"warmup": 0, "steady": 1})
    engine = open_engine(tmp_path / "n.db")

    def factory(sweep_id: int) -> Telemetry:
        return Telemetry(engine, sweep_id, Collect(interval_ms=50, idle_s=0.2), Cooldown(), root=root)

    run_plan(engine, plan, out=io.StringIO(), telemetry=factory)
    with new_session(engine) as s:
        run = s.scalars(select(Run)).one()
        assert run.power_source is None and run.idle_power_mw is None and run.start_temp_c is None
        assert run.cooldown_reason == "disabled"
        for m in s.scalars(select(Measurement)):
            assert m.decode_energy_j is None and m.decode_j_per_token is None and m.temp_max_c is None


def test_cooldown_per_rep_pauses_the_child_and_moves_its_timeout(tmp_path: Path, tiny_models) -> None:
    plan = small_plan(
        tmp_path,
        tiny_models["Q4_K_M"],
        ctx=[128],
        repeat={"warmup": 0, "steady": 3},
        run={"timeout_s": 4},
        tables={"cooldown": {"delay_s": 1.5, "per_rep": True}},
    )
    engine = open_engine(tmp_path / "c.db")

    def factory(sweep_id: int) -> Telemetry:
        return Telemetry(engine, sweep_id, Collect(interval_ms=200, idle_s=0.0), plan.cooldown, collectors=[])

    outcome = run_plan(engine, plan, out=io.StringIO(), telemetry=factory)
    # 3 x 1.5 s of cooldown inside a 4 s timeout: only a timeout moved by the cooldown lets this finish.
    assert outcome.counts == {"ok": 1}
    with new_session(engine) as s:
        cooldowns = s.scalars(select(Phase).where(Phase.name == "cooldown").order_by(Phase.id)).all()
        assert [(p.kind, p.rep) for p in cooldowns] == [
            (None, None),
            ("steady", 0),
            ("steady", 1),
            ("steady", 2),
        ]
        assert all(p.t_end_mono - p.t_start_mono >= 1.5 for p in cooldowns)
        steady = s.scalars(
            select(Measurement).where(Measurement.kind == "steady").order_by(Measurement.rep)
        ).all()
        for m, cd in zip(steady, cooldowns[1:], strict=True):
            assert m.t_start_mono >= cd.t_end_mono  # each steady rep started after its cooldown
