"""Speed against quality: steady tg t/s vs mean KLD per variant, one column of panels per ctx, Pareto front
marked, and below each the same-top share vs mean KLD.

A variant is on the front when no other is both at least as fast and at least as close to the reference
(and strictly better in one). Both limits of the quality budget are drawn — the KLD limit as a vertical line
in both panels, the same-top limit as a horizontal line in the lower one — and a variant outside either is
drawn as a red cross, so the recommendation can be read off the chart: the highest front point left of the
KLD line whose same-top point lies above the same-top line. KLD 0 (the reference) sits on a symmetric-log
axis, linear below 1e-4, so it is drawn rather than dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from edgeprof.plan import QualityBudget
from edgeprof.report.figures.canvas import (
    message_png,
    new_figure,
    plain_log_ticks,
    point_label,
    save,
    series_name,
)

BUDGET_COLOR = "C3"
OUTSIDE_COLOR = "#d32f2f"


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the (kld, tps) points no other point dominates (lower-or-equal KLD and higher-or-equal
    speed, one of them strictly), ordered by KLD."""
    front = []
    for i, (k, t) in enumerate(points):
        dominated = any(
            (k2 <= k and t2 >= t) and (k2 < k or t2 > t) for j, (k2, t2) in enumerate(points) if j != i
        )
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: (points[i][0], -points[i][1]))


def _points(rows: Sequence[Mapping[str, Any]]) -> dict[int, list[Mapping[str, Any]]]:
    by_ctx: dict[int, list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("status") != "ok" or row.get("tg_tps_median") is None or row.get("kld_mean") is None:
            continue
        by_ctx.setdefault(int(row["ctx"]), []).append(row)
    return by_ctx


def has_speed_vs_kld(rows: Sequence[Mapping[str, Any]]) -> bool:
    return bool(_points(rows))


def outside_budget(row: Mapping[str, Any], budget: QualityBudget) -> bool:
    """Whether a variant's quality is outside the budget (over the KLD limit or under the same-top one)."""
    top = row.get("same_top_pct")
    return float(row["kld_mean"]) > budget.kld_mean or (top is not None and float(top) < budget.same_top_pct)


def speed_vs_kld_png(
    rows: Sequence[Mapping[str, Any]], out: Path, budget: QualityBudget | None = None
) -> Path:
    fig = speed_vs_kld_figure(rows, budget)
    if fig is None:
        return message_png(Path(out), 'no variant has both speed and KLD (add a kind = "quality" workload)')
    return save(fig, Path(out))


def speed_vs_kld_figure(
    rows: Sequence[Mapping[str, Any]], budget: QualityBudget | None = None
) -> Figure | None:
    """The figure (None where no row has both speed and KLD)."""
    budget = budget or QualityBudget()
    by_ctx = _points(rows)
    if not by_ctx:
        return None
    ctxs = sorted(by_ctx)
    fig = new_figure(max(8.0, 5.5 * len(ctxs) + 1.0), 7.6)
    fig.suptitle(
        "tg t/s (steady median, min–max) and same-top % vs mean KLD to the reference\n"
        "filled: Pareto front; red ×: outside the quality budget (dashed lines)",
        fontsize=10,
    )

    axes = ("ngl", "workload", "depth", "threads")
    varying = [k for k in axes if len({r.get(k) for r in rows if r.get("tg_tps_median") is not None}) > 1]
    grid = fig.add_gridspec(2, len(ctxs), height_ratios=[3.0, 1.6])
    for n, ctx in enumerate(ctxs):
        speed_ax = fig.add_subplot(grid[0, n])
        top_ax = fig.add_subplot(grid[1, n], sharex=speed_ax)
        _speed_panel(speed_ax, by_ctx[ctx], budget, varying)
        _same_top_panel(top_ax, by_ctx[ctx], budget)
        speed_ax.set_title(f"ctx {ctx}", fontsize=10, loc="left")
        speed_ax.tick_params(labelbottom=False)
    return fig


def _speed_panel(
    ax: Axes, pts: Sequence[Mapping[str, Any]], budget: QualityBudget, varying: Sequence[str]
) -> None:
    xy = [(float(r["kld_mean"]), float(r["tg_tps_median"])) for r in pts]
    front = set(pareto_front(xy))
    for i, (row, (k, t)) in enumerate(zip(pts, xy, strict=True)):
        lo, hi = row.get("tg_tps_min"), row.get("tg_tps_max")
        yerr = [[t - lo], [hi - t]] if lo is not None and hi is not None else None
        on, out = i in front, outside_budget(row, budget)
        ax.errorbar(
            [k],
            [t],
            yerr=yerr,
            fmt="X" if out else "o",
            markersize=8 if on else 6,
            markerfacecolor=OUTSIDE_COLOR if out else ("C0" if on else "white"),
            markeredgecolor=OUTSIDE_COLOR if out else "C0",
            ecolor="#777777",
            capsize=3,
        )
        name = series_name(row) + ("\n" + " ".join(f"{k} {row.get(k)}" for k in varying) if varying else "")
        point_label(ax, name, (k, t))
    order = sorted(front, key=lambda i: xy[i][0])
    ax.plot([xy[i][0] for i in order], [xy[i][1] for i in order], "-", color="C0", alpha=0.5)
    _kld_line(ax, budget)
    # room right of the last point for its label
    ax.set_xlim(left=0, right=max(max(k for k, _ in xy), budget.kld_mean) * 4)
    ax.set_ylabel("tg t/s")
    ax.grid(True, alpha=0.3)


def _same_top_panel(ax: Axes, pts: Sequence[Mapping[str, Any]], budget: QualityBudget) -> None:
    shown = [r for r in pts if r.get("same_top_pct") is not None]
    for row in shown:
        out = outside_budget(row, budget)
        ax.plot(
            [float(row["kld_mean"])],
            [float(row["same_top_pct"])],
            "X" if out else "o",
            color=OUTSIDE_COLOR if out else "C0",
            markersize=6,
        )
        if out:  # what the upper panel cannot show: which variant the same-top limit rules out
            point_label(ax, series_name(row), (float(row["kld_mean"]), float(row["same_top_pct"])))
    ax.axhline(budget.same_top_pct, color=BUDGET_COLOR, linestyle="--", linewidth=1)
    ax.text(
        0.01,
        budget.same_top_pct,
        f" same-top budget {budget.same_top_pct:g} %",
        color=BUDGET_COLOR,
        fontsize=7,
        va="bottom",
        transform=ax.get_yaxis_transform(),
    )
    _kld_line(ax, budget)
    low = min([float(r["same_top_pct"]) for r in shown] + [budget.same_top_pct])
    ax.set_ylim(max(0.0, low - 5.0), 101.0)
    if not shown:
        ax.text(
            0.5,
            0.5,
            "same-top not measured",
            transform=ax.transAxes,
            ha="center",
            va="center",
            color="#757575",
            fontsize=9,
        )
    ax.set_xlabel("mean KLD (symlog)")
    ax.set_ylabel("same-top %")
    ax.grid(True, alpha=0.3)


def _kld_line(ax: Axes, budget: QualityBudget) -> None:
    ax.axvline(budget.kld_mean, color=BUDGET_COLOR, linestyle="--", linewidth=1)
    ax.text(
        budget.kld_mean,
        0.02,
        f" KLD budget {budget.kld_mean:g}",
        color=BUDGET_COLOR,
        fontsize=7,
        transform=ax.get_xaxis_transform(),
    )
    ax.set_xscale("symlog", linthresh=1e-4)
    plain_log_ticks(ax.xaxis)
