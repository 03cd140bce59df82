"""The depth figure: tg t/s and TTFT against context depth (llama-bench -d), one line per quant: how much
slower decoding gets as the KV cache fills."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from edgeprof.report.figures.canvas import message_png, new_figure, not_measured, save
from edgeprof.report.workload import depth_curves


def depth_png(rows: Sequence[Mapping[str, Any]], out: Path) -> Path:
    """Two panels sharing the depth axis: tg t/s (median, min–max bar) and TTFT p50 per model/workload."""
    curves = depth_curves(rows)
    if not curves:
        return message_png(out, "no config was measured at two or more depths")
    fig = new_figure(9, 6.5)
    ax_tg = fig.add_subplot(2, 1, 1)
    ax_ttft = fig.add_subplot(2, 1, 2, sharex=ax_tg)
    drew_ttft = False
    for curve in curves:
        label = f"{curve['model_label']} ({curve['quant']}) {curve['workload']} ctx {curve['ctx']}"
        pts = [p for p in curve["points"] if p["tg_tps_median"] is not None]
        if pts:
            xs = [p["depth"] for p in pts]
            ys = [p["tg_tps_median"] for p in pts]
            # the spread of the steady reps, never hidden behind the median
            err = [
                [y - p["tg_tps_min"] for y, p in zip(ys, pts, strict=True)],
                [p["tg_tps_max"] - y for y, p in zip(ys, pts, strict=True)],
            ]
            ax_tg.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=label)
        tt = [p for p in curve["points"] if p["ttft_ms_p50"] is not None]
        if tt:
            ax_ttft.plot([p["depth"] for p in tt], [p["ttft_ms_p50"] for p in tt], marker="o", label=label)
            drew_ttft = True
    ax_tg.set_ylabel("tg t/s (median, min–max)")
    ax_tg.set_title("Decode speed and time to first token against context depth")
    ax_tg.legend(fontsize=8, loc="best")
    ax_tg.grid(alpha=0.3)
    if drew_ttft:
        ax_ttft.set_ylabel("TTFT p50 (ms)")
        ax_ttft.grid(alpha=0.3)
    else:
        not_measured(ax_ttft)
    ax_ttft.set_xlabel("depth (tokens already in the KV cache)")
    return save(fig, out)
