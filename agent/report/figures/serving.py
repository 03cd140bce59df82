"""The serving curves of the HTML report — latency (TTFT, TPOT, E2EL) and throughput (output tok/s,
requests/s) against concurrency, one line per quant / config, the p50 as the line and the p50-p99 range as a
band (nearest-rank percentiles of the stored levels; a level that failed is absent, never zero)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from edgeprof.report.columns import is_serving_runner
from edgeprof.report.figures.canvas import new_figure, save, series_name


def serving_series(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Closed-loop serving rows that measured something, per series (model + quant + ctx + ngl + workload),
    ordered by concurrency."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        if not is_serving_runner(r.get("runner")) or r.get("request_rate") is not None:
            continue
        if r.get("serving_ok") in (None, 0) or r.get("concurrency") is None:
            continue
        name = series_name(r) + f" ctx={r['ctx']} ngl={r['ngl']} {r['workload']}"
        out.setdefault(name, []).append(r)
    for series in out.values():
        series.sort(key=lambda r: int(r["concurrency"]))
    return out


def has_serving_curves(rows: Sequence[Mapping[str, Any]]) -> bool:
    return any(len(s) >= 1 for s in serving_series(rows).values())


def serving_png(rows: Sequence[Mapping[str, Any]], out: Path) -> Path:
    """Five panels against concurrency: TTFT, TPOT, E2EL (p50 line, p50-p99 band), output tok/s, req/s."""
    series = serving_series(rows)
    fig = new_figure(11.0, 8.0)
    axes = fig.subplots(2, 3).flatten()
    panels = (
        ("TTFT ms", "serving_ttft_ms_p50", "serving_ttft_ms_p99"),
        ("TPOT ms (E2EL-TTFT)/(n-1)", "serving_tpot_ms_p50", "serving_tpot_ms_p99"),
        ("E2EL ms", "serving_e2el_ms_p50", "serving_e2el_ms_p99"),
        ("output tok/s (all clients)", "serving_output_tps", None),
        ("requests/s", "serving_request_throughput_rps", None),
        ("goodput requests/s (all SLOs met)", "serving_goodput_rps", None),
    )
    for ax, (title, p50, p99) in zip(axes, panels, strict=True):
        drawn = False
        for name, levels in series.items():
            pts = [
                (int(r["concurrency"]), r[p50], r[p99] if p99 else None) for r in levels if r[p50] is not None
            ]
            if not pts:
                continue
            xs = [p[0] for p in pts]
            (line,) = ax.plot(xs, [p[1] for p in pts], marker="o", label=name)
            if p99 is not None and all(p[2] is not None for p in pts):
                lo, hi = [p[1] for p in pts], [p[2] for p in pts]
                ax.fill_between(xs, lo, hi, alpha=0.2, color=line.get_color())
            drawn = True
        ax.set_title(title + (" — p50, band to p99" if p99 else ""), fontsize=9)
        ax.set_xlabel("concurrency (closed loop)")
        ax.grid(alpha=0.3)
        if not drawn:
            ax.text(0.5, 0.5, "not measured", ha="center", va="center", transform=ax.transAxes)
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=7)  # on a panel: matplotlib 3.5 (JetPack) has no legend "outside" the axes
    return save(fig, out)
