"""The metric-role contract end to end: a new collector's metrics reach J/token, verdicts and plots with
nothing changed outside collectors/ (here: one class and one registry entry, added by the test); the roles
the built-in collectors declare are checked in tests/unit/collectors/test_roles.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.runs import one_config_sweep

from edgeprof.collectors import Availability, Collector, Metric, MetricRole, SampleValues, registry

pytestmark = pytest.mark.timeout(180)


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

    def __init__(self, root: Path | str = "/") -> None:
        super().__init__(root)
        self.n = 0

    def sample(self) -> SampleValues:
        # the clock with the 1-MHz jitter of a real one: a clock that never moves is no evidence
        self.n += 1
        return {"hwmon0.edge_c": 41.0, "hwmon0.sclk_mhz": 2400.0 - self.n % 2, "hwmon0.board_mw": BOARD_MW}


@pytest.mark.llama
def test_a_new_collector_reaches_j_per_token_verdicts_and_plots(
    tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy import select

    from edgeprof.plan import Collect
    from edgeprof.report.figures import timeline as plots
    from edgeprof.storage.db import new_session
    from edgeprof.storage.models import Measurement, PhaseStat, Run, Verdict
    from edgeprof.verdicts import stored_roles

    # the "one registry line"
    monkeypatch.setattr(registry, "PLATFORM_COLLECTORS", [*registry.PLATFORM_COLLECTORS, FakeHwmonBoard])
    collect = Collect(interval_ms=50, idle_s=0.3, collectors=("fake_hwmon_board",))
    tables = {"collect": {"collectors": ["fake_hwmon_board"]}}
    engine = one_config_sweep(tmp_path, tiny_models["Q8_0"], collect, tables=tables)
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
        # plots: the timeline's panels, by the roles stored with the sweep
        roles = stored_roles(s, run.sweep_id)
        panels = plots.timeline_panels(plots.load_samples(s, run.sweep_id, roles), roles)
        assert set(panels["temp"]) == {"hwmon0.edge_c"}
        assert set(panels["cpu"]) == {"hwmon0.sclk_mhz"}
        assert set(panels["power"]) == {"hwmon0.board_mw"}
        out = plots.timeline_png(s, run.sweep_id, tmp_path / "t.png")
        assert out.stat().st_size > 1000
        # judged again where the collector is not installed: the roles stored with the sweep still speak
        monkeypatch.undo()
        assert registry.role_of("hwmon0.edge_c") is None
        from edgeprof.verdicts import analyse_run

        again = {v.kind: v for v in analyse_run(s, run.id)}
        assert "hwmon0.edge_c" in json.loads(again["throttle"].evidence_json)["temperature"]["zones"]
