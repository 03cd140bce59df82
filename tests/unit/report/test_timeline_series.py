"""The telemetry timeline (agent/report/figures/timeline.py) draws every series it is given, with its data."""

from __future__ import annotations

from edgeprof.report.figures import MAX_LINES, plot_lines
from edgeprof.report.figures.canvas import new_figure


def test_the_timeline_draws_every_series_with_its_data() -> None:
    """Mutant: a series dropped from the plot (the PNG's size would hardly change: check the drawn data)."""
    fig = new_figure(6, 3)
    ax = fig.add_subplot(1, 1, 1)
    lines = {f"temp.zone{i}_c": [(0.0, 40.0 + i), (1.0, 41.0 + i), (2.0, 42.0 + i)] for i in range(MAX_LINES)}
    assert plot_lines(ax, lines, t0=0.0, scale_t=1.0) == MAX_LINES
    drawn = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines()}
    assert drawn == {name: [v for _t, v in pts] for name, pts in lines.items()}
