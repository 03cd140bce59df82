"""The HTML report's building blocks: escaping, badges, tables, and the tables of the column registry.

Every stored string (labels, reasons, log tails, plan text, evidence) goes through ``esc``
(``edgeprof.safetext``, the one escaping function of every HTML writer) before it is written: a model label
like ``llama-<q8_0>`` is shown, never injected. Only ``table`` takes cells that are HTML already.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from edgeprof.report.cells import RUNNING, fmt_value
from edgeprof.report.columns import Column, cells, drop_order, shown, telling_params
from edgeprof.report.tables import drop_empty_columns, fit_columns
from edgeprof.safetext import esc

Row = Mapping[str, Any]


def badge(value: str | None, css_value: str | None = None) -> str:
    text = value or "not judged"
    key = css_value or value
    css = f"v-{key}" if key else "v-none"
    return f'<span class="badge {esc(css)}">{esc(text)}</span>'


def table(headers: Sequence[str], body: Sequence[Sequence[str]], row_classes: Sequence[str] = ()) -> str:
    """``body`` cells are whole ``<td>`` elements, HTML already (escape before)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    rows = []
    for i, cells_ in enumerate(body):
        css = f' class="{esc(row_classes[i])}"' if i < len(row_classes) and row_classes[i] else ""
        named = [labelled(c, headers[j] if j < len(headers) else "") for j, c in enumerate(cells_)]
        rows.append(f"<tr{css}>" + "".join(named) + "</tr>")
    # in a box of its own: a table wider than the window (``--wide``, a long unbroken value) scrolls there,
    # never the whole page
    body_html = "".join(rows)
    return f'<div class="table"><table><thead><tr>{head}</tr></thead><tbody>{body_html}</tbody></table></div>'


def labelled(cell_html: str, header: str) -> str:
    """A cell that names its column (``data-label``): on a phone-width screen each row is a stacked card
    whose lines are "column: value" (the page's CSS), so no table is wider than the screen."""
    if not cell_html.startswith("<td") or not header:
        return cell_html
    return f'<td data-label="{esc(header)}"' + cell_html[3:]


def td(text: Any, num: bool = False) -> str:
    return f'<td class="num">{esc(text)}</td>' if num else f"<td>{esc(text)}</td>"


def kv_table(pairs: Sequence[tuple[str, Any]]) -> str:
    body = [[f"<th>{esc(k)}</th>", td(fmt_value(v, 2) if not isinstance(v, str) else v)] for k, v in pairs]
    rows = "".join("<tr>" + "".join(c) + "</tr>" for c in body)
    return f'<div class="table"><table><tbody>{rows}</tbody></table></div>'


def json_block(text: str | None) -> str:
    if not text:
        return '<p class="muted">not recorded</p>'
    try:
        pretty = json.dumps(json.loads(text), indent=2, sort_keys=True)
    except ValueError:
        pretty = text
    return f"<pre>{esc(pretty)}</pre>"


def png_data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def cell(column: Column, row: Row) -> str:
    """One ``<td>`` of a registry column, drawn as its style says."""
    if column.style == "badge":
        return f"<td>{badge(row.get(column.field))}</td>"
    if column.style == "status":
        ok = row[column.field] in ("ok", RUNNING)  # running: not finished, not failed
        reason = "" if ok else f" {esc(row.get('reason'))}"
        return f"<td>{badge(row[column.field], None if ok else 'failed')}{reason}</td>"
    text = column.html_text(row)
    # a value the row does not have (a foreign server's ngl) is an empty cell, never Python's "None"
    return td("" if text == "None" else text, num=column.style == "num")


def failed_classes(rows: Sequence[Row]) -> list[str]:
    return ["failed" if r["status"] not in ("ok", RUNNING) else "" for r in rows]


def non_empty(columns: Sequence[Column], rows: Sequence[Row]) -> list[Column]:
    """The columns with data in some row, as the terminal table keeps them (the essential ones always)."""
    _, _, dropped = drop_empty_columns(
        [c.name for c in columns],
        [cells(columns, r) for r in rows],
        keep=[c.name for c in columns if c.essential],
    )
    return [c for c in columns if c.name not in dropped]


# The page reads on a 1366-px laptop screen without scrolling sideways: the body, less its margins and a
# scrollbar, holds about this many characters of the tables' 12-px font (a digit is ~7 px; a cell's padding
# and border, ~13 px, are the two characters ``grid_width`` puts between columns).
SCREEN_PX = 1366
FIT_CHARS = 190
# A text cell wraps at its spaces (and a long word anywhere): it needs about this much width, not its length;
# numbers never wrap.
TEXT_CHARS = 22


# The serving table's columns that may be left out to fit the window, least telling first: a level's load
# (c, rate), its outcome and its latency percentiles always stay.
SERVING_FIT_ORDER = (
    "s_slot", "s_deferred", "ready", "serving_cold", "ngl", "s_e2e_tok", "s_rps", "s_itl", "s_goodput",
    "workload", "s_e2el", "s_interference", "s_stability",
)  # fmt: skip


def cell_chars(column: Column, row: Row) -> int:
    """About how many characters wide a cell is drawn (see ``FIT_CHARS``)."""
    if column.style == "status":
        return len(str(row.get(column.field))) + 2  # the badge; the reason beside it wraps
    if column.style == "badge":
        return len(str(row.get(column.field) or "not judged")) + 2
    text = column.html_text(row)
    return len(text) if column.style == "num" else min(len(text), TEXT_CHARS)


def fit_html(
    columns: Sequence[Column], rows: Sequence[Row], chars: int, table_name: str = "configs"
) -> tuple[list[Column], list[str]]:
    """``columns`` less the least telling ones (the registry's order, as the terminal leaves them out) until
    the table fits ``chars``; returns the columns kept and the keys of those left out."""
    by_key = {c.name: c for c in columns}
    # a header wraps at its spaces: its longest word is what it needs
    heads = [max(len(w) for w in (c.html_header or c.header).split()) for c in columns]
    grid = [["x" * n for n in heads], *(["x" * cell_chars(c, r) for c in columns] for r in rows)]
    # what tells the rows apart stays; measures go first, then the parameters every row shares
    keep = telling_params(columns, rows)
    ranked = SERVING_FIT_ORDER if table_name == "serving" else drop_order("html", table_name)
    order = [k for k in ranked if k in by_key and k not in keep]
    order = [k for k in order if not by_key[k].param] + [k for k in order if by_key[k].param]
    keys, _, left_out = fit_columns([c.name for c in columns], grid, chars, order)
    return [by_key[k] for k in keys], left_out


def table_columns(
    table_name: str, rows: Sequence[Row], *, drop_empty: bool = False, fit_chars: int | None = None
) -> tuple[list[Column], list[str]]:
    """The registry's HTML columns for ``table_name``; ``drop_empty``: those without data left out;
    ``fit_chars``: the least telling left out to fit that width. Returns them and the keys left out to fit."""
    columns = list(shown("html", table_name, rows=rows))
    if drop_empty:
        columns = non_empty(columns, rows)
    if fit_chars is None:
        return columns, []
    return fit_html(columns, rows, fit_chars, table_name)


def registry_table(
    table_name: str,
    rows: Sequence[Row],
    *,
    numbered: bool = False,
    drop_empty: bool = False,
    columns: Sequence[Column] | None = None,
) -> str:
    """An HTML table of the registry's columns for ``table_name`` (``configs``, ``serving``, ``versus``), or
    of ``columns`` (from ``table_columns``); ``numbered``: a leading ``#`` column; ``drop_empty``: columns
    without data left out."""
    if columns is None:
        columns, _ = table_columns(table_name, rows, drop_empty=drop_empty)
    headers = [c.html_header or c.header for c in columns]
    body = [[cell(c, r) for c in columns] for r in rows]
    if numbered:
        headers = ["#", *headers]
        body = [[td(i, num=True), *cells_] for i, cells_ in enumerate(body, start=1)]
    classes = failed_classes(rows) if table_name != "versus" else []
    return table(headers, body, classes)
