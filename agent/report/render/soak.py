"""The soak section of the terminal and Markdown reports: per soak its verdict and figures in one line, the
verdict's reasons, and a sparkline of the windows' decode speed; and the HTML chart's input."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from edgeprof.report.render.notes import config_name
from edgeprof.report.soak import soak_rows
from edgeprof.stats import median

SPARK_WIDTH = 60  # characters: an hour of 10-s windows pooled 6 to a character

# The sparkline: the soak's decode speed window by window on one line. Each character is a value as a share
# of the best one, in eighths between ``floor`` and 1: with the default floor of 0.5 a step is 1/16 of the
# best speed, so a 3 % wobble stays flat and a 20 % throttle drop is three steps down. Scaling between the
# series' own min and max would draw 1 % of noise as a cliff. Not measured is a space; below the floor is
# the lowest block.
BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None], floor: float = 0.5, width: int | None = None) -> str:
    """``values`` as blocks, each relative to the largest; ``width``: at most that many characters (values
    are then pooled by taking each group's median, so one outlier window does not set a character)."""
    if width is not None and width > 0 and len(values) > width:
        values = _pooled(values, width)
    known = [v for v in values if v is not None]
    if not known or max(known) <= 0:
        return " " * len(values)
    best = max(known)
    out = []
    for v in values:
        if v is None:
            out.append(" ")
            continue
        share = (v / best - floor) / (1.0 - floor)
        out.append(BLOCKS[max(0, min(len(BLOCKS) - 1, int(share * len(BLOCKS) - 1e-9)))])
    return "".join(out)


def _pooled(values: Sequence[float | None], width: int) -> list[float | None]:
    out: list[float | None] = []
    for i in range(width):
        group = [
            v for v in values[i * len(values) // width : (i + 1) * len(values) // width] if v is not None
        ]
        out.append(median(group) if group else None)
    return out


def _pct(x: Any) -> str:
    return f"{float(x) * 100:.0f} %" if x is not None else "—"


def _tps(x: Any) -> str:
    return f"{float(x):.1f} t/s" if x is not None else "—"


def _j(x: Any) -> str:
    return f"{float(x):.3g}" if x is not None else "—"


def soak_summary(row: Mapping[str, Any]) -> str:
    """One line: verdict, burst → sustained, stability, the first throttle signal, thermal steady state."""
    parts = [
        f"burst {_tps(row.get('soak_burst_tps'))} → sustained {_tps(row.get('soak_sustained_tps'))} "
        f"({_pct(row.get('soak_sustained_ratio'))})",
        f"worst/best window {_pct(row.get('soak_stability_ratio'))}",
    ]
    if row.get("soak_first_throttle_s") is not None:
        after = float(row["soak_first_throttle_s"])
        parts.append(f"first throttle after {after:.0f} s: {row['soak_first_throttle_what']}")
    burst_j, sustained_j = row.get("soak_burst_j_per_token"), row.get("soak_sustained_j_per_token")
    if burst_j is not None or sustained_j is not None:
        parts.append(f"J/token {_j(burst_j)} → {_j(sustained_j)}")
    if row.get("soak_steady_state_s") is not None:
        temp = row.get("soak_steady_temp_c")
        at = f" at {float(temp):.1f} °C" if temp is not None else ""
        parts.append(f"thermal steady state after {float(row['soak_steady_state_s']):.0f} s{at}")
    return f"{row.get('soak_verdict') or 'not judged'}: " + "; ".join(parts)


def soak_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The terminal's (and Markdown's) soak section: per soak its summary, why, and the windows' sparkline."""
    soaks = soak_rows(rows)
    if not soaks:
        return []
    lines = ["Soak (sustained load), tg t/s per window as a share of the best window:"]
    for row in soaks:
        lines.append(f"  {config_name(row)}: {soak_summary(row)}")
        lines += [f"    {why}" for why in row.get("_soak_reasons") or []]
        windows = row.get("_soak_windows") or []
        speeds = [w["tg_tps"] for w in windows]
        if speeds:
            lines.append(f"    |{sparkline(speeds, width=SPARK_WIDTH)}| {len(speeds)} windows")
    return lines


def soak_chart_input(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What ``figures.soak_png`` draws, one entry per soak."""
    return [
        {
            "label": config_name(r),
            "verdict": r.get("soak_verdict"),
            "burst_tps": r.get("soak_burst_tps"),
            "first_throttle_s": r.get("soak_first_throttle_s"),
            "first_throttle_what": r.get("soak_first_throttle_what"),
            "windows": r.get("_soak_windows") or [],
        }
        for r in soak_rows(rows)
    ]
