"""The verdict on a log (agent/verdicts/log_verdict.py): the three real tegrastats logs in
tests/fixtures/captures/tegrastats-logs (sources in its SOURCES.md), and SYNTHETIC logs from
tests/support/synthetic_logs.py whose answers are known by construction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.paths import CAPTURES
from support.synthetic_logs import Board, nvidia_smi_csv, tegrastats_log

from edgeprof.collectors import MetricRole, roles_for
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
    ("name", "hottest_at_most", "hottest_at_least", "verdict"),
    [
        # the PMIC zone reads 100 °C throughout; steady at 43.5 °C after 540 s
        ("tx2_jp4_light-load_2660lines.log", 45.0, 44.0, "not_throttled"),
        # PMIC@50C; 114 lines still warming at +1.4 °C/min
        ("nano-4gb_jp4_gpu-inference_114lines.txt", 33.0, 32.0, "not_steady"),
        # PMIC@50C while GPU 38 -> 53 °C: still heating at its end
        ("orin-nano-class_jp5.1_stress-gpuburn_105s.log", 53.5, 52.5, "not_steady"),
    ],
)
def test_real_logs_are_answered_with_the_real_hottest(
    name: str, hottest_at_most: float, hottest_at_least: float, verdict: str
) -> None:
    result = judge_file(LOGS / name)
    [session] = result["sessions"]
    assert session["verdict"] == verdict, session["reason"]
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


def test_the_orin_log_held_its_cpu_clock_is_still_heating_and_says_its_gpu_clock_cannot_be_seen() -> None:
    [session] = judge_file(LOGS / "orin-nano-class_jp5.1_stress-gpuburn_105s.log")["sessions"]
    # flat at 1189-1190 MHz with no maximum in the log: held (as one flat at exactly 1510 MHz is), not capped
    assert session["verdict"] == "not_steady" and not session["clocks"]["cpu"]["capped"]
    assert session["clocks"]["cpu"]["status"] == "held" and session["clocks"]["cpu"]["held_mhz"] == 1190.0
    assert "cpu held at 1190 MHz" in session["reason"] and "GPU clock is not in this log" in session["reason"]
    assert session["reason"].startswith("+") and "°C/min at the end; run longer" in session["reason"]
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
    assert "gpu clock 1020 -> 612 MHz from" in session["reason"] and "-40 % on average" in session["reason"]
    assert session["clocks"]["gpu"]["while_hot_mhz"] == board.capped_mhz  # at its peak the cap was down
    assert session["trip_zone"] == "temp.tj_c" and PMIC in session["excluded_zones"]


def test_a_log_that_heats_and_stays_fast_is_not_steady(tmp_path: Path) -> None:
    board = Board(trip_c=None, gpu_util=70.0, cpu_util=100.0, cpu_swing_mhz=90.0, lines=200)
    [session] = judge_file(tegrastats_log(tmp_path / "heating.log", board))["sessions"]
    assert session["verdict"] == "not_steady", session["reason"]
    assert session["reason"].startswith("+") and "°C/min at the end; run longer" in session["reason"]


def test_a_20_hour_gap_makes_two_sessions(tmp_path: Path) -> None:
    result = judge_file(tegrastats_log(tmp_path / "two.log", Board(lines=200), gap_h=20.0))
    first, second = result["sessions"]
    assert first["lines"] == second["lines"] == 200
    assert first["start"] == "2026-03-01 22:00:00" and second["start"] == "2026-03-02 18:00:00"


def test_sessions_split_just_beyond_the_gap_threshold() -> None:
    limit = GAP_INTERVALS * 1.0
    assert len(split_sessions([0.0, 1.0, 1.0 + limit], 1.0)) == 1
    assert len(split_sessions([0.0, 1.0, 1.0 + limit + 0.01], 1.0)) == 2


def _one_domain(
    gpu: list[float],
    util: float,
    limit_mhz: float | None = None,
    temps: list[float] | None = None,
    util_lines: int | None = None,
) -> dict[str, Any]:
    """A tegrastats-style GPU clock at ``util`` load (on the first ``util_lines`` lines only, where given),
    ``temps`` (default: flat 40/40.5 °C) and, where given, the clock's maximum as the log would state it."""
    n = len(gpu)
    series: dict[str, list[tuple[float, float | None]]] = {
        "gpu.freq_mhz": [(float(i), v) for i, v in enumerate(gpu)],
        "gpu.util_pct": [(float(i), util) for i in range(n if util_lines is None else util_lines)],
        "temp.tj_c": [(float(i), v) for i, v in enumerate(temps or [40.0 + 0.5 * (i % 2) for i in range(n)])],
    }
    roles = roles_for(series, dict.fromkeys(series, "tegrastats"))
    if limit_mhz is not None:
        series["gpu.max_mhz"] = [(float(i), limit_mhz) for i in range(n)]
        roles["gpu.max_mhz"] = MetricRole("clock_limit", "MHz", "gpu", domain="gpu")
    result = judge_log(LogInputs(series, roles))
    return result["sessions"][0]


def test_a_clock_is_loaded_from_the_load_threshold_on() -> None:
    clock = [1000.0, 999.0] * 5
    assert _one_domain(clock, LOAD_UTIL_PCT)["clocks"]["gpu"]["loaded_readings"] == 10
    assert _one_domain(clock, LOAD_UTIL_PCT - 1)["clocks"]["gpu"]["loaded_readings"] == 0


def test_capped_means_flat_within_the_flat_fraction_below_the_stated_maximum() -> None:
    inside = [1000.0, 1000.0 * (1 - FLAT_FRACTION)] * 5
    outside = [1000.0, 1000.0 * (1 - FLAT_FRACTION) - 1.0] * 5
    assert _one_domain(inside, 99.0, limit_mhz=1300.0)["verdict"] == "capped"
    assert _one_domain(outside, 99.0, limit_mhz=1300.0)["clocks"]["gpu"]["status"] == "held"


def test_a_flat_clock_without_a_stated_maximum_held_and_is_never_capped() -> None:
    # kills ``capped = flat`` (the limit dropped from the rule): 1189-1190 and exactly 1510 read alike
    for clock in ([1190.0, 1189.0] * 5, [1510.0] * 10):
        session = _one_domain(clock, 99.0)
        assert session["clocks"]["gpu"]["status"] == "held" and not session["clocks"]["gpu"]["capped"]
        assert session["verdict"] != "capped" and session["verdict"] != "inconclusive", session["reason"]
        assert f"gpu held at {session['clocks']['gpu']['held_mhz']:g} MHz" in session["reason"]
    at_max = _one_domain([1000.0] * 10, 99.0, limit_mhz=1000.0)  # pinned at the stated maximum: held
    assert at_max["clocks"]["gpu"]["status"] == "held"


def test_a_drop_counts_only_once_the_board_has_heated() -> None:
    # kills the drop rule without ``and hot``: a loaded clock falling on a board that never warmed is DVFS
    clock = [1000.0] * 5 + [600.0] * 5
    cold = _one_domain(clock, 99.0)
    assert cold["clocks"]["gpu"]["status"] != "dropped" and cold["verdict"] != "throttled"
    rise = 2.0  # the soak's heating threshold: a drop at exactly +2 °C is hot enough
    warm = _one_domain(clock, 99.0, temps=[40.0] * 5 + [40.0 + rise] * 5)
    assert warm["clocks"]["gpu"]["status"] == "dropped" and warm["verdict"] == "throttled"
    just_under = _one_domain(clock, 99.0, temps=[40.0] * 5 + [40.0 + rise - 0.01] * 5)
    assert just_under["clocks"]["gpu"]["status"] != "dropped"


def test_a_line_without_a_load_reading_is_not_under_load() -> None:
    # kills ``util.get(t, -1.0)`` -> ``100.0``: the load of lines the log did not read is not assumed full
    session = _one_domain([1000.0] * 10, 99.0, util_lines=6)
    assert session["clocks"]["gpu"]["loaded_readings"] == 6


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


def test_an_sm_clock_pinned_at_its_maximum_is_observed_holding(tmp_path: Path) -> None:
    # NVML reads the clock from the hardware: flat, it held; it is not "not observable"
    session = _smi(tmp_path, Board(trip_c=None))
    assert session["verdict"] in ("not_throttled", "not_steady"), session["reason"]
    assert session["clocks_not_observable"] == {} and session["clocks"]["gpu"]["status"] == "held"
    assert "gpu held at 1020 MHz" in session["reason"]


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


def _orin_nano_decode(lines: int = 600) -> dict[str, list[tuple[float, float | None]]]:
    """SYNTHETIC, shaped like an Orin Nano 8 GB llama.cpp decode log under jetson_clocks (JetPack 6): six
    cores at exactly 1510 MHz and full load, the GPU at 99 % with no clock printed (JetPack 5/6), the
    hottest zone warming toward 66.9 °C and still rising +2.3 °C/min at the end, PMIC fixed at 50 °C."""
    out: dict[str, list[tuple[float, float | None]]] = {}
    for i in range(lines):
        t = float(i)
        tj = 66.9 - 2.3 / 60.0 * (lines - 1 - i)
        readings = {f"cpu{c}.freq_mhz": 1510.0 for c in range(6)}
        readings |= {f"cpu{c}.util_pct": 100.0 for c in range(6)}
        readings |= {"gpu.util_pct": 99.0, "temp.tj_c": round(tj, 2), "temp.cpu_c": round(tj - 2.0, 2)}
        readings |= {"temp.pmic_c": 50.0}
        for metric, value in readings.items():
            out.setdefault(metric, []).append((t, value))
    return out


def test_a_decode_log_with_its_cpu_held_at_1510_is_not_steady_and_names_the_unseen_gpu_clock() -> None:
    series = _orin_nano_decode()
    roles = roles_for(series, dict.fromkeys(series, "tegrastats"))
    [session] = judge_log(LogInputs(series, roles))["sessions"]
    assert session["verdict"] == "not_steady", session["reason"]  # never inconclusive for a clock it read
    assert session["reason"].startswith("+2.3 °C/min at the end; run longer")
    assert "cpu held at 1510 MHz" in session["reason"] and "hottest 66.9 °C" in session["reason"]
    assert "GPU clock is not in this log" in session["reason"]
    assert session["clocks"]["cpu"]["status"] == "held" and session["clocks_not_observable"] == {}
    # with the trip point known (a board's sysfs, a log that states it) the margin is shown
    trips = {"temp.tj_c": [("passive", 99.0)]}
    inputs = LogInputs(series, roles_for(series, dict.fromkeys(series, "tegrastats")), trip_points=trips)
    [tripped] = judge_log(inputs)["sessions"]
    assert "32.1 °C under its passive trip at 99 °C" in tripped["reason"]
    assert tripped["thermometers"]["temp.tj_c"]["margin_c"] == pytest.approx(32.1)
