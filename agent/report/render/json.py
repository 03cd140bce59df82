"""The JSON report: a list of objects with exactly the contract's fields (``REPORT_FIELDS``), in its
order, ``null`` where a value was not measured (never NaN)."""

from __future__ import annotations

import json
from typing import Any

from edgeprof.report.columns import FIELD_NAMES


def render_json(rows: list[dict[str, Any]]) -> str:
    return json.dumps([{k: row[k] for k in FIELD_NAMES} for row in rows], indent=2, allow_nan=False)
