"""PNG figures for the HTML report: the sweep's timeline, the configs compared, tg and TTFT against depth,
speed against KLD, and the serving curves. Importing this package loads matplotlib: the HTML report
imports it only when it draws.

The names below are the ones callers use; each is imported from its module on first use
(``edgeprof.lazy``), so importing the package alone costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgeprof.lazy import lazy_exports

if TYPE_CHECKING:
    from edgeprof.report.figures.canvas import plain_text
    from edgeprof.report.figures.comparison import comparison_png
    from edgeprof.report.figures.depth import depth_png
    from edgeprof.report.figures.pareto import (
        has_speed_vs_kld,
        pareto_front,
        speed_vs_kld_figure,
        speed_vs_kld_png,
    )
    from edgeprof.report.figures.serving import has_serving_curves, serving_png
    from edgeprof.report.figures.soak import soak_png
    from edgeprof.report.figures.timeline import (
        MAX_LINES,
        MAX_PLOT_POINTS,
        load_samples,
        plot_lines,
        timeline_figure,
        timeline_png,
    )

# module of this package -> the public names it defines, imported on first use
_HOMES: dict[str, tuple[str, ...]] = {
    "canvas": ("plain_text",),
    "comparison": ("comparison_png",),
    "depth": ("depth_png",),
    "pareto": ("has_speed_vs_kld", "pareto_front", "speed_vs_kld_figure", "speed_vs_kld_png"),
    "serving": ("has_serving_curves", "serving_png"),
    "soak": ("soak_png",),
    "timeline": (
        "MAX_LINES",
        "MAX_PLOT_POINTS",
        "load_samples",
        "plot_lines",
        "timeline_figure",
        "timeline_png",
    ),
}

__all__ = [
    "MAX_LINES",
    "MAX_PLOT_POINTS",
    "comparison_png",
    "depth_png",
    "has_serving_curves",
    "has_speed_vs_kld",
    "load_samples",
    "pareto_front",
    "plain_text",
    "plot_lines",
    "serving_png",
    "soak_png",
    "speed_vs_kld_figure",
    "speed_vs_kld_png",
    "timeline_figure",
    "timeline_png",
]

__getattr__ = lazy_exports(__name__, _HOMES)
