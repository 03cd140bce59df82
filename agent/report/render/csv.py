"""The CSV report: one line per row, the JSON contract's fields as columns, empty where not measured.

Written to a file it is data: text as stored, only what a spreadsheet would run as a formula neutralised
(``csv_cell``). Printed to a terminal, every text cell also goes through the one sanitiser
(``safe_text``): a label's ESC or BEL is shown as ``\x1b``, never acted on."""

from __future__ import annotations

import csv
import io
from typing import Any

from edgeprof.report.columns import FIELD_NAMES
from edgeprof.safetext import csv_cell, safe_text


def render_csv(rows: list[dict[str, Any]], *, terminal: bool = False) -> str:
    """The rows as CSV; ``terminal``: for a terminal, every control character of a text cell escaped."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(FIELD_NAMES), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(row[k], terminal) for k in FIELD_NAMES})
    return buf.getvalue()


def _cell(value: Any, terminal: bool) -> Any:
    if value is None:
        return ""
    cell = csv_cell(value)
    return safe_text(cell) if terminal and isinstance(cell, str) else cell
