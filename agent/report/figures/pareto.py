"""Speed against quality: steady tg t/s vs mean KLD per variant, one panel per ctx, Pareto front marked.

A variant is on the front when no other is both at least as fast and at least as close to the reference
(and strictly better in one). The quality budget's KLD limit is drawn, so the recommendation can be read
off the chart: the highest front point left of the line. KLD 0 (the reference) sits on a symmetric-log
axis, linear below 1e-4, so it is drawn rather than dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from edgeprof.plan import QualityBudget
from edgeprof.report.figures.canvas import message_png, new_figure, save, series_name


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


def speed_vs_kld_png(
    rows: Sequence[Mapping[str, Any]], out: Path, budget: QualityBudget | None = None
) -> Path:
    out = Path(out)
    budget = budget or QualityBudget()
    by_ctx = _points(rows)
    if not by_ctx:
        return message_png(out, 'no variant has both speed and KLD (add a kind = "quality" workload)')
    ctxs = sorted(by_ctx)
    fig = new_figure(max(8.0, 5.5 * len(ctxs) + 1.0), 4.8)
    fig.suptitle(
        "tg t/s (steady median, min–max) vs mean KLD to the reference; filled: Pareto front", fontsize=10
    )
    multi = len({(r["ngl"], r["workload"]) for r in rows if r.get("tg_tps_median") is not None}) > 1
    for n, ctx in enumerate(ctxs):
        ax = fig.add_subplot(1, len(ctxs), n + 1)
        pts = by_ctx[ctx]
        xy = [(float(r["kld_mean"]), float(r["tg_tps_median"])) for r in pts]
        front = set(pareto_front(xy))
        for i, (row, (k, t)) in enumerate(zip(pts, xy, strict=True)):
            lo, hi = row.get("tg_tps_min"), row.get("tg_tps_max")
            yerr = [[t - lo], [hi - t]] if lo is not None and hi is not None else None
            on = i in front
            ax.errorbar(
                [k],
                [t],
                yerr=yerr,
                fmt="o",
                markersize=8 if on else 6,
                markerfacecolor="C0" if on else "white",
                markeredgecolor="C0",
                ecolor="#777777",
                capsize=3,
            )
            name = series_name(row) + (f"\nngl {row['ngl']} {row['workload']}" if multi else "")
            ax.annotate(name, (k, t), textcoords="offset points", xytext=(6, 4), fontsize=7)
        order = sorted(front, key=lambda i: xy[i][0])
        ax.plot([xy[i][0] for i in order], [xy[i][1] for i in order], "-", color="C0", alpha=0.5)
        ax.axvline(budget.kld_mean, color="C3", linestyle="--", linewidth=1)
        ax.text(budget.kld_mean, 0.02, f" KLD budget {budget.kld_mean:g}", color="C3", fontsize=7,
                transform=ax.get_xaxis_transform())
        ax.set_xscale("symlog", linthresh=1e-4)
        # room right of the last point for its label
        ax.set_xlim(left=0, right=max(max(k for k, _ in xy), budget.kld_mean) * 4)
        ax.set_xlabel("mean KLD (symlog)")
        ax.set_ylabel("tg t/s")
        ax.set_title(f"ctx {ctx}", fontsize=10, loc="left")
        ax.grid(True, alpha=0.3)
    return save(fig, out)
