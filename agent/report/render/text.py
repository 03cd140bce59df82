"""The terminal report: the answer first, the configs table fitted to the terminal, the notes (and with
``show_output`` each config's generated text), the depth curves, then the serving levels apart.

Columns without data are left out (off a Jetson: temperatures, power, J/token), columns with one value in
every row are said once above the table (unless ``wide``), and with a ``width`` the least telling columns
are left out until it fits, each one named below it.
"""

from __future__ import annotations

import textwrap
from typing import Any

from edgeprof.report.accuracy import accuracy_lines
from edgeprof.report.columns import ESSENTIAL_KEYS, FIT_DROP_ORDER, cells, shown, telling_params
from edgeprof.report.fit import recommendation_lines
from edgeprof.report.render.notes import ECHO_TITLE, OUTPUT_TITLE, echo_notes, failure_notes, output_lines
from edgeprof.report.render.serving import serving_lines
from edgeprof.report.render.soak import soak_lines
from edgeprof.report.serving import is_serving_row
from edgeprof.report.tables import drop_constant_columns, drop_empty_columns, fit_columns, render_grid
from edgeprof.report.workload import render_depth_lines
from edgeprof.safetext import safe_lines, safe_text

FOOTER = "pp/tg: steady reps only (llama.cpp counters); load/cold: first start of a fresh process."


def table_lines(
    rows: list[dict[str, Any]],
    *,
    width: int | None = None,
    columns: tuple[str, ...] | None = None,
    wide: bool = False,
) -> list[str]:
    """The per-config table (see the module docstring). ``columns`` picks exact columns by key."""
    if columns is not None:
        picked = [c for k in columns for c in shown("table") if c.name == k]
        return render_grid([c.header for c in picked], [cells(picked, r) for r in rows])
    shown_columns = shown("table", rows=rows)
    key_of_header = {c.header: c.name for c in shown_columns}
    headers = [c.header for c in shown_columns]
    grid = [cells(shown_columns, r) for r in rows]
    essential = [c.header for c in shown_columns if c.name in ESSENTIAL_KEYS]
    common: list[tuple[str, str]] = []
    if wide:
        headers, grid, _ = drop_empty_columns(headers, grid, keep=essential)
    else:
        headers, grid, common = drop_constant_columns(headers, grid, keep=essential)
    dropped: list[str] = []
    if width is not None and not wide:
        keep = telling_params(shown_columns, rows)  # what tells the rows apart stays; measures go first
        order = [c.header for k in FIT_DROP_ORDER for c in shown_columns if c.name == k and k not in keep]
        headers, grid, dropped = fit_columns(headers, grid, width, order)
    lines = []
    if common:
        lines += ["every row: " + "  ".join(f"{h}={v}" for h, v in common)]
    lines += render_grid(headers, grid)
    if dropped:
        names = ", ".join(key_of_header[h] for h in dropped)
        lines += [f"(left out to fit {width} columns: {names}; --wide shows every column, --columns picks)"]
    if width is not None:
        lines = [part for line in lines for part in wrap_line(line, width)]
    return lines


def render_table(
    rows: list[dict[str, Any]],
    *,
    width: int | None = None,
    columns: tuple[str, ...] | None = None,
    wide: bool = False,
    show_output: bool = False,
) -> str:
    """The terminal report; ``show_output``: the start of each config's generated text below the table."""
    everything, rows = rows, [r for r in rows if not is_serving_row(r)]
    if not rows and everything:
        # serving levels only: no header of an empty configs table above them
        lines = serving_lines(everything)[1:]
        if width is not None:
            lines = [part for line in lines for part in wrap_line(line, width)]
        return safe_lines("\n".join(lines))
    lines = table_lines(rows, width=width, columns=columns, wide=wide)
    # each note is one line: a label's newline is shown as \n, never a forged line of the report
    recs = [safe_text(x) for x in recommendation_lines(rows)]  # the report opens with the answer
    if recs:
        lines = [*recs, "", *lines]
    if rows and rows[0].get("_bw_note"):
        lines += ["", str(rows[0]["_bw_note"])]
    accuracy = [safe_text(x) for x in accuracy_lines(rows)]
    if accuracy:
        lines += ["", "Task accuracy (each variant against its reference, on the same tasks):"]
        lines += [f"  {x}" for x in accuracy]
    fails = [safe_text(x) for x in failure_notes(rows)]
    if fails:
        lines += ["", f"{len(fails)} note(s): failed configs, device changes, instability:"]
        lines += [f"  {f}" for f in fails]
    echoes = [safe_text(x) for x in echo_notes(rows)]
    if echoes:
        lines += ["", f"{len(echoes)} config(s) with {ECHO_TITLE}:", *(f"  {e}" for e in echoes)]
    if show_output:
        lines += ["", OUTPUT_TITLE, *(f"  {safe_text(x)}" for x in output_lines(rows))]
    depth_lines = render_depth_lines(rows)
    if depth_lines:
        lines += ["", "tg t/s and TTFT against context depth (steady reps):"]
        lines += [f"  {x}" for x in depth_lines]
    soak = soak_lines(rows)
    if soak:
        lines += ["", *soak]
    lines += ["", FOOTER]
    lines += serving_lines(everything)  # the HTTP API, apart: another scenario
    if width is not None:  # the notes around the table wrap to the terminal too
        lines = [part for line in lines for part in wrap_line(line, width)]
    # labels, reasons and names in the notes come from files and plans: shown, never acting on the terminal
    return safe_lines("\n".join(lines))


def wrap_line(line: str, width: int) -> list[str]:
    if len(line) <= width:
        return [line]
    indent = " " * (len(line) - len(line.lstrip()) + 2)
    return textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False) or [line]
