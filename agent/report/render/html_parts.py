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

from edgeprof.report.cells import fmt_value
from edgeprof.report.columns import Column, cells, shown
from edgeprof.report.tables import drop_empty_columns
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
        rows.append(f"<tr{css}>" + "".join(cells_) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def td(text: Any, num: bool = False) -> str:
    return f'<td class="num">{esc(text)}</td>' if num else f"<td>{esc(text)}</td>"


def kv_table(pairs: Sequence[tuple[str, Any]]) -> str:
    body = [[f"<th>{esc(k)}</th>", td(fmt_value(v, 2) if not isinstance(v, str) else v)] for k, v in pairs]
    return "<table><tbody>" + "".join("<tr>" + "".join(c) + "</tr>" for c in body) + "</tbody></table>"


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
        ok = row[column.field] == "ok"
        reason = "" if ok else f" {esc(row.get('reason'))}"
        return f"<td>{badge(row[column.field], None if ok else 'failed')}{reason}</td>"
    return td(column.html_text(row), num=column.style == "num")


def failed_classes(rows: Sequence[Row]) -> list[str]:
    return ["failed" if r["status"] != "ok" else "" for r in rows]


def non_empty(columns: Sequence[Column], rows: Sequence[Row]) -> list[Column]:
    """The columns with data in some row, as the terminal table keeps them (the essential ones always)."""
    _, _, dropped = drop_empty_columns(
        [c.name for c in columns],
        [cells(columns, r) for r in rows],
        keep=[c.name for c in columns if c.essential],
    )
    return [c for c in columns if c.name not in dropped]


def registry_table(
    table_name: str, rows: Sequence[Row], *, numbered: bool = False, drop_empty: bool = False
) -> str:
    """An HTML table of the registry's columns for ``table_name`` (``configs``, ``serving``, ``versus``);
    ``numbered``: a leading ``#`` column; ``drop_empty``: columns without data left out."""
    columns = list(shown("html", table_name))
    if drop_empty:
        columns = non_empty(columns, rows)
    headers = [c.html_header or c.header for c in columns]
    body = [[cell(c, r) for c in columns] for r in rows]
    if numbered:
        headers = ["#", *headers]
        body = [[td(i, num=True), *cells_] for i, cells_ in enumerate(body, start=1)]
    classes = failed_classes(rows) if table_name != "versus" else []
    return table(headers, body, classes)
