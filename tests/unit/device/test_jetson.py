"""Jetson metadata from real captures: nvpmodel, jetson_clocks, L4T release, board model; state changes."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from sqlalchemy import select
from support.captures import read_capture

from edgeprof.device.facts import board_model, l4t_release
from edgeprof.device.jetson import (
    comparable_state,
    jetson_state,
    parse_jetson_clocks_show,
    parse_nvpmodel_q,
    read_fan,
)


def capture(name: str) -> str:
    return "\n".join(read_capture(name))


def test_nvpmodel_q_from_the_jp6_docs_capture() -> None:
    text = capture("nvpmodel-q_jp6-docs.txt")
    first_block = "\n".join(text.splitlines()[:2])
    assert parse_nvpmodel_q(first_block) == {"name": "MODE_30W", "id": 2}
    assert parse_nvpmodel_q(text) == {"name": "MAXN", "id": 0}  # the later reading wins
    assert parse_nvpmodel_q("garbage") is None


def test_jetson_clocks_show_agx_orin_is_not_locked() -> None:
    info = parse_jetson_clocks_show(capture("jetson_clocks-show_agx-orin_jp5.1.txt"))
    assert info["soc_family"] == "tegra234" and info["machine"] == "Jetson AGX Orin"
    assert len(info["cpus"]) == 12
    assert info["cpus"]["cpu0"] == {
        "online": True,
        "governor": "schedutil",
        "min_khz": 729600,
        "max_khz": 2201600,
        "cur_khz": 2201600,
    }
    assert info["gpu"] == {"min_hz": 306000000, "max_hz": 1300500000, "cur_hz": 306000000}
    assert info["emc"]["cur_hz"] == 2133000000
    assert info["fan"] == {"pwm": 55, "dynamic": True}
    assert info["power_mode"] == "MAXN"
    assert info["locked"] is False  # DVFS free: min != max


def test_jetson_clocks_show_tx1_is_locked_and_survives_the_governor_typo() -> None:
    info = parse_jetson_clocks_show(capture("jetson_clocks-show_tx1_l4t28.1.txt"))
    assert info["machine"] == "jetson_tx1"
    assert info["cpus"]["cpu3"]["governor"] == "interactive"
    assert info["locked"] is True  # min == max everywhere: jetson_clocks was applied
    assert info["power_mode"] is None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nv_tegra_release_agx-orin_r36.4.4.txt", "R36.4.4"),
        ("nv_tegra_release_thor_r38.2.txt", "R38.2.0"),
        ("nv_tegra_release_thor_r38.4.txt", None),
        ("nv_tegra_release_agx-orin_r39.2.txt", None),
    ],
)
def test_l4t_release_from_captures(tmp_path: Path, name: str, expected: str | None) -> None:
    text = capture(name)
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/nv_tegra_release").write_text(text.splitlines()[0] + "\n")
    got = l4t_release(tmp_path)
    if expected is None:
        assert got is not None and got.startswith("R")
    else:
        assert got == expected


def test_board_model_strips_the_trailing_nul(tmp_path: Path) -> None:
    text = capture("device-tree-model_tx1-nano_jp3-jp4.txt")
    models = [ln.split("= ", 1)[1] for ln in text.splitlines() if "/proc/device-tree/model" in ln]
    assert models == ["jetson_tx1", "NVIDIA Jetson Nano Developer Kit"]
    dt = tmp_path / "proc/device-tree"
    dt.mkdir(parents=True)
    (dt / "model").write_bytes(models[1].encode() + b"\x00")
    assert board_model(tmp_path) == "NVIDIA Jetson Nano Developer Kit"
    assert board_model(tmp_path / "nowhere") is None


def fake_jetson_root(tmp_path: Path, pwm: int = 120) -> Path:
    """Synthetic Jetson tree (not a capture): nv_tegra_release and a pwmfan hwmon."""
    (tmp_path / "etc").mkdir(parents=True)
    (tmp_path / "etc/nv_tegra_release").write_text("# R36 (release), REVISION: 4.4\n")
    fan = tmp_path / "sys/class/hwmon/hwmon3"
    fan.mkdir(parents=True)
    (fan / "name").write_text("pwmfan\n")
    (fan / "pwm1").write_text(f"{pwm}\n")
    return tmp_path


def test_jetson_state_reads_commands_and_fan(tmp_path: Path) -> None:
    root = fake_jetson_root(tmp_path)
    outputs = {
        "nvpmodel": "NV Power Mode: MAXN\n0\n",
        "jetson_clocks": capture("jetson_clocks-show_agx-orin_jp5.1.txt"),
    }
    state = jetson_state(root, cmd=lambda argv: outputs.get(argv[0]))
    assert state is not None
    assert state["nvpmodel"] == {"name": "MAXN", "id": 0}
    assert state["jetson_clocks"] == {"locked": False, "power_mode": "MAXN"}
    assert state["fan"] == {"hwmon": "hwmon3", "pwm": 120, "rpm": None}
    assert comparable_state(state) == {"power_mode": "MAXN", "power_mode_id": 0, "clocks_locked": False}
    # Without root, jetson_clocks --show fails: the state says unknown, not False.
    state = jetson_state(root, cmd=lambda argv: outputs["nvpmodel"] if argv[0] == "nvpmodel" else None)
    assert state is not None and state["jetson_clocks"] is None
    assert read_fan(tmp_path / "nowhere") is None


def test_not_a_jetson_has_no_state(tmp_path: Path) -> None:
    assert jetson_state(tmp_path, cmd=lambda argv: "x") is None


@pytest.mark.llama
def test_a_power_mode_change_mid_sweep_is_stored_and_flagged(tmp_path: Path, tiny_models) -> None:
    from edgeprof.plan.parse import parse_plan
    from edgeprof.report.rows import build_rows, render_table
    from edgeprof.storage.db import new_session, open_engine
    from edgeprof.storage.models import Run
    from edgeprof.sweep import run_plan

    plan = parse_plan(
        f"""
        [matrix]
        models = ["{tiny_models["Q4_K_M"]}"]
        ctx = [128, 256, 512]
        threads = [1]
        [[workload]]
        prompt_tokens = 8
        n_predict = 4
        [repeat]
        warmup = 0
        steady = 1
        """,
        str(tmp_path / "p.toml"),
        tmp_path,
    )
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
