"""PNG figures for the HTML report: the sweep's timeline, the configs compared, tg and TTFT against depth,
speed against KLD, and the serving curves. Importing this package loads matplotlib: the HTML report
imports it only when it draws."""

from edgeprof.report.figures.canvas import plain_text
from edgeprof.report.figures.comparison import COMPARISON_PANELS, comparison_png
from edgeprof.report.figures.depth import depth_png
from edgeprof.report.figures.pareto import (
    has_speed_vs_kld,
    outside_budget,
    pareto_front,
    speed_vs_kld_figure,
    speed_vs_kld_png,
)
from edgeprof.report.figures.serving import has_serving_curves, serving_png, serving_series
from edgeprof.report.figures.soak import soak_png
from edgeprof.report.figures.timeline import (
    MAX_LINES,
    MAX_PLOT_POINTS,
    load_samples,
    plot_lines,
    timeline_figure,
    timeline_panels,
    timeline_png,
)

__all__ = [
    "COMPARISON_PANELS",
    "MAX_LINES",
    "MAX_PLOT_POINTS",
    "comparison_png",
    "depth_png",
    "has_serving_curves",
    "has_speed_vs_kld",
    "load_samples",
    "outside_budget",
    "pareto_front",
    "plain_text",
    "plot_lines",
    "serving_png",
    "serving_series",
    "soak_png",
    "speed_vs_kld_figure",
    "speed_vs_kld_png",
    "timeline_figure",
    "timeline_panels",
    "timeline_png",
]
