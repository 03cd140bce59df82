"""The comparison figure: bars per model/quant, grouped by ctx and ngl (and any other parameter that varies),
one panel per metric, min–max whiskers where the rows have them; failed configs are marked, absent metrics
say so."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.patches import Patch

from edgeprof.report.figures.canvas import (
    COLORS,
    THROTTLED_COLOR,
    finite,
    message_png,
    new_figure,
    not_measured,
    save,
    series_name,
    stacked_panels,
)

Row = Mapping[str, Any]

# (median field, min field, max field, title) of each comparison panel; None: no whisker for that metric.
COMPARISON_PANELS: tuple[tuple[str, str | None, str | None, str], ...] = (
    ("tg_tps_median", "tg_tps_min", "tg_tps_max", "decode tokens/s (median, min–max)"),
    ("pp_tps_median", "pp_tps_min", "pp_tps_max", "prefill tokens/s (median, min–max)"),
    ("ttft_ms_p50", None, None, "TTFT p50 (ms)"),
    ("peak_rss_mb", None, None, "peak RSS (MiB)"),
    ("decode_j_per_token_median", None, None, "decode energy (J/token)"),
)
# Params besides ctx/ngl that go into a group's label when they vary across the rows.
_EXTRA_GROUP_KEYS = ("threads", "n_batch", "n_ubatch", "flash_attn", "type_k", "type_v", "workload")


@dataclass
class Layout:
    """Groups (x positions) and series (bars within a group) of the rows, and the row of each slot."""

    extra: list[str]
    groups: list[tuple[Any, ...]] = field(default_factory=list)
    series: list[str] = field(default_factory=list)
    cell: dict[tuple[tuple[Any, ...], str], Row] = field(default_factory=dict)

    @classmethod
    def of(cls, rows: Sequence[Row]) -> Layout:
        layout = cls([k for k in _EXTRA_GROUP_KEYS if len({repr(r.get(k)) for r in rows}) > 1])
        for row in rows:
            key, name = layout.key(row), series_name(row)
            if key not in layout.groups:
                layout.groups.append(key)
            if name not in layout.series:
                layout.series.append(name)
            layout.cell[(key, name)] = row  # a config redone later in the list replaces the earlier one
        return layout

    def key(self, row: Row) -> tuple[Any, ...]:
        return (row.get("ctx"), row.get("ngl"), *(row.get(k) for k in self.extra))

    def label(self, key: tuple[Any, ...]) -> str:
        parts = [f"ctx {key[0]}", f"ngl {key[1]}"]
        parts += [f"{name} {value}" for name, value in zip(self.extra, key[2:], strict=True)]
        return "\n".join(parts)

    @property
    def width(self) -> float:
        return 0.8 / len(self.series)


@dataclass
class Bars:
    xs: list[float] = field(default_factory=list)
    heights: list[float] = field(default_factory=list)
    err_lo: list[float] = field(default_factory=list)
    err_hi: list[float] = field(default_factory=list)
    failed: list[float] = field(default_factory=list)  # slots of configs that failed without a value


def _bars(layout: Layout, si: int, name: str, panel: tuple[str, str | None, str | None, str]) -> Bars:
    """One series' bars of one panel."""
    value_field, lo_field, hi_field, _title = panel
    bars = Bars()
    n_series = len(layout.series)
    for gi, key in enumerate(layout.groups):
        row = layout.cell.get((key, name))
        if row is None:
            continue
        x = gi + (si - (n_series - 1) / 2.0) * layout.width
        value = finite(row.get(value_field))
        if row.get("status") not in (None, "ok") and value is None:
            bars.failed.append(x)
            continue
        if value is None:
            continue
        lo = finite(row.get(lo_field)) if lo_field else None
        hi = finite(row.get(hi_field)) if hi_field else None
        bars.xs.append(x)
        bars.heights.append(value)
        bars.err_lo.append(max(value - lo, 0.0) if lo is not None else 0.0)
        bars.err_hi.append(max(hi - value, 0.0) if hi is not None else 0.0)
    return bars


def _draw_panel(ax: Axes, layout: Layout, panel: tuple[str, str | None, str | None, str]) -> None:
    ax.set_title(panel[3], fontsize=10, loc="left")
    drawn = 0
    top = 0.0
    failed_slots: list[float] = []
    for si, name in enumerate(layout.series):
        bars = _bars(layout, si, name, panel)
        failed_slots += bars.failed
        if not bars.xs:
            continue
        top = max([top, *(h + e for h, e in zip(bars.heights, bars.err_hi, strict=True))])
        has_err = any(bars.err_lo) or any(bars.err_hi)
        ax.bar(
            bars.xs,
            bars.heights,
            width=layout.width * 0.92,
            color=COLORS[si % len(COLORS)],
            label=name,
            yerr=[bars.err_lo, bars.err_hi] if has_err else None,
            capsize=3 if has_err else 0,
            error_kw={"elinewidth": 0.9, "ecolor": "#212121"},
        )
        drawn += len(bars.xs)
    for x in failed_slots:
        ax.text(x, 0.02, "failed", transform=ax.get_xaxis_transform(), rotation=90, ha="center", va="bottom",
                fontsize=7, color=THROTTLED_COLOR)  # fmt: skip
    if drawn == 0:
        not_measured(ax)
    else:
        ax.set_ylim(0, top * 1.12 if top > 0 else 1.0)
        ax.grid(True, axis="y", alpha=0.3)


def comparison_png(rows: Sequence[Row], out: Path) -> Path:
    """Bars per model/quant, grouped by ctx and ngl (and any other param that varies), one panel per
    metric, min–max whiskers where the rows have them; failed configs are marked, absent metrics say so."""
    out = Path(out)
    if not rows:
        return message_png(out, "no configs to compare")
    layout = Layout.of(rows)
    n_groups, n_series = len(layout.groups), len(layout.series)
    fig_w = min(max(9.0, 1.0 + n_groups * (0.5 + 0.35 * n_series)), 40.0)
    legend_rows = math.ceil(n_series / 4)
    fig = new_figure(fig_w, 3.0 * len(COMPARISON_PANELS) + 1.0 + 0.3 * legend_rows)
    axes, strip = stacked_panels(fig, len(COMPARISON_PANELS), legend_height=0.3 * legend_rows + 0.2)
    fig.suptitle(f"{len(rows)} config(s): {n_series} model(s) × {n_groups} group(s)", fontsize=13)
    for ax, panel in zip(axes, COMPARISON_PANELS, strict=True):
        _draw_panel(ax, layout, panel)
    axes[-1].set_xticks(range(n_groups))
    axes[-1].set_xticklabels([layout.label(k) for k in layout.groups], fontsize=8)
    axes[-1].set_xlim(-0.6, n_groups - 0.4)
    handles = [Patch(facecolor=COLORS[i % len(COLORS)], label=name) for i, name in enumerate(layout.series)]
    strip.legend(handles=handles, loc="center", ncol=min(n_series, 4), fontsize=8, frameon=False)
    return save(fig, out)
