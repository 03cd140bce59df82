"""Jetson metadata from real captures: nvpmodel, jetson_clocks, L4T release, board model. A state change
under a running sweep is tested in tests/integration/test_power_mode.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.captures import read_capture
from support.fakes import FakeRoot

from edgeprof.device import (
    board_model,
    comparable_state,
    jetson_state,
    l4t_release,
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
    FakeRoot(tmp_path).value("etc/nv_tegra_release", text.splitlines()[0])  # the capture's header line
    got = l4t_release(tmp_path)
    if expected is None:
        assert got is not None and got.startswith("R")
    else:
        assert got == expected


def test_board_model_strips_the_trailing_nul(tmp_path: Path) -> None:
    text = capture("device-tree-model_tx1-nano_jp3-jp4.txt")
    models = [ln.split("= ", 1)[1] for ln in text.splitlines() if "/proc/device-tree/model" in ln]
    assert models == ["jetson_tx1", "NVIDIA Jetson Nano Developer Kit"]
    FakeRoot(tmp_path).device_tree(models[1])
    assert board_model(tmp_path) == "NVIDIA Jetson Nano Developer Kit"
    assert board_model(tmp_path / "nowhere") is None


def test_jetson_state_reads_commands_and_fan(tmp_path: Path) -> None:
    root = tmp_path  # synthetic Jetson tree (not a capture): nv_tegra_release and a pwmfan hwmon
    fake = FakeRoot(root)
    fake.l4t_release()
    fake.hwmon_fan(3, pwm=120)
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
