"""The terminal's one-line picture of a soak (agent/report/render/soak.py)."""

from __future__ import annotations

from edgeprof.report.render.soak import BLOCKS, sparkline


def test_a_flat_series_is_flat_and_noise_stays_flat() -> None:
    assert sparkline([100.0] * 5) == "█" * 5
    # 3 % of wobble is less than one step (1/16 of the best)
    assert set(sparkline([100.0, 97.0, 99.0, 98.5])) <= {"█", "▇"}


def test_a_throttle_drop_steps_down_in_proportion() -> None:
    line = sparkline([100.0, 100.0, 80.0, 80.0, 50.0, 20.0])
    assert line[0] == "█" and line[1] == "█"
    # 80 % of the best: (0.8 - 0.5) / 0.5 = 0.6 of the way up: the fifth block
    assert line[2] == BLOCKS[4]
    # at or below the floor: the lowest block, never a blank (a blank is "not measured")
    assert line[4] == BLOCKS[0] and line[5] == BLOCKS[0]


def test_unmeasured_windows_are_blanks() -> None:
    assert sparkline([100.0, None, 100.0]) == "█ █"
    assert sparkline([None, None]) == "  "
    assert sparkline([]) == ""


def test_a_long_soak_is_pooled_to_the_width_by_medians() -> None:
    values: list[float | None] = [100.0] * 60 + [60.0] * 60
    values[5] = 1.0  # one outlier window does not set a character
    line = sparkline(values, width=12)
    assert len(line) == 12
    assert line[:6] == "█" * 6 and set(line[6:]) == {BLOCKS[1]}
