"""The optional power-mode axis: refused without permission, root and a Jetson; switched once per mode. And a
power mode that changes under a sweep: stored and flagged."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from sqlalchemy import select
from support.fakes import FakeRoot
from support.plan_problems import problems
from support.plans import plan_toml

from edgeprof.plan import SystemProbe, expand, parse_plan


def power_plan(model: Path, modes: list[str] | None, allow: bool = False) -> str:
    """Two ctx sizes of one tiny config, with the power-mode axis (``modes``) and its permission."""
    return plan_toml(
        [model],
        ctx=[128, 256],
        matrix={"power_mode": modes} if modes is not None else None,
        workloads=[{"prompt_tokens": 8, "n_predict": 4}],
        repeat={"warmup": 0, "steady": 1},
        run={"allow_power_mode_change": True} if allow else None,
    )


def jetson_root(tmp_path: Path) -> Path:
    """Synthetic Jetson tree (not a capture): nv_tegra_release and an nvpmodel.conf with three modes."""
    fake = FakeRoot(tmp_path)
    fake.l4t_release()
    fake.nvpmodel_conf({"MAXN": ["CPU_ONLINE CORE_0 1"], "15W": [], "7W": []}, default=0)
    return tmp_path


def probe(root: Path, euid: int = 0, nvpmodel: bool = True) -> SystemProbe:
    return SystemProbe(root=root, euid=euid, which=lambda tool: "/usr/sbin/nvpmodel" if nvpmodel else None)


@pytest.fixture
def model(tiny_models) -> Path:
    return tiny_models["Q4_K_M"]


def test_refused_without_the_plans_permission(tmp_path: Path, model: Path) -> None:
    text = power_plan(model, ["MAXN", "15W"])
    got = problems(text, tmp_path, system=probe(jetson_root(tmp_path)))
    assert any("allow_power_mode_change = true" in p for p in got)


def test_refused_off_a_jetson_and_without_root(tmp_path: Path, model: Path) -> None:
    text = power_plan(model, ["MAXN"], allow=True)
    off_jetson = problems(text, tmp_path, system=probe(tmp_path, nvpmodel=False))
    assert any("needs a Jetson with nvpmodel" in p for p in off_jetson)
    root = jetson_root(tmp_path / "j")
    assert any("needs root" in p for p in problems(text, tmp_path, system=probe(root, euid=1000)))


def test_unknown_modes_are_listed_with_the_known_ones(tmp_path: Path, model: Path) -> None:
    text = power_plan(model, ["MAXN", "25W"], allow=True)
    got = problems(text, tmp_path, system=probe(jetson_root(tmp_path)))
    assert any("unknown mode '25W'" in p and "MAXN, 15W, 7W" in p for p in got)


def test_valid_axis_expands_outermost_and_keeps_other_spec_ids(tmp_path: Path, model: Path) -> None:
    text = power_plan(model, ["15W", "MAXN"], allow=True)
    plan = parse_plan(text, str(tmp_path / "p.toml"), tmp_path, system=probe(jetson_root(tmp_path)))
    assert plan.power_modes == ("15W", "MAXN") and plan.n_specs() == 4
    specs = expand(plan, {str(model): "0" * 64})
    assert [(s.params.power_mode, s.params.n_ctx) for s in specs] == [
        ("15W", 128),
        ("15W", 256),
        ("MAXN", 128),
        ("MAXN", 256),
    ]
    assert specs[0].job()["params"]["power_mode"] == "15W"
    plain = parse_plan(power_plan(model, None, allow=True), str(tmp_path / "q.toml"), tmp_path)
    assert "power_mode" not in expand(plain, {str(model): "0" * 64})[0].params.to_json()


@pytest.mark.llama
def test_the_sweep_switches_once_per_mode_and_a_failed_switch_is_a_stored_error(
    tmp_path: Path, model: Path
) -> None:
    from edgeprof.report import build_rows
    from edgeprof.storage.db import new_session, open_engine
    from edgeprof.storage.models import Run
    from edgeprof.sweep import run_plan

    text = power_plan(model, ["15W", "7W"], allow=True)
    plan = parse_plan(text, str(tmp_path / "p.toml"), tmp_path, system=probe(jetson_root(tmp_path)))
    current = {"mode": "MAXN"}
    calls: list[str] = []

    def switcher(mode: str) -> str | None:
        calls.append(mode)
        if mode == "7W":
            return "nvpmodel -m 2 exited 1: reboot required"
        current["mode"] = mode
        return None

    def reader() -> dict:
        return {"nvpmodel": {"name": current["mode"], "id": None}, "jetson_clocks": None, "fan": None}

    engine = open_engine(tmp_path / "pm.db")
    outcome = run_plan(engine, plan, out=io.StringIO(), state_reader=reader, power_switcher=switcher)
    assert calls == ["15W", "7W", "7W"]  # once for 15W; 7W is retried before each of its configs, and fails
    with new_session(engine) as s:
        runs = s.scalars(select(Run).order_by(Run.id)).all()
        assert [r.status for r in runs] == ["ok", "ok", "error", "error"]
        assert "reboot required" in (runs[2].reason or "")
        assert [r.device_state_changed for r in runs[:2]] == [False, False]  # asked for, so not flagged
        rows = build_rows(s, outcome.sweep_id)
    assert [r["power_mode"] for r in rows[:2]] == ["15W", "15W"]


@pytest.mark.llama
def test_a_power_mode_change_mid_sweep_is_stored_and_flagged(tmp_path: Path, tiny_models) -> None:
    from edgeprof.report import build_rows, render_table
    from edgeprof.storage.db import new_session, open_engine
    from edgeprof.storage.models import Run
    from edgeprof.sweep import run_plan

    text = plan_toml(
        [tiny_models["Q4_K_M"]],
        ctx=[128, 256, 512],
        workloads=[{"prompt_tokens": 8, "n_predict": 4}],
        repeat={"warmup": 0, "steady": 1},
    )
    plan = parse_plan(text, str(tmp_path / "p.toml"), tmp_path)
    modes = iter(["MAXN", "MAXN", "MAXN", "15W"])  # sweep start, then before each of the 3 configs

    def reader() -> dict:
        return {"nvpmodel": {"name": next(modes), "id": None}, "jetson_clocks": None, "fan": None}

    engine = open_engine(tmp_path / "j.db")
    outcome = run_plan(engine, plan, out=io.StringIO(), state_reader=reader)
    with new_session(engine) as s:
        runs = s.scalars(select(Run).order_by(Run.id)).all()
        assert [r.device_state_changed for r in runs] == [False, False, True]
        rows = build_rows(s, outcome.sweep_id)
    assert [r["power_mode"] for r in rows] == ["MAXN", "MAXN", "15W"]
    assert "device state changed" in render_table(rows)
