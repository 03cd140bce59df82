"""What every figure of the report shares: a headless canvas, stacked panels with the legend below them,
the "not measured" panel, a figure that only says why there is nothing to draw, and saving as PNG.

Drawn with matplotlib's object API on an Agg canvas (no pyplot, no global backend switch, no display), so
figures work headless, from threads, and inside a test run.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Annotation, Text

from edgeprof.safetext import safe_lines

NOT_MEASURED = "not measured"
THROTTLED_COLOR = "#d32f2f"
SLOWDOWN_COLOR = "#f57c00"
COLORS = [f"C{i}" for i in range(10)]


@contextlib.contextmanager
def plain_text() -> Iterator[None]:
    """Every text drawn inside is shown as written: matplotlib would read a label with two ``$`` as math
    (``cost $5 or $6`` loses its dollars, ``a$\\frac$b`` fails the whole figure). No figure draws math."""
    # text.parse_math exists from matplotlib 3.5 on; older ones have no switch, and parse as before
    plain: dict[Any, Any] = {"text.parse_math": False} if "text.parse_math" in matplotlib.rcParams else {}
    with matplotlib.rc_context(plain):
        yield


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def power_label(value: float, _pos: Any = None) -> str:
    """A log axis's tick as text that needs no math parsing (``plain_text`` turns it off, and matplotlib's
    own log labels are mathtext: they would print as ``$\\mathdefault{10^{-1}}$``): '10⁻¹', '−10²', '0';
    '' between the powers of ten."""
    if value == 0:
        return "0"
    exponent = math.log10(abs(value))
    if not math.isclose(exponent, round(exponent), abs_tol=1e-9):
        return ""
    sign = "−" if value < 0 else ""
    return f"{sign}10{str(round(exponent)).translate(_SUPERSCRIPT)}"


def plain_log_ticks(axis: Any) -> None:
    """Label a log or symlog ``axis`` (``ax.xaxis``) with ``power_label``: its ticks read as numbers."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis.set_major_formatter(FuncFormatter(power_label))
    axis.set_minor_formatter(NullFormatter())


def new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=100, constrained_layout=True)
    FigureCanvasAgg(fig)
    return fig


def stacked_panels(fig: Figure, n: int, legend_height: float, height: float = 3.0) -> tuple[list[Axes], Axes]:
    """``n`` stacked panels sharing x (tick labels on the bottom one only) and, below them, an empty strip
    for the figure's legend, so the legend never covers the x tick labels (works on matplotlib 3.5)."""
    grid = fig.add_gridspec(n + 1, 1, height_ratios=[height] * n + [legend_height])
    axes: list[Axes] = []
    for i in range(n):
        ax = fig.add_subplot(grid[i, 0], sharex=axes[0] if axes else None)
        if i < n - 1:
            ax.tick_params(labelbottom=False)
        axes.append(ax)
    strip = fig.add_subplot(grid[n, 0])
    strip.axis("off")
    return axes, strip


def save(fig: Figure, out: Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Every text of the figure (titles, labels, legends, notes: names from the database among them) with
    # its control characters as the escapes every other reader shows; a font has no glyph for them.
    for text in fig.findobj(Text):
        text.set_text(safe_lines(text.get_text()))
    spread_point_labels(fig)
    fig.savefig(out, format="png")
    return out


POINT_LABEL = "edgeprof-point-label"  # the gid of a label drawn beside a data point (``point_label``)
LABEL_GAP_PX = 2.0


def point_label(ax: Axes, text: str, xy: tuple[float, float], fontsize: float = 7) -> Annotation:
    """A label beside a data point, up and right of it; ``save`` moves labels that would overlap apart.
    It takes no part in the layout, so moving it moves nothing else."""
    ann = ax.annotate(text, xy, textcoords="offset points", xytext=(6, 4), fontsize=fontsize, gid=POINT_LABEL)
    ann.set_in_layout(False)
    return ann


def spread_point_labels(fig: Figure) -> None:
    """Point labels that overlap are moved up, the lowest first, each just above the one it hit, until no two
    overlap (labels of nearby points, say three quants of one speed and KLD, would print over each other).
    Measured in pixels once the layout is settled (``savefig`` lays out the figure again, and the labels,
    outside the layout, stay where they were put)."""
    labels = [a for a in fig.findobj(Annotation) if a.get_gid() == POINT_LABEL and a.get_visible()]
    if len(labels) < 2:
        return
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    placed: list[Any] = []
    for ann in sorted(labels, key=lambda a: tuple(a.get_window_extent(renderer).p0[::-1])):
        for _ in range(len(labels)):
            box = ann.get_window_extent(renderer)
            hit = [b for b in placed if box.overlaps(b)]
            if not hit:
                break
            dy_px = max(b.y1 for b in hit) - box.y0 + LABEL_GAP_PX
            x, y = ann.xyann
            ann.xyann = (x, y + dy_px * 72.0 / fig.dpi)
        placed.append(ann.get_window_extent(renderer))


def not_measured(ax: Axes, text: str = NOT_MEASURED) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="#757575", fontsize=11)
    ax.set_yticks([])


def message_png(out: Path, text: str) -> Path:
    """A figure that says why there is nothing to draw (missing data never breaks a report)."""
    fig = new_figure(8, 2)
    ax = fig.add_subplot(1, 1, 1)
    ax.axis("off")
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=12)
    return save(fig, out)


def finite(value: Any) -> float | None:
    """``value`` as a float, None for missing, junk or NaN/inf (never drawn as 0)."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def series_name(row: Mapping[str, Any]) -> str:
    """A row's model as a legend names it: the label, with the quant where the label does not say it."""
    label = str(row.get("model_label") or "?")
    quant = row.get("quant")
    return f"{label} ({quant})" if quant and str(quant).lower() not in label.lower() else label
