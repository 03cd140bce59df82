"""The live line of a soak: its elapsed / total time, the last window's decode speed and the temperature
where the telemetry has a sensor (synthetic events, no child)."""

from __future__ import annotations

import io

from edgeprof.sweep.progress import Progress


def test_the_soak_line_shows_time_speed_and_temperature() -> None:
    progress = Progress(total=1, out=io.StringIO())
    progress.start(1, "q8 soak")
    progress.event({"event": "soak_start", "t": 100.0, "duration_s": 600.0, "window_s": 10.0})
    assert progress.soak_text({"t_end": 130.0, "tg_tps": 41.23}) == "soak 0:30 / 10:00 · tg 41.2 t/s"
    progress.read_temp = lambda: 55.04
    progress.event({"event": "soak_window", "index": 2, "t_end": 130.0, "tg_tps": 41.23})
    assert progress.soak_text({"t_end": 500.0, "tg_tps": None}) == "soak 6:40 / 10:00 · 55.0 °C"


def test_without_a_sensor_or_a_speed_the_line_says_only_the_time() -> None:
    progress = Progress(total=1, out=io.StringIO())
    progress.event({"event": "soak_start", "t": 0.0, "duration_s": 3.0})
    progress.read_temp = lambda: None
    assert progress.soak_text({"t_end": 1.5, "tg_tps": None}) == "soak 0:02 / 0:03"


def test_off_a_terminal_a_soak_prints_a_line_a_minute() -> None:
    out = io.StringIO()
    progress = Progress(total=1, out=out)
    assert not progress.tty
    progress.start(1, "q8 soak")
    progress.event({"event": "soak_start", "t": 0.0, "duration_s": 300.0, "window_s": 10.0})
    progress.read_temp = lambda: None
    for i in range(30):
        progress.event({"event": "soak_window", "index": i, "t_end": 10.0 * (i + 1), "tg_tps": 40.0})
    lines = [x for x in out.getvalue().splitlines() if "]   soak " in x]
    # the soak's start, then one line at each minute of soak time: 1:00 ... 5:00
    assert [x.split("soak ", 1)[1].split(" /")[0] for x in lines] == [
        "0:00",
        "1:00",
        "2:00",
        "3:00",
        "4:00",
        "5:00",
    ]
