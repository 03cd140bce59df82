"""The optional power-mode axis: refused without permission, root and a Jetson; switched once per mode."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from sqlalchemy import select

from edgeprof.plan.parse import PlanError, SystemProbe, expand, parse_plan

PLAN = """
[matrix]
models = ["{model}"]
ctx = [128, 256]
threads = [1]
power_mode = {modes}
[[workload]]
prompt_tokens = 8
n_predict = 4
[repeat]
warmup = 0
steady = 1
[run]
{allow}
"""


def jetson_root(tmp_path: Path) -> Path:
    """Synthetic Jetson tree (not a capture): nv_tegra_release and an nvpmodel.conf with three modes."""
    (tmp_path / "etc").mkdir(parents=True, exist_ok=True)
    (tmp_path / "etc/nv_tegra_release").write_text("# R36 (release), REVISION: 4.4\n")
    (tmp_path / "etc/nvpmodel.conf").write_text(
        "< POWER_MODEL ID=0 NAME=MAXN >\nCPU_ONLINE CORE_0 1\n< POWER_MODEL ID=1 NAME=15W >\n"
        "< POWER_MODEL ID=2 NAME=7W >\n< PM_CONFIG DEFAULT=0 >\n"
    )
    return tmp_path


def probe(root: Path, euid: int = 0, nvpmodel: bool = True) -> SystemProbe:
    return SystemProbe(root=root, euid=euid, which=lambda tool: "/usr/sbin/nvpmodel" if nvpmodel else None)


def problems(text: str, tmp_path: Path, system: SystemProbe) -> list[str]:
    with pytest.raises(PlanError) as err:
        parse_plan(text, str(tmp_path / "p.toml"), tmp_path, system=system)
    return err.value.problems


@pytest.fixture
def model(tiny_models) -> Path:
    return tiny_models["Q4_K_M"]


def test_refused_without_the_plans_permission(tmp_path: Path, model: Path) -> None:
    text = PLAN.format(model=model, modes='["MAXN", "15W"]', allow="")
    got = problems(text, tmp_path, probe(jetson_root(tmp_path)))
    assert any("allow_power_mode_change = true" in p for p in got)


def test_refused_off_a_jetson_and_without_root(tmp_path: Path, model: Path) -> None:
    text = PLAN.format(model=model, modes='["MAXN"]', allow="allow_power_mode_change = true")
    assert any(
        "needs a Jetson with nvpmodel" in p for p in problems(text, tmp_path, probe(tmp_path, nvpmodel=False))
    )
    root = jetson_root(tmp_path / "j")
    assert any("needs root" in p for p in problems(text, tmp_path, probe(root, euid=1000)))


def test_unknown_modes_are_listed_with_the_known_ones(tmp_path: Path, model: Path) -> None:
    text = PLAN.format(model=model, modes='["MAXN", "25W"]', allow="allow_power_mode_change = true")
    got = problems(text, tmp_path, probe(jetson_root(tmp_path)))
    assert any("unknown mode '25W'" in p and "MAXN, 15W, 7W" in p for p in got)


def test_valid_axis_expands_outermost_and_keeps_other_spec_ids(tmp_path: Path, model: Path) -> None:
    text = PLAN.format(model=model, modes='["15W", "MAXN"]', allow="allow_power_mode_change = true")
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
    plain = parse_plan(text.replace('power_mode = ["15W", "MAXN"]', ""), str(tmp_path / "q.toml"), tmp_path)
    assert "power_mode" not in expand(plain, {str(model): "0" * 64})[0].params.to_json()


@pytest.mark.llama
def test_the_sweep_switches_once_per_mode_and_a_failed_switch_is_a_stored_error(
    tmp_path: Path, model: Path
) -> None:
    from edgeprof.report.rows import build_rows
    from edgeprof.storage.db import new_session, open_engine
    from edgeprof.storage.models import Run
    from edgeprof.sweep import run_plan

    text = PLAN.format(model=model, modes='["15W", "7W"]', allow="allow_power_mode_change = true")
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
