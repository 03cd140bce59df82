"""A log as ``(t, value)`` series for the verdict on it, in bounded memory however long the log
(``LineSample``)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

# A record as the verdict reads it: its epoch (None without a timestamp) and its readings by metric.
Row = tuple[float | None, dict[str, float | None]]


@dataclass
class LogSeries:
    """A whole log as ``(t, value)`` series: ``t`` in seconds from the first timestamp, or the line index x
    ``spacing_s`` where the log has none (``spacing_assumed``: nobody said what the spacing was). ``step``:
    the verdict read every step-th line (1: every line; see ``LineSample``)."""

    series: dict[str, list[tuple[float, float | None]]]
    wall_t0: float | None
    spacing_s: float
    spacing_assumed: bool
    records: int
    step: int = 1


# tegrastats' default --interval: the spacing of a log without timestamps unless the user states it
DEFAULT_SPACING_S = 1.0
# The verdict holds a log whole, at ~250 bytes a reading (its series, its sessions): it reads at most this
# many readings (lines x metrics), 120 MiB or so, whatever the length of the log. A longer log is judged on
# every 2nd, 4th, ... line, evenly through it (whole lines: a clock and its load stay of the same moment),
# and says so: 11 900 lines of a 12-core AGX Orin (42 readings a line), 3.3 h at tegrastats' 1 s.
MAX_VERDICT_READINGS = 500_000


class LineSample:
    """The lines of a log for its verdict, in bounded memory: every line while their readings fit
    ``max_readings``, then every 2nd, 4th, ... (the step doubles, and the lines kept so far are thinned to
    it), so that what is kept is spread evenly over the whole log. Appended to like a list of rows."""

    def __init__(self, max_readings: int = MAX_VERDICT_READINGS) -> None:
        self.max_readings = max_readings
        self.rows: list[Row] = []
        self.indices: list[int] = []  # each kept row's line index in the log
        self.seen = 0
        self.step = 1
        self.readings = 0
        self.all_timed = True  # every line, kept or not, had a timestamp

    def append(self, row: Row) -> None:
        index = self.seen
        self.seen += 1
        self.all_timed = self.all_timed and row[0] is not None
        if index % self.step:
            return
        self.rows.append(row)
        self.indices.append(index)
        self.readings += len(row[1])
        while self.readings > self.max_readings and len(self.rows) > 1:
            self.step *= 2
            kept = [(i, r) for i, r in zip(self.indices, self.rows, strict=True) if i % self.step == 0]
            self.indices = [i for i, _ in kept]
            self.rows = [r for _, r in kept]
            self.readings = sum(len(r[1]) for r in self.rows)

    def __len__(self) -> int:
        return self.seen

    def __bool__(self) -> bool:
        return self.seen > 0

    def series(self, interval_s: float | None) -> LogSeries:
        return series_of_rows(
            self.rows, interval_s, self.seen, indices=self.indices, step=self.step, timed=self.all_timed
        )


def series_of_rows(
    rows: list[Row],
    interval_s: float | None,
    records: int,
    *,
    indices: list[int] | None = None,
    step: int = 1,
    timed: bool = True,
) -> LogSeries:
    """Rows of (epoch or None, values) as series: timestamps where every row has one, else the index x the
    stated ``interval_s`` (or ``DEFAULT_SPACING_S``, then marked assumed). ``indices``: each row's line
    index where the rows are every ``step``-th line of the log (``LineSample``); ``timed``: False where a
    line left out had no timestamp."""
    epochs = [e for e, _ in rows]
    timed = timed and all(e is not None for e in epochs) and interval_s is None
    first = epochs[0] if timed else None
    spacing = interval_s or DEFAULT_SPACING_S
    series: dict[str, list[tuple[float, float | None]]] = {}
    for i, (epoch, values) in enumerate(rows):
        index = indices[i] if indices is not None else i
        t = (epoch - first) if timed and epoch is not None and first is not None else index * spacing
        for metric, value in values.items():
            series.setdefault(metric, []).append((t, value))
    if timed:
        times = sorted({t for s in series.values() for t, _ in s})
        steps = sorted(b - a for a, b in pairwise(times) if b > a)
        spacing = steps[len(steps) // 2] if steps else DEFAULT_SPACING_S
    else:
        spacing *= step  # the judged lines' own spacing: a gap between sessions is counted in it
    return LogSeries(series, first, spacing, not timed and interval_s is None, records, step)
