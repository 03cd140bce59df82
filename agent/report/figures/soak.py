"""The soak figure: decode speed per window against time, with temperature and clocks on a second axis and
the moment of the first throttle signal marked: what the speed is after minutes of continuous load, and when
and why it dropped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from edgeprof.report.figures.canvas import THROTTLED_COLOR, message_png, new_figure, not_measured, save


def _xs(windows: Sequence[Mapping[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """Window mid-times (minutes since the soak's start) and the values of ``key`` where measured."""
    pts = [(float(w["t_mid_s"]) / 60.0, float(w[key])) for w in windows if w.get(key) is not None]
    return [x for x, _ in pts], [y for _, y in pts]


def soak_png(soaks: Sequence[Mapping[str, Any]], out: Path) -> Path:
    """One panel per soak: tg t/s per window (left axis), the hottest zone and the CPU/GPU clocks (right
    axis), a dashed line at the burst speed and a red line at the first throttle signal.

    Each soak is ``{"label", "verdict", "burst_tps", "first_throttle_s", "first_throttle_what", "windows":
    [{"t_mid_s", "tg_tps", "temp_max_c", "cpu_mhz", "gpu_mhz"}, ...]}``."""
    soaks = [s for s in soaks if s.get("windows")]
    if not soaks:
        return message_png(out, "no soak workload in this sweep")
    fig = new_figure(9, 3.2 * len(soaks))
    for n, soak in enumerate(soaks):
        ax = fig.add_subplot(len(soaks), 1, n + 1)
        _panel(ax, soak)
    return save(fig, out)


def _panel(ax: Any, soak: Mapping[str, Any]) -> None:
    windows = soak["windows"]
    xs, tg = _xs(windows, "tg_tps")
    ax.set_title(f"{soak['label']} — {soak.get('verdict') or 'not judged'}", fontsize=10, loc="left")
    if not tg:
        not_measured(ax)
        return
    ax.plot(xs, tg, marker=".", color="C0", label="tg t/s per window")
    if soak.get("burst_tps") is not None:
        ax.axhline(
            float(soak["burst_tps"]), color="C0", linestyle="--", alpha=0.5, label="burst (first 3 windows)"
        )
    # Speed from 0: a drop reads as the share of the speed it is, not stretched to the panel's height.
    ax.set_ylim(0, max(tg) * 1.1)
    ax.set_ylabel("tg t/s")
    ax.set_xlabel("minutes since the soak started")
    ax.grid(alpha=0.3)
    if soak.get("first_throttle_s") is not None:
        at = float(soak["first_throttle_s"]) / 60.0
        ax.axvline(
            at, color=THROTTLED_COLOR, label=f"first throttle signal: {soak.get('first_throttle_what')}"
        )
    right = ax.twinx()
    drew = False
    for key, label, style in (
        ("temp_max_c", "hottest zone °C", "C3"),
        ("cpu_mhz", "CPU MHz", "C2"),
        ("gpu_mhz", "GPU MHz", "C4"),
    ):
        rx, ry = _xs(windows, key)
        if ry:
            right.plot(rx, ry, color=style, alpha=0.7, label=label)
            drew = True
    if drew:
        right.set_ylabel("°C / MHz")
    else:
        right.set_yticks([])
        right.text(
            0.99,
            0.02,
            "temperature and clocks not measured",
            transform=ax.transAxes,
            ha="right",
            fontsize=8,
            color="0.4",
        )
    handles = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    handles += draw_contention(ax, windows)
    ax.legend(handles=handles, fontsize=7, loc="lower left")


def draw_contention(ax: Any, windows: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Other processes' CPU work per window (cores, the interference counters) on an axis of its own: what
    a slowdown coincides with where no thermometer or clock can say whether it was heat."""
    cx, cores = _xs(windows, "other_cores")
    if not cores or max(cores) <= 0.05:
        return []
    third = ax.twinx()
    third.spines["right"].set_position(("axes", 1.1))
    third.fill_between(cx, cores, step="mid", color="0.5", alpha=0.25, label="other processes (cores)")
    third.set_ylim(0, max(1.0, max(cores) * 1.2))
    third.set_ylabel("other processes (cores)")
    return list(third.get_legend_handles_labels()[0])
