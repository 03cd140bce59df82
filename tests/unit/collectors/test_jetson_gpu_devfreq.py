"""The Jetson GPU devfreq collector on SYNTHETIC fake roots (tests/support/boards.py and below): the node
found by the GPU's name per module, its figures read in Hz and stored in MHz, and what doctor says."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.boards import ORIN_GPU_NODE, SyntheticOrin
from support.captures import read_capture
from support.fakes import FakeRoot

from edgeprof.collectors.jetson_gpu_devfreq import (
    JetsonGpuDevfreqCollector,
    find_gpu_node,
    parse_available_frequencies,
)
from edgeprof.device.doctor import collectors_info


def test_orin_node_found_by_its_gpu_name_beside_the_memory_controller(tmp_path: Path) -> None:
    orin = SyntheticOrin(FakeRoot(tmp_path))
    collector = JetsonGpuDevfreqCollector(tmp_path)
    ok, reason = collector.available()
    assert ok, reason
    assert reason.startswith(f"GPU ga10b (Orin (tegra234)) at /sys/class/devfreq/{ORIN_GPU_NODE}")
    assert "5 steps 306-1300.5 MHz" in reason and "governor nvhost_podgov" in reason
    orin.set(930.75, 90.0, cap_mhz=1134.75)
    assert collector.sample() == {
        "devfreq.gpu.cur_mhz": 930.75,
        "devfreq.gpu.max_mhz": 1134.75,
        "devfreq.gpu.min_mhz": 306.0,
        "devfreq.gpu.hw_max_mhz": 1300.5,
    }


@pytest.mark.parametrize(
    ("node", "of_name", "module"),
    [
        ("17000000.gv11b", "gv11b", "Xavier"),
        ("17000000.gp10b", "gp10b", "TX2"),
        ("57000000.gpu", "gpu", "Nano / TX1"),
        ("17000000.gpu", "gpu", "Nano / TX1"),
    ],
)
def test_each_modules_gpu_node(tmp_path: Path, node: str, of_name: str, module: str) -> None:
    fake = FakeRoot(tmp_path)
    fake.value(f"sys/class/devfreq/{node}/cur_freq", 76800000)
    fake.value(f"sys/class/devfreq/{node}/device/of_node/name", of_name)
    ok, reason = JetsonGpuDevfreqCollector(tmp_path).available()
    assert ok and f"GPU {of_name} ({module}" in reason and node in reason
    assert JetsonGpuDevfreqCollector(tmp_path).sample()["devfreq.gpu.cur_mhz"] == 76.8


def test_a_node_without_of_node_is_found_by_its_known_name(tmp_path: Path) -> None:
    SyntheticOrin(FakeRoot(tmp_path), of_node=False)
    found = find_gpu_node(tmp_path / "sys/class/devfreq")
    assert found is not None and found[0].name == ORIN_GPU_NODE and found[1] == "ga10b"


def test_other_devfreq_nodes_are_no_gpu(tmp_path: Path) -> None:
    fake = FakeRoot(tmp_path)
    fake.value("sys/class/devfreq/15340000.vic/cur_freq", 115200000)
    fake.value("sys/class/devfreq/15340000.vic/device/of_node/name", "vic")
    ok, reason = JetsonGpuDevfreqCollector(tmp_path).available()
    assert not ok and reason.startswith("no GPU devfreq node under /sys/class/devfreq")


def test_unreadable_figures_are_none_never_zero(tmp_path: Path) -> None:
    orin = SyntheticOrin(FakeRoot(tmp_path))
    collector = JetsonGpuDevfreqCollector(tmp_path)
    assert collector.available().ok
    (orin.node / "max_freq").unlink()
    orin.root.value(orin.node / "cur_freq", 0)
    values = collector.sample()
    assert values["devfreq.gpu.cur_mhz"] is None and values["devfreq.gpu.max_mhz"] is None


def test_available_frequencies_are_hz_read_as_mhz() -> None:
    assert parse_available_frequencies("306000000 1300500000 612000000 junk 0") == [306.0, 612.0, 1300.5]
    assert parse_available_frequencies(None) == []


def test_roles_gpu_clock_capped_by_its_devfreq_limit() -> None:
    cur = JetsonGpuDevfreqCollector.role_of("devfreq.gpu.cur_mhz")
    cap = JetsonGpuDevfreqCollector.role_of("devfreq.gpu.max_mhz")
    assert cur is not None and cur.role == "clock" and cur.domain == "gpu" and cur.component == "gpu"
    assert cap is not None and cap.role == "clock_cap" and cap.component == "gpu"


def test_doctor_says_which_node_it_reads(tmp_path: Path) -> None:
    SyntheticOrin(FakeRoot(tmp_path))
    entry = next(c for c in collectors_info(tmp_path) if c["name"] == "jetson_gpu_devfreq")
    assert entry["ok"] and f"/sys/class/devfreq/{ORIN_GPU_NODE}" in entry["reason"]
    assert entry["metrics"][0]["name"] == "devfreq.gpu.cur_mhz"


# -- real captured devfreq figures -------------------------------------------------------------------------
def test_a_real_xavier_available_frequencies_line_read_in_hz(tmp_path: Path) -> None:
    """The AGX Xavier's available_frequencies as a user recorded them (a capture with its source), in a
    fake root whose other files are synthetic: 14 steps, 114.75 to 1377 MHz."""
    (line,) = read_capture("devfreq-available_frequencies_agx-xavier.txt")
    fake = FakeRoot(tmp_path)
    node = "sys/class/devfreq/17000000.gv11b"
    fake.write(f"{node}/available_frequencies", line + "\n")
    fake.value(f"{node}/cur_freq", 1377000000)  # synthetic: the top step
    ok, reason = JetsonGpuDevfreqCollector(tmp_path).available()
    assert ok and "GPU gv11b (Xavier (tegra194))" in reason and "14 steps 114.75-1377 MHz" in reason
    assert JetsonGpuDevfreqCollector(tmp_path).sample()["devfreq.gpu.hw_max_mhz"] == 1377.0


def test_the_real_agx_orin_gpu_figures_of_jetson_clocks_show_in_mhz(tmp_path: Path) -> None:
    """``jetson_clocks --show`` prints the GPU's devfreq min/max/cur in Hz (the real AGX Orin capture);
    written into the node's files they read as the MHz jetson_clocks means."""
    gpu = next(ln for ln in read_capture("jetson_clocks-show_agx-orin_jp5.1.txt") if ln.startswith("GPU "))
    figures = dict(part.split("=") for part in gpu.split()[1:])
    fake = FakeRoot(tmp_path)
    node = f"sys/class/devfreq/{ORIN_GPU_NODE}"
    fake.value(f"{node}/min_freq", figures["MinFreq"])
    fake.value(f"{node}/max_freq", figures["MaxFreq"])
    fake.value(f"{node}/cur_freq", figures["CurrentFreq"])
    values = JetsonGpuDevfreqCollector(tmp_path).sample()
    assert values == {
        "devfreq.gpu.cur_mhz": 306.0,
        "devfreq.gpu.max_mhz": 1300.5,
        "devfreq.gpu.min_mhz": 306.0,
    }
