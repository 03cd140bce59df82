"""Soak workloads end to end on the tiny generated models: the plan, the worker's windows, their storage, the
absence of any pause inside a soak, a fault mid-soak, and a stopped soak that restarts on resume.

Bounded: soaks of 2-3 s in 0.5 s windows. Nothing here asserts on a speed, only on counts, clocks and
intervals (the machine may be shared)."""

from __future__ import annotations

import io
import os
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from support.plan_problems import problems
from support.plans import plan_toml

from edgeprof.collectors import Availability, Collector, Metric, SampleValues
from edgeprof.plan import Collect, Cooldown, Plan, expand, parse_plan
from edgeprof.report import build_rows, render_html
from edgeprof.runners import FAULT_ENV, run_child
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Measurement, Phase, PhaseStat, Run, SoakWindow
from edgeprof.sweep import Telemetry, run_plan

pytestmark = pytest.mark.llama

SOAK = {
    "name": "soak",
    "kind": "soak",
    "prompt_tokens": 16,
    "n_predict": 16,
    "duration_s": 2,
    "window_s": 0.5,
}
POWER_MW = 4000.0


def soak_plan(tmp_path: Path, models: dict[str, Path], **kw: Any) -> Plan:
    kw.setdefault("workloads", [SOAK])
    return parse_plan(plan_toml(models, name="soak", **kw), str(tmp_path / "p.toml"), tmp_path)


def env_with(fault: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    if fault:
        env[FAULT_ENV] = fault
    return env


class Recorder:
    """Sweep hooks that keep every child event and count the pauses the sweep asked for."""

    def __init__(self, stop_at_window: int | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.pauses = 0
        self.stop_at_window = stop_at_window

    def before_run(self, session: Any, run: Run, spec: Any) -> None:
        pass

    def on_child_event(self, run: Run, event: dict[str, Any]) -> None:
        self.events.append(event)
        if event.get("event") == "soak_window" and event.get("index") == self.stop_at_window:
            raise KeyboardInterrupt  # as a Ctrl-C would arrive while the soak runs

    def after_run(self, session: Any, run: Run, spec: Any) -> None:
        pass

    def between_reps(self, session: Any, run: Run, event: dict[str, Any]) -> float:
        self.pauses += 1
        return 0.0


class ConstantPower(Collector):
    """Synthetic: a board-input rail that always reads 4 W, so each window's energy has a known answer."""

    name = "synthetic_power"

    def available(self) -> Availability:
        return Availability(True, "synthetic constant 4 W")

    def metrics(self) -> list[Metric]:
        return [Metric("power.vdd_in_mw", "mW")]

    def sample(self) -> SampleValues:
        return {"power.vdd_in_mw": POWER_MW}


def windows_of(session: Any, run_id: int) -> list[SoakWindow]:
    return list(
        session.scalars(select(SoakWindow).where(SoakWindow.run_id == run_id).order_by(SoakWindow.idx))
    )


def test_the_plan_lists_every_soak_problem_with_its_place(tiny_models: dict[str, Path]) -> None:
    bad = [
        {**SOAK, "name": "long", "duration_s": 50_000},
        {**SOAK, "name": "wide", "duration_s": 3, "window_s": 4},
        {**SOAK, "name": "tiny", "duration_s": 0.5, "window_s": 0.01},
        {"name": "plain", "prompt_tokens": 8, "n_predict": 4, "duration_s": 3},
        {**SOAK, "name": "typo", "kind": "soaks"},
    ]
    found = problems(plan_toml({"q8": tiny_models["Q8_0"]}, workloads=bad))
    assert found == [
        "workload[1].window_s: 4 s is longer than duration_s 3 s: not one window",
        "workload[2].duration_s: must be >= 1, got 0.5",
        "workload[2].window_s: must be >= 0.1, got 0.01",
        "workload[3].duration_s: unknown key",
        "workload[4].duration_s: unknown key",
        "workload[4].window_s: unknown key",
        'workload[4].kind: expected "generation", "soak", "quality" or "task", got \'soaks\'',
        "workload[0].duration_s: 50000 is above the limit 43200 (a soak runs at most a night)",
    ]
    criteria = [
        {**SOAK, "steady_span_s": 0.2, "steady_c_per_min": 0},
        {**SOAK, "name": "s2", "steady_span_s": 9},
    ]
    assert problems(plan_toml({"q8": tiny_models["Q8_0"]}, workloads=criteria)) == [
        "workload[0].steady_c_per_min: must be >= 0.01, got 0",
        "workload[0].steady_span_s: must be >= 0.5, got 0.2",
        "workload[1].steady_span_s: 9 is above 2",
    ]
    chat_on_server = plan_toml(
        {"q8": tiny_models["Q8_0"]},
        workloads=[{"name": "chat", "kind": "soak", "messages": [{"role": "user", "content": "hi"}],
                    "n_predict": 4, "duration_s": 2, "window_s": 0.5}],
        matrix={"runner": ["llama-server"]},
    )  # fmt: skip
    assert any("a chat workload" in p for p in problems(chat_on_server))


def test_a_soak_on_a_serving_runner_runs_once_per_concurrency_closed_loop(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    plan = soak_plan(tmp_path, {"q8": tiny_models["Q8_0"]},
                     matrix={"runner": ["llama-cpp", "llama-server"], "concurrency": [1, 2],
                             "request_rate": [0.5]})  # fmt: skip
    specs = expand(plan, {str(p): p.name for p in tiny_models.values()})
    assert [(s.params.runner, s.params.concurrency, s.params.request_rate) for s in specs] == [
        ("llama-cpp", None, None), ("llama-server", 1, None), ("llama-server", 2, None),
    ]  # fmt: skip
    assert plan.n_specs() == len(specs)
    served = specs[1]
    assert served.serving is not None and specs[0].serving is None
    assert served.timeout_s == plan.timeout_s + 2


def test_a_soak_runs_once_per_matrix_cell_after_the_models_speed_configs(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    gen = {"name": "w", "prompt_tokens": 8, "n_predict": 4}
    plan = soak_plan(tmp_path, {"q8": tiny_models["Q8_0"], "q4": tiny_models["Q4_K_M"]}, ctx=[128, 256],
                     workloads=[SOAK, gen])  # fmt: skip
    specs = expand(plan, {str(p): p.name for p in tiny_models.values()})
    order = [(s.model.label, s.workload.kind, s.params.n_ctx) for s in specs]
    assert order == [
        ("q8", "generation", 128), ("q8", "generation", 256), ("q8", "soak", 128), ("q8", "soak", 256),
        ("q4", "generation", 128), ("q4", "generation", 256), ("q4", "soak", 128), ("q4", "soak", 256),
    ]  # fmt: skip
    assert plan.n_specs() == len(specs)
    soak = next(s for s in specs if s.workload.kind == "soak")
    assert soak.timeout_s == plan.timeout_s + 2  # the child may run the duration plus the plan's timeout
    assert (soak.repeat.cold, soak.repeat.warmup, soak.repeat.steady) == (1, 0, 0)


def test_the_worker_books_every_decode_step_to_exactly_one_window(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    plan = soak_plan(tmp_path, {"q8": tiny_models["Q8_0"]})
    spec = expand(plan, {str(tiny_models["Q8_0"]): "x"})[0]
    events: list[dict[str, Any]] = []
    child = run_child(spec.job(), spec.timeout_s, on_event=events.append, env=env_with(None))
    assert child.status == "ok", child.reason
    windows = [e for e in events if e["event"] == "soak_window"]
    start = next(e for e in events if e["event"] == "soak_start")
    end = next(e for e in events if e["event"] == "soak_end")
    assert [w["index"] for w in windows] == list(range(4)) == list(range(start["n_windows"]))
    # llama.cpp's eval counter summed over the windows is the decode steps the loop ran: none twice, none lost
    assert sum(w["tokens"] for w in windows) == end["decode_steps"] > 0
    assert windows[0]["t_start"] == start["t"]
    assert windows[-1]["t_end"] == pytest.approx(start["t"] + 2.0)
    for a, b in pairwise(windows):
        assert a["t_end"] == b["t_start"]
    cold = [e for e in events if e["event"] == "measurement"]
    assert [(m["kind"], m["rep"]) for m in cold] == [("cold", 0)]
    assert cold[0]["t_end"] <= start["t"]


def test_a_soak_is_stored_per_window_as_rows_and_phases_without_a_pause(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    # per_rep cooldown asked for: a soak still never pauses between its windows
    plan = soak_plan(
        tmp_path, {"q8": tiny_models["Q8_0"]}, tables={"cooldown": {"delay_s": 0.2, "per_rep": True}}
    )
    engine = open_engine(tmp_path / "s.db")
    hooks = Recorder()
    out = io.StringIO()
    outcome = run_plan(engine, plan, out=out, hooks=hooks, env=env_with(None))
    assert outcome.counts == {"ok": 1}
    assert hooks.pauses == 0 and not [e for e in hooks.events if e["event"] == "await"]
    assert "soak" in out.getvalue() and "4 windows" in out.getvalue()
    with new_session(engine) as s:
        run = s.scalars(select(Run)).one()
        windows = windows_of(s, run.id)
        assert [w.idx for w in windows] == [0, 1, 2, 3]
        for a, b in pairwise(windows):
            assert a.t_end_mono == b.t_start_mono  # contiguous, never overlapping
        assert all(w.t_end_mono > w.t_start_mono for w in windows)
        assert all(w.temp_max_c is None and w.throttle_json is None for w in windows)  # telemetry's, later
        phases = s.scalars(select(Phase).where(Phase.run_id == run.id, Phase.name == "soak_window")).all()
        assert sorted((p.rep, p.kind, p.t_start_mono, p.t_end_mono) for p in phases) == [
            (w.idx, "soak", w.t_start_mono, w.t_end_mono) for w in windows
        ]
        assert not s.scalars(select(Phase).where(Phase.run_id == run.id, Phase.name == "cooldown")).all()
        cold = s.scalars(select(Measurement).where(Measurement.run_id == run.id)).all()
        assert [(m.kind, m.rep) for m in cold] == [("cold", 0)]
        rows = build_rows(s, outcome.sweep_id)
    assert rows[0]["soak_windows_n"] == 4
    assert (
        rows[0]["tg_tps_median"] is None and rows[0]["tg_tps_n"] == 0
    )  # a soak's speed is its own figure, never a steady-rep column


def test_each_window_gets_the_telemetry_phase_aggregates_and_its_energy(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    plan = soak_plan(tmp_path, {"q8": tiny_models["Q8_0"]})
    engine = open_engine(tmp_path / "t.db")

    def factory(sweep_id: int) -> Telemetry:
        return Telemetry(
            engine,
            sweep_id,
            Collect(interval_ms=50, idle_s=0.0),
            Cooldown(),
            collectors=[ConstantPower(tmp_path)],
        )

    outcome = run_plan(engine, plan, out=io.StringIO(), telemetry=factory, env=env_with(None))
    assert outcome.counts == {"ok": 1}
    with new_session(engine) as s:
        run = s.scalars(select(Run)).one()
        windows = windows_of(s, run.id)
        phases = s.scalars(select(Phase).where(Phase.run_id == run.id, Phase.name == "soak_window")).all()
        assert len(windows) == len(phases) == 4
        stats = s.scalars(
            select(PhaseStat).where(PhaseStat.run_id == run.id, PhaseStat.phase == "soak_window")
        )
        # every window aggregated by the telemetry, as every phase is (power mean here)
        assert {(st.kind, st.rep) for st in stats if st.metric == "power.vdd_in_mw"} == {
            ("soak", p.rep) for p in phases
        }
        for w in windows:
            assert w.energy_j == pytest.approx(POWER_MW / 1000.0 * (w.t_end_mono - w.t_start_mono), rel=1e-6)
            assert w.power_mw == pytest.approx(POWER_MW)
            assert w.j_per_token == pytest.approx(w.energy_j / w.tokens)
        (row,) = build_rows(s, outcome.sweep_id)
        verdicts_html = render_html(s, outcome.sweep_id).split("<h2>Verdicts</h2>")[1].split("<h2>")[0]
    # the soak's own verdict is shown, not the five-rep throttle check a soak has no reps for
    assert "<b>soak</b>" in verdicts_html and "<b>throttle</b>" not in verdicts_html
    # J per token over time: the burst's (first 3 windows) and the sustained last third's, as for the speed
    per_token = sorted(w.j_per_token for w in windows[:3])
    assert row["soak_burst_j_per_token"] == pytest.approx(per_token[1])
    assert row["soak_sustained_j_per_token"] == pytest.approx(
        windows[-1].j_per_token
    )  # 4 windows: 1 is a third


@pytest.mark.parametrize(("fault", "status"), [("kill@soak:q8_0", "crashed"), ("hang@soak:q8_0", "timeout")])
def test_a_fault_mid_soak_is_a_stored_row_with_its_windows_and_the_sweep_goes_on(
    tmp_path: Path, tiny_models: dict[str, Path], fault: str, status: str
) -> None:
    # a hang is stopped at the plan's timeout plus the soak's duration (5 + 2 s), not later
    models = {"q8": tiny_models["Q8_0"], "q4": tiny_models["Q4_K_M"]}
    plan = soak_plan(tmp_path, models, run={"timeout_s": 5})
    engine = open_engine(tmp_path / "f.db")
    outcome = run_plan(engine, plan, out=io.StringIO(), env=env_with(fault))
    with new_session(engine) as s:
        runs = {r.model_label: r for r in s.scalars(select(Run))}
        assert runs["q8"].status == status and runs["q8"].reason
        assert [w.idx for w in windows_of(s, runs["q8"].id)] == [0]  # the window before the fault is kept
        assert runs["q4"].status == "ok"
        assert len(windows_of(s, runs["q4"].id)) == 4
    assert outcome.counts == {status: 1, "ok": 1}


def test_a_stopped_soak_restarts_on_resume_and_keeps_its_windows_apart(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    plan = soak_plan(tmp_path, {"q8": tiny_models["Q8_0"]})
    engine = open_engine(tmp_path / "r.db")
    stopped = run_plan(engine, plan, out=io.StringIO(), hooks=Recorder(stop_at_window=1), env=env_with(None))
    assert stopped.interrupted
    out = io.StringIO()
    resumed = run_plan(engine, plan, out=out, env=env_with(None))
    assert resumed.sweep_id == stopped.sweep_id and resumed.counts == {"ok": 1}
    assert "soak restarts (a soak is one measurement)" in out.getvalue()
    with new_session(engine) as s:
        first, second = s.scalars(select(Run).order_by(Run.id)).all()
        assert first.status == "interrupted" and second.status == "ok"
        assert [w.idx for w in windows_of(s, first.id)] == [0, 1]  # kept under the stopped run
        again = windows_of(s, second.id)
        assert [w.idx for w in again] == [0, 1, 2, 3]  # from scratch, not continued
        assert again[0].t_start_mono > windows_of(s, first.id)[-1].t_end_mono
