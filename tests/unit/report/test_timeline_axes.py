"""The timeline's value axes (agent/report/figures/timeline.py): a change under 2 % of a value never fills
a panel. SYNTHETIC points."""

from __future__ import annotations

from edgeprof.report.figures.canvas import new_figure
from edgeprof.report.figures.timeline import MIN_AXIS_SPAN_FRACTION, keep_in_proportion


def _span_after(values: list[float]) -> float:
    fig = new_figure(4, 3)
    ax = fig.add_subplot()
    ax.plot(range(len(values)), values)
    keep_in_proportion(ax)
    lo, hi = ax.get_ylim()
    return hi - lo


def test_a_clock_jittering_by_one_mhz_is_drawn_flat() -> None:
    span = _span_after([1189.0, 1190.0] * 20)  # the Orin capture's CPU clock
    assert span >= MIN_AXIS_SPAN_FRACTION * 1190.0
    assert 1.0 / span < 0.02 * 5  # a 1-MHz change fills under a tenth of the panel


def test_a_real_throttle_step_keeps_its_own_axis() -> None:
    assert _span_after([1020.0] * 10 + [612.0] * 10) < 1020.0  # matplotlib's own margins, not widened
    lo_change = _span_after([1000.0, 1000.0 * (1 - MIN_AXIS_SPAN_FRACTION)])
    assert lo_change > 1000.0 * MIN_AXIS_SPAN_FRACTION  # just at the floor: left as drawn


def test_a_pause_longer_than_the_gap_threshold_is_cut_out_of_the_time_axis() -> None:
    from edgeprof.report.figures.timeline import AXIS_GAP_MIN_S, TimeAxis

    first = [float(t) for t in range(200)]
    just_over = [*first, 199.0 + AXIS_GAP_MIN_S + 1.0]
    axis = TimeAxis.over([*just_over, just_over[-1] + 1.0])
    assert len(axis.cuts) == 1
    assert axis.x(just_over[-1]) - axis.x(199.0) < 0.05 * 200  # drawn as a narrow break
    under = TimeAxis.over([*first, 199.0 + AXIS_GAP_MIN_S - 1.0])
    assert under.cuts == ()
    day = TimeAxis.over([*first, *(t + 20 * 3600.0 for t in first)])
    assert day.unit == "s" and day.x(20 * 3600.0 + 199.0) < 500  # two 200-s sessions side by side
