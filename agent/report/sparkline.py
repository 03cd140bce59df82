"""A one-line picture of a series for the terminal: the soak's decode speed window by window.

Each character is one value as a share of the best one, in eighths between ``floor`` and 1: with the
default floor of 0.5 a step is 1/16 of the best speed, so a 3 % wobble stays flat and a 20 % throttle drop
is three steps down. Scaling between the series' own min and max instead would draw 1 % of noise as a
cliff. A value not measured is a space; one below the floor is the lowest block.
"""

from __future__ import annotations

from collections.abc import Sequence

from edgeprof.stats import median

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
