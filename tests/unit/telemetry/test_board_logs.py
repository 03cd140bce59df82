"""The board-log readers (agent/telemetry/sbc_bench.py, column_logs.py, board_import.py) and the one log
verdict on what they read: the real logs in tests/fixtures/captures/throttling-logs (sources, blob ids and
what each shows in its SOURCES.md), and SYNTHETIC CSVs written by the tests (named so)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.paths import CAPTURES

from edgeprof.cli.tegrastats import _board_inputs
from edgeprof.telemetry.board_import import detect_board_format, read_board_log
from edgeprof.telemetry.board_logs import CPU_LOAD, FIRMWARE_CLOCK, THROTTLE_FLAG, BoardLog
from edgeprof.telemetry.column_logs import ColumnMapError, auto_map, date_line, parse_column_map
from edgeprof.telemetry.log_formats import detect_format
from edgeprof.telemetry.sbc_bench import clock_metrics
from edgeprof.telemetry.tegrastats_import import TegrastatsImportError
from edgeprof.verdicts.log_verdict import judge_log

LOGS = CAPTURES / "throttling-logs"
PI4 = LOGS / "rpi4-2000mhz_vcgencmd-csv_720s.csv"
PI3B = LOGS / "rpi3b_sbc-bench_fake-real-clock_25min.txt"
STRESSBERRY = LOGS / "rpi3b_stressberry_temperature-only_600s.dat"
RK3588 = LOGS / "rk3588s-rock5a_sbc-bench_big-little.txt"
H5 = LOGS / "h5-nanopi-k1-plus_sbc-bench_cpu.txt"
N305 = LOGS / "x86-n305-odroid-h4_sbc-bench_cpu.txt"


def read(path: Path, columns: str | None = None) -> BoardLog:
    fmt = detect_board_format(path, columns)
    assert fmt is not None, path
    return read_board_log(path, fmt, columns)


def judged(path: Path, columns: str | None = None) -> dict[str, Any]:
    [session] = judge_log(_board_inputs(read(path, columns)))["sessions"]
    return session


@pytest.mark.parametrize("path", [PI4, PI3B, STRESSBERRY, RK3588, H5, N305])
def test_no_board_log_passes_for_a_jetson_or_nvidia_format(path: Path) -> None:
    assert detect_format(path) is None  # so import-log hands it to the board readers


def test_the_pi4_csv_maps_its_own_header_and_starts_at_its_date_line() -> None:
    log = read(PI4)
    assert log.fmt == "column_csv" and log.columns == "time=sec,temp=tmp,clock=clk,throttle=thr"
    assert len(log.rows) == 720 and log.rows[0][0] == 0.0 and log.rows[-1][0] == 719.0
    assert date_line("Sun 25 Apr 2021 11:53:24 PM CEST") == log.wall_t0
    first = log.rows[0][1]
    assert first == {"temp.tmp_c": 49.0, "cpu.clock_mhz": 700.0, THROTTLE_FLAG: 0.0}


def test_the_pi4_csv_is_throttled_at_its_flag_and_its_clock_drop() -> None:
    session = judged(PI4)
    assert session["verdict"] == "throttled", session["reason"]
    assert "log.throttle_flag set from 2021-04-26 00:00:02 (+398 s)" in session["reason"]
    drop = session["clocks"]["cpu"]["drop"]
    assert abs(drop["t_s"] - 413.0) <= 1.0 and drop["from_mhz"] == 2000.0 and drop["lowest_mhz"] == 1333.0
    assert 80.0 <= drop["temp_c"] <= 82.0 and "cpu clock 2000 -> 1333 MHz" in session["reason"]
    # no load column: the readings at the board's hottest count as loaded, and it says so
    assert session["clocks"]["cpu"]["load"] == "inferred_from_heat"


def test_a_stated_column_map_reads_the_same_and_a_wrong_one_is_one_line() -> None:
    stated = judged(PI4, "time=sec,temp=tmp,clock=clk,throttle=thr")
    assert stated["verdict"] == "throttled" and stated["clocks"]["cpu"]["drop"]["t_s"] == 413.0
    with pytest.raises(ColumnMapError, match="no column speed"):
        read(PI4, "time=sec,temp=tmp,clock=speed")
    with pytest.raises(ColumnMapError, match="ROLE one of"):
        parse_column_map("time=sec,volts=v")
    with pytest.raises(ColumnMapError, match="neither a temp nor a clock"):
        parse_column_map("time=sec,load=cpu")


def test_a_header_maps_itself_only_when_every_name_is_known() -> None:
    assert auto_map(["sec", "tmp", "clk", "thr"]) == {
        "time": "sec",
        "temp": "tmp",
        "clock": "clk",
        "throttle": "thr",
    }
    assert auto_map(["sec", "tmp", "fan"]) is None  # an unknown column: the user states the map
    assert auto_map(["name", "value"]) is None


def test_a_synthetic_csv_without_a_date_line_has_elapsed_seconds_only(tmp_path: Path) -> None:
    log_file = tmp_path / "synthetic.csv"  # SYNTHETIC
    log_file.write_text(
        "time,temp,clock,load\n" + "".join(f"{i * 2},{50 + i / 10},1500,95\n" for i in range(30))
    )
    log = read(log_file)
    assert log.wall_t0 is None and log.spacing_s == 2.0
    assert log.rows[1][1] == {"temp.temp_c": 50.1, "cpu.clock_mhz": 1500.0, CPU_LOAD: 95.0}


def test_the_pi3b_result_has_its_device_phases_and_both_clocks() -> None:
    log = read(PI3B)
    assert log.fmt == "sbc_bench" and log.device["board"] == "Raspberry Pi 3 Model B Rev 1.2"
    assert log.device["kernel"] == "5.15.74-v8+" and log.device["cpu_count"] == 4
    names = [name for name, _a, _b in log.phases]
    assert "7-zip multi core benchmark" in names and "cpuminer" in names and "tinymembench" in names
    assert {"cpufreq.policy0.cur_mhz", FIRMWARE_CLOCK, CPU_LOAD, "temp.cpu_thermal_c"} <= set(log.metrics)
    assert len(log.rows) == 62  # 61 section rows and the "System health now" row
    assert "0x20002" in " ".join(log.notes)  # the firmware's get_throttled at the end


def test_the_pi3b_result_is_throttled_naming_the_firmware_clock_and_the_cpufreq_figure() -> None:
    session = judged(PI3B)
    assert session["verdict"] == "throttled", session["reason"]
    assert "(rpi.arm_clock_mhz, measured) 1200 -> 657 MHz" in session["reason"]
    assert "cpufreq.policy0.cur_mhz read 1200 MHz meanwhile" in session["reason"]
    assert (
        "not the clock that ran" in session["reason"]
        and "during 7-zip multi core benchmark" in session["reason"]
    )
    assert session["clocks"]["cpu"]["requested"]["max_mhz"] == 1200.0
    # the Pi firmware's 80 °C throttle point, from the board table with its source
    zone = session["thermometers"]["temp.cpu_thermal_c"]
    assert zone["trip"]["c"] == 80.0 and "Raspberry Pi documentation" in zone["trip"]["source"]
    assert zone["margin_c"] == pytest.approx(80.0 - 84.9)


def test_the_stressberry_file_is_inconclusive_naming_the_missing_clock_and_its_plateau() -> None:
    log = read(STRESSBERRY)
    assert log.fmt == "stressberry" and len(log.rows) == 293 and log.metrics == ["temp.temperature_c"]
    session = judged(STRESSBERRY)
    assert session["verdict"] == "inconclusive", session["reason"]
    assert "no CPU or GPU clock in this log" in session["reason"]
    assert "plateaued at 80.6–81.7 °C" in session["reason"]


@pytest.mark.parametrize(
    ("path", "header", "board", "from_mhz", "lowest_at_most", "hot_c"),
    [
        (RK3588, "big.LITTLE", "Radxa ROCK 5A", 1608.0, 1008.0, 85.0),
        (H5, "CPU", "FriendlyElec NanoPi K1 Plus", 1368.0, 960.0, 84.6),
        (N305, "CPU", "HARDKERNEL ODROID-H4 1.0 / i3-N305", 1900.0, 900.0, 95.0),
    ],
)
def test_more_sbc_bench_results_throttle_where_their_clocks_fall(
    path: Path, header: str, board: str, from_mhz: float, lowest_at_most: float, hot_c: float
) -> None:
    log = read(path)
    assert log.device["board"] == board and set(clock_metrics(header)) <= set(log.metrics)
    session = judged(path)
    assert session["verdict"] == "throttled", session["reason"]
    drop = session["clocks"]["cpu"]["drop"]
    assert drop["from_mhz"] == from_mhz and drop["lowest_mhz"] <= lowest_at_most and drop["temp_c"] == hot_c


def test_sbc_bench_clock_headers() -> None:
    assert clock_metrics("fake/real") == ["cpufreq.policy0.cur_mhz", FIRMWARE_CLOCK]
    assert clock_metrics("cpu0/cpu4/cpu6") == [f"cpufreq.policy{n}.cur_mhz" for n in (0, 4, 6)]
    assert clock_metrics("CPU") == ["cpufreq.policy0.cur_mhz"]
    assert clock_metrics("CPU n/a") == []


def test_a_synthetic_sbc_bench_result_past_midnight_keeps_counting(tmp_path: Path) -> None:
    result = tmp_path / "synthetic-sbc-bench.txt"  # SYNTHETIC: the monitoring form of a real result
    rows = "".join(
        f"{hms}: 1800/ 408/ 408MHz  4.00 100%   0%  99%   0%   0%   0%  {60 + i}.0°C   12.03\n"
        for i, hms in enumerate(["23:59:50", "23:59:55", "00:00:00", "00:00:05", "00:00:10"])
    )
    result.write_text(
        "sbc-bench v0.9.9 Some Board (Mon, 05 Dec 2022 23:59:00 +0100)\n\nSystem health while running x:\n\n"
        "Time       cpu0/cpu4/cpu6    load %cpu %sys %usr %nice %io %irq   Temp   DC(V)\n" + rows
    )
    log = read(result)
    assert [t for t, _ in log.rows] == [0.0, 5.0, 10.0, 15.0, 20.0]
    assert log.rows[0][1]["cpufreq.policy4.cur_mhz"] == 408.0 and log.phases == [("x", 0.0, 20.0)]


def test_a_file_that_only_starts_like_a_result_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("sbc-bench v0.9.9 Board (not a date)\n")
    with pytest.raises(TegrastatsImportError, match="cannot read the date"):
        read(bad)
    empty = tmp_path / "empty.txt"
    empty.write_text("sbc-bench v0.9.9 Board (Mon, 05 Dec 2022 17:44:55 +0100)\nnothing else\n")
    with pytest.raises(TegrastatsImportError, match="no readings"):
        read(empty)


def _word_csv(tmp_path: Path, words: list[str]) -> Path:
    """SYNTHETIC: a vcgencmd loop that logs the get_throttled word itself, the clock falling with it."""
    path = tmp_path / "synthetic-words.csv"
    rows = [f"{i},{60 + i},{1500 if w in ('0x0', '0x10001') else 1000},{w}" for i, w in enumerate(words)]
    path.write_text("sec,tmp,clk,thr\n" + "\n".join(rows) + "\n")
    return path


def test_a_throttle_column_of_firmware_words_is_decoded_and_under_voltage_is_not_heat(tmp_path: Path) -> None:
    heat = judged(_word_csv(tmp_path, ["0x0"] * 4 + ["0x20002", "throttled=0x20006"] + ["0x20006"] * 4))
    assert heat["verdict"] == "throttled", heat["reason"]
    assert "ArmFrequencyCapped, ArmFrequencyCappedOccurred from 4 s" in heat["reason"]
    assert "not heat" not in heat["reason"]
    volts = judged(_word_csv(tmp_path, ["0x0"] * 4 + ["0x50005"] * 6))
    assert volts["verdict"] == "throttled" and "Throttled (under-voltage, not heat)" in volts["reason"]
    # the under-voltage bit alone holds no clock down: no flag hit, and the clock held
    only_volts = judged(_word_csv(tmp_path, ["0x0"] * 4 + ["0x10001"] * 6))
    assert "under-voltage" not in only_volts["reason"] and only_volts["verdict"] != "throttled"
