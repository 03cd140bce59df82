"""The CSV report: one line per row, the JSON contract's fields as columns, empty where not measured."""

from __future__ import annotations

import csv
import io
from typing import Any

from edgeprof.report.columns import FIELD_NAMES
from edgeprof.safetext import csv_cell


def render_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(FIELD_NAMES), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row[k] is None else csv_cell(row[k])) for k in FIELD_NAMES})
    return buf.getvalue()
