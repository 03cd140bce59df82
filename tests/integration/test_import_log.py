"""``edgeprof import-log`` / ``import-tegrastats`` and ``analyse`` of an imported log, as a user runs them: a
fresh process per command. Real logs from tests/fixtures/captures/tegrastats-logs (sources in its
SOURCES.md); SYNTHETIC ones from tests/support/synthetic_logs.py."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.paths import CAPTURES
from support.synthetic_logs import Board, jtop_csv, nvidia_smi_csv, tegrastats_log

LOGS = CAPTURES / "tegrastats-logs"
ORIN = LOGS / "orin-nano-class_jp5.1_stress-gpuburn_105s.log"
TX2 = LOGS / "tx2_jp4_light-load_2660lines.log"
SESSION_FIELDS = {"start", "end", "lines", "verdict", "reason", "hottest_zone", "hottest_max_c"}
SESSION_FIELDS |= {"excluded_zones", "clocks"}


def edgeprof(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ) | {"EDGEPROF_DB": str(tmp_path / "cli.db"), "XDG_DATA_HOME": str(tmp_path / "x")}
    return subprocess.run(
        [sys.executable, "-m", "edgeprof", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )


def analysed(tmp_path: Path, sweep: int, *extra: str) -> dict[str, Any]:
    result = edgeprof(tmp_path, "analyse", "--db", "t.db", "--sweep", str(sweep), "--format", "json", *extra)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def sweeps(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("select count(*) from sweep").fetchone()[0])


def test_an_imported_real_log_is_analysed_per_session_with_every_field(tmp_path: Path) -> None:
    imported = edgeprof(tmp_path, "import-tegrastats", str(ORIN), "--db", "t.db")
    assert imported.returncode == 0, imported.stderr
    assert "verdict (session 1: 2025-10-01 20:05:55 .. 2025-10-01 20:07:40, 103 lines" in imported.stdout
    summary = edgeprof(tmp_path, "import-tegrastats", str(ORIN)).stdout
    assert "pmic 50 (no thermometer: a fixed value)" in summary and "hottest temp.gpu_c 53 °C" in summary
    result = analysed(tmp_path, 1)
    [session] = result["sessions"]
    assert set(session) >= SESSION_FIELDS
    # still heating at its end; the CPU clock flat at 1189-1190 MHz held (no maximum in the log to be under)
    assert session["verdict"] == "not_steady" and session["hottest_zone"] == "temp.gpu_c"
    assert session["hottest_max_c"] == 53.0 and "temp.pmic_c" in session["excluded_zones"]
    assert session["clocks"]["cpu"]["max_mhz"] == 1190.0 and session["clocks"]["cpu"]["status"] == "held"
    table = edgeprof(tmp_path, "analyse", "--db", "t.db", "--sweep", "1")
    assert "not_steady" in table.stdout and "excluded: pmic" in table.stdout


def test_the_same_file_again_is_already_imported_and_nothing_is_stored(tmp_path: Path) -> None:
    assert edgeprof(tmp_path, "import-log", str(TX2), "--db", "t.db").returncode == 0
    again = edgeprof(tmp_path, "import-log", str(TX2), "--db", "t.db")
    assert again.returncode == 0 and "already imported as sweep 1" in again.stdout + again.stderr
    assert sweeps(tmp_path / "t.db") == 1


def test_spacing_assumed_and_stated(tmp_path: Path) -> None:
    assert edgeprof(tmp_path, "import-log", str(TX2), "--db", "t.db").returncode == 0
    assumed = analysed(tmp_path, 1)
    assert assumed["spacing_assumed"] and assumed["sessions"][0]["duration_s"] == 2659.0
    stated = analysed(tmp_path, 1, "--interval-ms", "500")
    assert not stated["spacing_assumed"] and stated["sessions"][0]["duration_s"] == 1329.5


@pytest.mark.parametrize("writer", [tegrastats_log, nvidia_smi_csv])
def test_synthetic_throttled_logs_are_throttled_at_the_trip_naming_the_clock(
    tmp_path: Path, writer: Any
) -> None:
    board = Board()
    trip_t = board.trip_t()
    assert trip_t is not None
    log = writer(tmp_path / "synthetic.log", board)
    imported = edgeprof(tmp_path, "import-log", str(log), "--db", "t.db")
    assert imported.returncode == 0, imported.stderr
    assert "throttled: " in imported.stdout and "gpu clock 1020 -> 612 MHz" in imported.stdout
    [session] = analysed(tmp_path, 1)["sessions"]
    assert session["verdict"] == "throttled"
    assert abs(session["clocks"]["gpu"]["drop"]["t_s"] - trip_t) <= board.interval_s
    if writer is nvidia_smi_csv:  # the reason the log itself gives
        assert "SwThermalSlowdown" in session["reason"]


def test_nvidia_smi_with_the_older_throttle_reason_names(tmp_path: Path) -> None:
    log = nvidia_smi_csv(tmp_path / "old.csv", Board(), old_names=True)
    out = edgeprof(tmp_path, "import-log", str(log))
    assert out.returncode == 0 and "SwThermalSlowdown" in out.stdout


def test_a_jtop_csv_says_it_holds_no_clock(tmp_path: Path) -> None:
    log = jtop_csv(tmp_path / "jtop.csv", Board())
    out = edgeprof(tmp_path, "import-log", str(log), "--db", "t.db")
    assert out.returncode == 0, out.stderr
    [session] = analysed(tmp_path, 1)["sessions"]
    assert session["verdict"] == "inconclusive" and "no CPU or GPU clock" in session["reason"]
    assert session["hottest_zone"] == "temp.tj_c" and "temp.pmic_c" in session["excluded_zones"]
    assert session["power"]["budget_mw"] == 15000.0  # its power mode "15W"


def test_a_file_of_no_known_format_is_one_line_exit_2_and_nothing_stored(tmp_path: Path) -> None:
    other = tmp_path / "notes.csv"
    other.write_text("name,value\nfoo,1\n")
    out = edgeprof(tmp_path, "import-log", str(other), "--db", "t.db")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    first = out.stderr.splitlines()[0]
    assert first.startswith("edgeprof: error:") and "expected a tegrastats log" in first
    assert not (tmp_path / "t.db").exists() or sweeps(tmp_path / "t.db") == 0


def test_two_boards_are_never_merged_and_a_device_can_be_named(tmp_path: Path) -> None:
    a = tegrastats_log(tmp_path / "a.log", Board(lines=50))
    b_text = a.read_text().replace("RAM 3000/7620MB", "RAM 3000/7607MB")
    (tmp_path / "b.log").write_text(b_text)
    assert edgeprof(tmp_path, "import-log", str(a), "--db", "t.db").returncode == 0
    named = edgeprof(tmp_path, "import-log", str(tmp_path / "b.log"), "--db", "t.db", "--device-name", "rig1")
    assert named.returncode == 0, named.stderr
    with sqlite3.connect(tmp_path / "t.db") as conn:
        rows = conn.execute("select hostname, ram_total_mb, board_model from device order by id").fetchall()
    assert [r[0] for r in rows] == ["imported", "rig1"] and [r[1] for r in rows] == [7620, 7607]
    assert "RAM 7607 MB" in rows[1][2] and "6 cores (2 off)" in rows[1][2]


def test_report_of_an_imported_log_in_every_format(tmp_path: Path) -> None:
    assert edgeprof(tmp_path, "import-log", str(ORIN), "--db", "t.db").returncode == 0
    text = edgeprof(tmp_path, "report", "--db", "t.db")
    assert "not_steady" in text.stdout and "excluded: pmic" in text.stdout
    assert "hottest: gpu 53 °C" in text.stdout
    md = edgeprof(tmp_path, "report", "--db", "t.db", "--format", "md").stdout
    assert "| 1 | 2025-10-01 20:05:55 | 2025-10-01 20:07:40 | 103 | not_steady |" in md
    as_json = json.loads(edgeprof(tmp_path, "report", "--db", "t.db", "--format", "json").stdout)
    assert as_json["sessions"][0]["hottest_zone"] == "temp.gpu_c"
    html = edgeprof(tmp_path, "report", "--db", "t.db", "--html", "r.html")
    assert html.returncode == 0, html.stderr
    page = (tmp_path / "r.html").read_text()
    assert "Log verdict" in page and "No verdicts stored" not in page and "PMIC zone" in page
    # a log has sessions, not configs: no empty configs table or comparison, the verdict before the figures
    assert "<h2>Configs</h2>" not in page and "Configs compared" not in page
    assert "throttle verdicts" not in page
    assert "log sessions" in page and page.index("Log verdict") < page.index("<h2>Figures</h2>")


def test_a_log_without_timestamps_is_dated_by_its_last_write_not_the_import(tmp_path: Path) -> None:
    log = tmp_path / "old.log"
    log.write_bytes(TX2.read_bytes())
    os.utime(log, (1_600_000_000, 1_600_000_000))  # 2020-09-13
    assert edgeprof(tmp_path, "import-tegrastats", str(log), "--db", "t.db").returncode == 0
    with sqlite3.connect(tmp_path / "t.db") as conn:
        started = conn.execute("select started_at from sweep").fetchone()[0]
    assert str(started).startswith("2020-09-13")


def test_the_timeline_of_a_throttled_log_marks_the_drop(tmp_path: Path) -> None:
    from edgeprof.report.figures.timeline import timeline_figure
    from edgeprof.storage.db import new_session, open_engine

    log = tegrastats_log(tmp_path / "throttled.log", Board())
    assert edgeprof(tmp_path, "import-log", str(log), "--db", "t.db").returncode == 0
    with new_session(open_engine(tmp_path / "t.db")) as s:
        figure = timeline_figure(s, 1)
    assert not isinstance(figure, str)
    texts = [t.get_text() for ax in figure.axes for t in ax.texts]
    assert any(t.startswith(" throttled: gpu 1020 -> 612 MHz") for t in texts), texts


BOARD_LOGS = CAPTURES / "throttling-logs"
PI4 = BOARD_LOGS / "rpi4-2000mhz_vcgencmd-csv_720s.csv"
PI3B = BOARD_LOGS / "rpi3b_sbc-bench_fake-real-clock_25min.txt"
STRESSBERRY = BOARD_LOGS / "rpi3b_stressberry_temperature-only_600s.dat"


def imported_page(tmp_path: Path, log: Path, *extra: str) -> tuple[dict[str, Any], str]:
    """Import a real board log, then its ``analyse --format json`` session and its HTML report."""
    imported = edgeprof(tmp_path, "import-log", str(log), "--db", "t.db", *extra)
    assert imported.returncode == 0, imported.stderr
    [session] = analysed(tmp_path, 1)["sessions"]
    html = edgeprof(tmp_path, "report", "--db", "t.db", "--html", "r.html")
    assert html.returncode == 0, html.stderr
    return session, (tmp_path / "r.html").read_text()


def test_the_pi4_vcgencmd_csv_is_throttled_at_its_flag_and_clock_drop(tmp_path: Path) -> None:
    session, page = imported_page(tmp_path, PI4)
    assert session["verdict"] == "throttled", session["reason"]
    assert "(+398 s)" in session["reason"] and "log.throttle_flag" in session["reason"]
    drop = session["clocks"]["cpu"]["drop"]
    assert abs(drop["t_s"] - 413.0) <= 1.0 and (drop["from_mhz"], drop["lowest_mhz"]) == (2000.0, 1333.0)
    assert 80.0 <= drop["temp_c"] <= 82.0 and session["hottest_max_c"] == 82.0
    assert "throttled" in page and "cpu clock 2000 -&gt; 1333 MHz" in page and "(+413 s)" in page


def test_a_stated_column_map_imports_the_same_log(tmp_path: Path) -> None:
    session, _page = imported_page(tmp_path, PI4, "--columns", "time=sec,temp=tmp,clock=clk,throttle=thr")
    assert session["verdict"] == "throttled" and session["clocks"]["cpu"]["drop"]["t_s"] == 413.0


def test_the_pi3b_sbc_bench_result_names_the_firmware_clock_and_the_cpufreq_figure(tmp_path: Path) -> None:
    session, page = imported_page(tmp_path, PI3B)
    assert session["verdict"] == "throttled", session["reason"]
    assert "1200 -> 657 MHz" in session["reason"] and "rpi.arm_clock_mhz" in session["reason"]
    assert "cpufreq.policy0.cur_mhz read 1200 MHz" in session["reason"]
    assert "1200 -&gt; 657 MHz" in page and "not the clock that ran" in page
    with sqlite3.connect(tmp_path / "t.db") as conn:
        board, kernel = conn.execute("select board_model, kernel from device").fetchone()
    assert "Raspberry Pi 3 Model B Rev 1.2" in board and kernel == "5.15.74-v8+"


def test_the_stressberry_file_is_inconclusive_naming_its_missing_clock_and_plateau(tmp_path: Path) -> None:
    session, page = imported_page(tmp_path, STRESSBERRY)
    assert session["verdict"] == "inconclusive", session["reason"]
    assert "no CPU or GPU clock in this log" in session["reason"] and "80.6–81.7 °C" in session["reason"]
    assert "inconclusive" in page and "80.6–81.7 °C" in page


def test_a_stated_map_naming_a_missing_column_is_one_line_and_stores_nothing(tmp_path: Path) -> None:
    out = edgeprof(tmp_path, "import-log", str(PI4), "--db", "t.db", "--columns", "time=sec,temp=celsius")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith("edgeprof: error:") and "no column celsius" in out.stderr
    assert not (tmp_path / "t.db").exists() or sweeps(tmp_path / "t.db") == 0
