"""The HTML report's soak chart (agent/report/figures/soak.py) draws from plain window dicts."""

from __future__ import annotations

from pathlib import Path

from edgeprof.report.figures.soak import soak_png


def _windows(n: int, temps: bool) -> list[dict[str, float | None]]:
    # synthetic: 10-s windows, speed falls by a fifth after the sixth window as the zone nears 80 °C
    return [
        {
            "t_mid_s": 10.0 * i + 5.0,
            "tg_tps": 100.0 if i < 6 else 80.0,
            "temp_max_c": (50.0 + 5.0 * i) if temps else None,
            "cpu_mhz": (1500.0 if i < 6 else 1200.0) if temps else None,
            "gpu_mhz": None,
        }
        for i in range(n)
    ]


def test_the_soak_chart_is_a_png_with_and_without_temperatures(tmp_path: Path) -> None:
    soaks = [
        {
            "label": "q4 ctx 512",
            "verdict": "throttled",
            "burst_tps": 100.0,
            "first_throttle_s": 60.0,
            "first_throttle_what": "cpu clock cap 1500 -> 1200 MHz",
            "windows": _windows(12, True),
        },
        {
            "label": "q8 ctx 512",
            "verdict": "not_steady",
            "burst_tps": 90.0,
            "first_throttle_s": None,
            "first_throttle_what": None,
            "windows": _windows(12, False),
        },
    ]
    out = soak_png(soaks, tmp_path / "soak.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    empty = soak_png([], tmp_path / "none.png")
    assert empty.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_other_processes_work_is_drawn_on_its_own_axis_where_there_was_some() -> None:
    from edgeprof.report.figures.canvas import new_figure
    from edgeprof.report.figures.soak import draw_contention

    windows = [{"t_mid_s": 10.0 * i, "other_cores": 1.0 if i >= 3 else 0.0} for i in range(6)]
    ax = new_figure(6, 3).add_subplot()
    assert [h.get_label() for h in draw_contention(ax, windows)] == ["other processes (cores)"]
    quiet = [{**w, "other_cores": 0.0} for w in windows]
    assert draw_contention(new_figure(6, 3).add_subplot(), quiet) == []
