"""The verdict on a log (agent/verdicts/log_verdict.py): the three real tegrastats logs in
tests/fixtures/captures/tegrastats-logs (sources in its SOURCES.md), and SYNTHETIC logs from
tests/support/synthetic_logs.py whose answers are known by construction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.paths import CAPTURES
from support.synthetic_logs import Board, nvidia_smi_csv, tegrastats_log

from edgeprof.collectors import roles_for
from edgeprof.telemetry.tegrastats_import import tegrastats_series
from edgeprof.verdicts.log_verdict import (
    FLAT_FRACTION,
    GAP_INTERVALS,
    LOAD_UTIL_PCT,
    LogInputs,
    judge_log,
    split_sessions,
)

LOGS = CAPTURES / "tegrastats-logs"
PMIC = "temp.pmic_c"


def judge_file(path: Path, interval_s: float | None = None) -> dict[str, Any]:
    found = tegrastats_series(path, interval_s)
    roles = roles_for(found.series, dict.fromkeys(found.series, "tegrastats"))
    return judge_log(LogInputs(found.series, roles, found.spacing_s, found.spacing_assumed, found.wall_t0))


@pytest.mark.parametrize(
    ("name", "hottest_at_most", "hottest_at_least"),
    [
        ("tx2_jp4_light-load_2660lines.log", 45.0, 44.0),  # the PMIC zone reads 100 °C throughout
        ("nano-4gb_jp4_gpu-inference_114lines.txt", 33.0, 32.0),  # PMIC@50C
        ("orin-nano-class_jp5.1_stress-gpuburn_105s.log", 53.5, 52.5),  # PMIC@50C while GPU 38 -> 53 °C
    ],
)
def test_real_logs_are_not_throttled_or_capped_with_the_real_hottest(
    name: str, hottest_at_most: float, hottest_at_least: float
) -> None:
    result = judge_file(LOGS / name)
    [session] = result["sessions"]
    assert session["verdict"] in ("not_throttled", "capped"), session["reason"]
    assert hottest_at_least <= session["hottest_max_c"] <= hottest_at_most
    assert session["hottest_zone"] != PMIC and PMIC not in session["thermometers"]
    assert "PMIC" in session["excluded_zones"][PMIC]
    for key in (
        "start",
        "end",
        "lines",
        "verdict",
        "reason",
        "hottest_zone",
        "hottest_max_c",
        "excluded_zones",
    ):
        assert key in session
    assert all({"max_mhz", "held_mhz", "capped"} <= set(d) for d in session["clocks"].values())


def test_the_orin_log_is_capped_and_says_its_gpu_clock_cannot_be_seen() -> None:
    [session] = judge_file(LOGS / "orin-nano-class_jp5.1_stress-gpuburn_105s.log")["sessions"]
    assert session["verdict"] == "capped" and session["clocks"]["cpu"]["capped"]
    assert session["clocks"]["cpu"]["held_mhz"] == 1190.0
    assert any("GPU clock is not in this log" in n for n in session["notes"])
    assert session["start"] == "2025-10-01 20:05:55" and session["lines"] == 103


def test_a_log_without_timestamps_says_its_spacing_was_assumed_and_takes_a_stated_one() -> None:
    result = judge_file(LOGS / "nano-4gb_jp4_gpu-inference_114lines.txt")
    assert result["spacing_assumed"] and result["spacing_s"] == 1.0
    assert "spacing assumed" in result["sessions"][0]["end"]
    stated = judge_file(LOGS / "nano-4gb_jp4_gpu-inference_114lines.txt", interval_s=0.5)
    assert not stated["spacing_assumed"] and stated["sessions"][0]["duration_s"] == pytest.approx(56.5)


def test_a_synthetic_throttled_log_is_throttled_at_the_trip_naming_the_clock_and_depth(
    tmp_path: Path,
) -> None:
    board = Board()
    trip_t = board.trip_t()
    assert trip_t is not None
    [session] = judge_file(tegrastats_log(tmp_path / "throttled.log", board))["sessions"]
    assert session["verdict"] == "throttled", session["reason"]
    drop = session["clocks"]["gpu"]["drop"]
    assert abs(drop["t_s"] - trip_t) <= board.interval_s
    assert drop["from_mhz"] == board.max_mhz and drop["to_mhz"] == board.capped_mhz
    assert drop["depth_pct"] == pytest.approx(100 * (1 - board.capped_mhz / board.max_mhz), abs=0.1)
    assert "gpu clock 1020 -> 612 MHz (-40 %)" in session["reason"]
    assert session["clocks"]["gpu"]["while_hot_mhz"] == board.capped_mhz  # at its peak the cap was down
    assert session["trip_zone"] == "temp.tj_c" and PMIC in session["excluded_zones"]


def test_a_log_that_heats_and_stays_fast_is_not_steady(tmp_path: Path) -> None:
    board = Board(trip_c=None, gpu_util=70.0, cpu_util=100.0, cpu_swing_mhz=90.0, lines=200)
    [session] = judge_file(tegrastats_log(tmp_path / "heating.log", board))["sessions"]
    assert session["verdict"] == "not_steady", session["reason"]
    assert session["reason"].startswith("run longer; +") and "°C/min" in session["reason"]


def test_a_20_hour_gap_makes_two_sessions(tmp_path: Path) -> None:
    result = judge_file(tegrastats_log(tmp_path / "two.log", Board(lines=200), gap_h=20.0))
    first, second = result["sessions"]
    assert first["lines"] == second["lines"] == 200
    assert first["start"] == "2026-03-01 22:00:00" and second["start"] == "2026-03-02 18:00:00"


def test_sessions_split_just_beyond_the_gap_threshold() -> None:
    limit = GAP_INTERVALS * 1.0
    assert len(split_sessions([0.0, 1.0, 1.0 + limit], 1.0)) == 1
    assert len(split_sessions([0.0, 1.0, 1.0 + limit + 0.01], 1.0)) == 2


def _one_domain(gpu: list[float], util: float) -> dict[str, Any]:
    series = {
        "gpu.freq_mhz": [(float(i), v) for i, v in enumerate(gpu)],
        "gpu.util_pct": [(float(i), util) for i in range(len(gpu))],
        "temp.tj_c": [(float(i), 40.0 + 0.5 * (i % 2)) for i in range(len(gpu))],
    }
    result = judge_log(LogInputs(series, roles_for(series, dict.fromkeys(series, "tegrastats"))))
    return result["sessions"][0]


def test_a_clock_is_loaded_from_the_load_threshold_on() -> None:
    clock = [1000.0, 999.0] * 5
    assert _one_domain(clock, LOAD_UTIL_PCT)["clocks"]["gpu"]["loaded_readings"] == 10
    assert _one_domain(clock, LOAD_UTIL_PCT - 1)["clocks"]["gpu"]["loaded_readings"] == 0


def test_capped_means_flat_within_the_flat_fraction() -> None:
    inside = [1000.0, 1000.0 * (1 - FLAT_FRACTION)] * 5
    outside = [1000.0, 1000.0 * (1 - FLAT_FRACTION) - 1.0] * 5
    assert _one_domain(inside, 99.0)["verdict"] == "capped"
    assert _one_domain(outside, 99.0)["clocks"]["gpu"]["status"] == "held"


def _smi(tmp_path: Path, board: Board, limit_mhz: float | None = None) -> dict[str, Any]:
    from edgeprof.telemetry.log_formats import NVIDIA_SMI_CSV, read_rows
    from edgeprof.telemetry.tegrastats_import import series_of_rows

    rows = read_rows(nvidia_smi_csv(tmp_path / "smi.csv", board, limit_mhz=limit_mhz), NVIDIA_SMI_CSV)
    found = series_of_rows(rows, None, len(rows))
    roles = roles_for(found.series, dict.fromkeys(found.series, "nvml"))
    [session] = judge_log(LogInputs(found.series, roles, found.spacing_s, False, found.wall_t0))["sessions"]
    return session


def test_an_sm_clock_held_flat_below_its_stated_maximum_is_capped(tmp_path: Path) -> None:
    session = _smi(tmp_path, Board(trip_c=None, max_mhz=1400.0), limit_mhz=1980.0)
    assert session["verdict"] == "capped", session["reason"]
    assert session["clocks"]["gpu"]["limit_mhz"] == 1980.0 and session["clocks"]["gpu"]["held_mhz"] == 1400.0


def test_an_sm_clock_pinned_at_its_maximum_is_judged_by_the_drivers_reasons(tmp_path: Path) -> None:
    session = _smi(tmp_path, Board(trip_c=None))
    assert session["verdict"] in ("not_throttled", "not_steady"), session["reason"]
    assert "gpu0.sm_clock_mhz" in session["clocks_not_observable"]


def test_a_session_needs_the_minimum_lines_for_a_trend() -> None:
    from edgeprof.verdicts.log_verdict import MIN_SESSION_LINES

    assert MIN_SESSION_LINES == 5
    judged = []
    for n in (MIN_SESSION_LINES - 1, MIN_SESSION_LINES):  # a session of exactly n lines
        series = {
            "temp.tj_c": [(float(i), 40.0 + i) for i in range(n)],
            "gpu.util_pct": [(float(i), 99.0) for i in range(n)],
        }
        judged.append(judge_log(LogInputs(series, roles_for(series, dict.fromkeys(series, "tegrastats")))))
    short, enough = (j["sessions"][0] for j in judged)
    assert short["verdict"] == "inconclusive" and short["reason"].startswith("too short: 4 line(s)")
    assert not enough["reason"].startswith("too short")


def test_steady_state_is_judged_every_10_s_and_at_the_end() -> None:
    from edgeprof.verdicts.log_verdict import STEADY_EVERY_S, judged_ends

    assert judged_ends([0.0, 5.0, 9.9, 10.0, 15.0, 21.0]) == [0.0, 10.0, 21.0]
    assert STEADY_EVERY_S == 10.0
