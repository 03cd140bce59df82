"""The metric-role contract (collectors/roles.py): every built-in collector declares a role for each metric,
and a new collector's metrics reach J/token, verdicts and plots with nothing changed outside collectors/
(here: one class and one registry entry, added by the test)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from edgeprof.collectors import registry
from edgeprof.collectors.base import Availability, Collector, Metric, SampleValues
from edgeprof.collectors.roles import MetricRole, component_of_sensor

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize(
    ("metric", "source", "role", "extra"),
    [
        ("temp.cpu_c", "sysfs_thermal", "temperature", {"component": "cpu", "thermometer": True}),
        ("temp.pmic_die_c", "sysfs_thermal", "temperature", {"thermometer": False}),
        ("cpufreq.policy0.cur_mhz", "sysfs_cpufreq", "clock", {"clock_max": "cpufreq.policy0.max_mhz"}),
        ("cpufreq.policy0.max_mhz", "sysfs_cpufreq", "clock_cap", {"domain": "policy0"}),
        ("cpufreq.policy0.hw_max_mhz", "sysfs_cpufreq", "clock_limit", {}),
        ("cpu3.freq_mhz", "psutil_host", "clock", {"per_core": True, "domain": "cpu"}),
        ("cpu.util_pct", "psutil_host", "utilization", {"unit": "pct"}),
        ("proc.rss_mb", "psutil_host", "memory", {"unit": "MB"}),
        ("energy.package_uj", "rapl", "energy", {"unit": "uJ", "scope": "device", "component": "cpu"}),
        ("energy.psys_uj", "rapl", "energy", {"whole_board": True, "scope": "board_input"}),
        ("throttle.package0.count", "x86_throttle", "throttle_counter", {}),
        ("gpu0.energy_mj", "nvml", "energy", {"unit": "mJ", "discrete": True, "instance": "gpu0"}),
        ("gpu1.power_mw", "nvml", "power", {"scope": "device", "instance": "gpu1"}),
        ("gpu0.clock_event_reasons", "nvml", "throttle_flags", {}),
        ("gpu0.sm_clock_mhz", "nvml", "clock", {"domain": "gpu"}),
        ("power.vdd_in_mw", "tegrastats", "power", {"whole_board": True, "scope": "board_input"}),
        ("power.vin_mw", "jtop", "power", {"whole_board": True}),
        ("power.vin_sys_5v0_mw", "tegrastats", "power", {"scope": "rail", "whole_board": False}),
        ("power.total_mw", "jtop", "power", {"scope": "rails_total"}),
        ("power.nc_2_mw", "tegrastats", "other", {}),
        ("gpu.freq_mhz", "tegrastats", "clock", {"domain": "gpu", "discrete": False}),
        ("emc.freq_mhz", "jtop", "clock", {"domain": None, "component": "dram"}),
        ("temp.tj_2nd_c", "tegrastats", "other", {"unit": "C"}),
    ],
)
def test_built_in_collectors_declare_roles(metric: str, source: str, role: str, extra: dict) -> None:
    found = registry.role_of(metric, source)
    assert found is not None and found.role == role, found
    for key, value in extra.items():
        assert getattr(found, key) == value, (metric, key)
    # without the source the same answer (names do not collide across collectors)
    assert registry.role_of(metric) == found


def test_unknown_names_have_no_role_and_roles_survive_json() -> None:
    assert registry.role_of("amdgpu0.junction_c") is None
    role = MetricRole("energy", "uJ", "cpu", scope="device", wrap=2.0**32, instance="package")
    assert MetricRole.from_json(json.loads(json.dumps(role.as_json()))) == role
    fixed = registry.role_of("temp.pmic_die_c")  # thermometer=False must survive the round trip
    assert fixed is not None and MetricRole.from_json(json.loads(json.dumps(fixed.as_json()))) == fixed
    assert MetricRole.from_json({"nonsense": 1}) is None
    assert component_of_sensor("x86_pkg_temp") == "cpu" and component_of_sensor("GPU-therm") == "gpu"


def test_declared_metrics_fill_every_role(tmp_path: Path) -> None:
    from test_collector_rapl import synthetic_zone

    from edgeprof.collectors.rapl import RaplCollector

    synthetic_zone(tmp_path, "0", "package-0", 5, wrap=1000)
    declared = RaplCollector(tmp_path).declared_metrics()
    got = [(m.name, m.role.role if m.role else None, m.role.wrap if m.role else None) for m in declared]
    assert got == [("energy.package_uj", "energy", 1000.0)]


# --- a new collector, registered by one line, reaches J/token, verdicts and plots ---------------------

BOARD_MW = 7000.0


class FakeHwmonBoard(Collector):
    """Synthetic: an "AMD board via hwmon" a newcomer might add. Its names match no existing collector,
    so only its own ``role_of`` can make them count."""

    name = "fake_hwmon_board"

    @classmethod
    def role_of(cls, metric: str) -> MetricRole | None:
        return {
            "hwmon0.edge_c": MetricRole("temperature", "C", "gpu"),
            "hwmon0.sclk_mhz": MetricRole("clock", "MHz", "cpu", domain="cpu"),
            "hwmon0.board_mw": MetricRole("power", "mW", "board", whole_board=True, scope="board_input"),
        }.get(metric)

    def available(self) -> Availability:
        return Availability(True, "synthetic")

    def metrics(self) -> list[Metric]:
        return [Metric(name, unit) for name, unit in (("hwmon0.edge_c", "C"), ("hwmon0.sclk_mhz", "MHz"))] + [
            Metric("hwmon0.board_mw", "mW")
        ]

    def sample(self) -> SampleValues:
        return {"hwmon0.edge_c": 41.0, "hwmon0.sclk_mhz": 2400.0, "hwmon0.board_mw": BOARD_MW}


@pytest.mark.llama
def test_a_new_collector_reaches_j_per_token_verdicts_and_plots(
    tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy import select

    from edgeprof.plan.parse import Collect, Cooldown, parse_plan
    from edgeprof.report.figures import plots
    from edgeprof.runners.protocol import FAULT_ENV
    from edgeprof.storage.db import new_session, open_engine
    from edgeprof.storage.models import Measurement, PhaseStat, Run, Verdict
    from edgeprof.sweep import Telemetry, run_plan

    # the "one registry line"
    monkeypatch.setattr(registry, "PLATFORM_COLLECTORS", [*registry.PLATFORM_COLLECTORS, FakeHwmonBoard])
    plan = parse_plan(
        f"""
        [matrix]
        models = ["{tiny_models["Q8_0"]}"]
        ctx = [256]
        threads = [1]
        [[workload]]
        name = "w"
        prompt_tokens = 16
        n_predict = 32
        [repeat]
        warmup = 0
        steady = 3
        [collect]
        collectors = ["fake_hwmon_board"]
        """,
        str(tmp_path / "p.toml"),
        tmp_path,
    )
    engine = open_engine(tmp_path / "t.db")

    def factory(sweep_id: int) -> Telemetry:
        collect = Collect(interval_ms=50, idle_s=0.3, collectors=("fake_hwmon_board",))
        return Telemetry(engine, sweep_id, collect, Cooldown(delay_s=0.0))

    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    outcome = run_plan(engine, plan, out=io.StringIO(), telemetry=factory, env=env)
    assert outcome.counts == {"ok": 1}
    with new_session(engine) as s:
        run = s.scalars(select(Run)).one()
        # J/token from its power gauge, named, whole board
        assert run.power_source == "hwmon0.board_mw"
        assert (run.energy_basis, run.energy_whole_board) == ("board_input", True)
        query = select(Measurement).where(Measurement.run_id == run.id, Measurement.kind == "steady")
        steady = list(s.scalars(query))
        assert steady and all(m.decode_j_per_token is not None for m in steady)
        for m in steady:
            assert m.decode_power_mw == pytest.approx(BOARD_MW)
        assert run.idle_power_mw == pytest.approx(BOARD_MW)
        # phase aggregates by role: its temperature gets max/mean, its clock mean/min
        stats = {(p.metric, p.stat) for p in s.scalars(select(PhaseStat).where(PhaseStat.run_id == run.id))}
        assert {("hwmon0.edge_c", "max"), ("hwmon0.sclk_mhz", "min"), ("hwmon0.board_mw", "mean")} <= stats
        assert max(m.temp_max_c for m in steady if m.temp_max_c is not None) == 41.0
        # verdicts: its temperature and its clock are the evidence
        kind_is_throttle = Verdict.kind == "throttle"
        throttle = s.scalars(select(Verdict).where(Verdict.run_id == run.id, kind_is_throttle)).one()
        evidence = json.loads(throttle.evidence_json)
        assert "hwmon0.edge_c" in evidence["temperature"]["zones"]
        assert evidence["clocks"]["domains"]["cpu"]["metrics"] == ["hwmon0.sclk_mhz"]
        # plots: the timeline's panels
        panels = plots.timeline_panels(plots._load_samples(s, run.sweep_id))
        assert set(panels["temp"]) == {"hwmon0.edge_c"}
        assert set(panels["cpu"]) == {"hwmon0.sclk_mhz"}
        assert set(panels["power"]) == {"hwmon0.board_mw"}
        out = plots.timeline_png(s, run.sweep_id, tmp_path / "t.png")
        assert out.stat().st_size > 1000
        # judged again where the collector is not installed: the roles stored with the sweep still speak
        monkeypatch.undo()
        assert registry.role_of("hwmon0.edge_c") is None
        from edgeprof.verdicts.judge import analyse_run

        again = {v.kind: v for v in analyse_run(s, run.id)}
        assert "hwmon0.edge_c" in json.loads(again["throttle"].evidence_json)["temperature"]["zones"]
