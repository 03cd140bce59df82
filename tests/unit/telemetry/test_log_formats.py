"""Reading the logs users have (agent/telemetry/log_formats.py): format detection and the field mapping of
jtop's CSV and nvidia-smi's CSV. Every file here is SYNTHETIC, written by the test in the documented
format (nvidia-smi --query-gpu field names; jtop.stats keys as jetson-stats' logger writes them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.paths import CAPTURES

from edgeprof.collectors import roles_for
from edgeprof.collectors.nvml import decode_clock_event_reasons
from edgeprof.telemetry.log_formats import (
    JTOP_CSV,
    NVIDIA_SMI_CSV,
    TEGRASTATS,
    detect_format,
    jtop_rows,
    nvidia_smi_rows,
)
from edgeprof.telemetry.tegrastats_import import TegrastatsImportError

SMI_HEAD = (
    "timestamp, index, temperature.gpu, clocks.current.sm [MHz], clocks.max.sm [MHz], power.draw [W], "
    "power.limit [W], utilization.gpu [%], clocks_event_reasons.active, clocks_event_reasons.hw_slowdown"
)


def write(tmp_path: Path, name: str, *lines: str) -> Path:
    path = tmp_path / name
    path.write_text("# SYNTHETIC\n" + "\n".join(lines) + "\n")
    return path


def test_formats_are_recognised_from_the_content_not_the_name(tmp_path: Path) -> None:
    smi = write(
        tmp_path,
        "a.txt",
        SMI_HEAD,
        "2026/03/01 22:00:00.000, 0, 40, 1980 MHz, 1980 MHz, 90 W, 700 W, 5 %, 0x0, Not Active",
    )
    jtop = write(
        tmp_path,
        "b.log",
        "time,uptime,CPU1,GPU,Temp tj,Power TOT",
        "2026-03-01 22:00:00.5,1:00:00,5,0,40.0,3000",
    )
    teg = CAPTURES / "tegrastats-logs" / "tx2_jp4_light-load_2660lines.log"
    other = write(tmp_path, "c.csv", "name,value", "foo,1")
    assert [detect_format(p) for p in (smi, jtop, teg, other)] == [NVIDIA_SMI_CSV, JTOP_CSV, TEGRASTATS, None]


def test_nvidia_smi_fields_units_and_reasons(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "smi.csv",
        SMI_HEAD,
        "2026/03/01 22:00:00.000, 1, 81, 1410 MHz, 1980 MHz, 650.50 W, 700.00 W, 100 %, "
        "0x0000000000000020, Active",
        "2026/03/01 22:00:01.000, 1, [N/A], [N/A], 1980 MHz, [N/A], 700.00 W, 100 %, 0x0, Not Active",
    )
    (t0, first), (t1, second) = nvidia_smi_rows(path)
    assert t0 is not None and t1 is not None and t1 - t0 == pytest.approx(1.0)
    assert first["gpu1.temp_c"] == 81.0 and first["gpu1.sm_clock_mhz"] == 1410.0
    assert first["gpu1.sm_clock_max_mhz"] == 1980.0 and first["gpu1.power_mw"] == 650500.0
    assert first["gpu1.power_limit_mw"] == 700000.0 and first["gpu1.util_pct"] == 100.0
    reasons = first["gpu1.clock_event_reasons"]
    assert reasons is not None and decode_clock_event_reasons(int(reasons)) == [
        "HwSlowdown",
        "SwThermalSlowdown",
    ]
    assert second["gpu1.temp_c"] is None and second["gpu1.sm_clock_mhz"] is None  # [N/A] is not a number
    roles = roles_for(first, dict.fromkeys(first, "nvml"))
    assert roles["gpu1.sm_clock_max_mhz"].role == "clock_limit" and roles["gpu1.temp_c"].thermometer


def test_jtop_fields(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "jtop.csv",
        "time,uptime,CPU1,CPU2,GPU,EMC,Temp CPU,Temp PMIC,Temp tj,Power VDD_IN,Power TOT,jetson_clocks,"
        "nvp model",
        "2026-03-01 22:00:00.123456,1:00:00,55,OFF,99,20,45.5,50.0,-256.0,7000,6800,ON,MAXN",
    )
    [(epoch, values)] = jtop_rows(path)
    assert epoch is not None
    assert values["cpu0.util_pct"] == 55.0 and values["cpu1.util_pct"] is None  # OFF
    assert values["gpu.util_pct"] == 99.0 and values["emc.util_pct"] == 20.0
    assert values["temp.cpu_c"] == 45.5 and values["temp.tj_c"] is None  # -256: sensor off
    assert values["power.vdd_in_mw"] == 7000.0 and values["power.total_mw"] == 6800.0
    assert "nvp.budget_mw" not in values  # MAXN names no wattage
    roles = roles_for(values, dict.fromkeys(values, "jtop"))
    assert not roles["temp.pmic_c"].thermometer and roles["power.vdd_in_mw"].whole_board


def test_binary_input_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "x.bin"
    path.write_bytes(b"time,uptime\x00\x01")
    with pytest.raises(TegrastatsImportError, match="binary"):
        detect_format(path)
