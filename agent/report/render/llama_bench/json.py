"""llama-bench's ``-o json``: a list of objects, the fields in llama-bench's order with their JSON types, then
``samples_ns`` and ``samples_ts``."""

from __future__ import annotations

import json
from typing import Any

from edgeprof.report.llamabench.fields import FIELD_NAMES, SAMPLE_FIELDS


def json_object(record: dict[str, Any]) -> dict[str, Any]:
    return {name: record[name] for name in (*FIELD_NAMES, *SAMPLE_FIELDS)}


def render_json(records: list[dict[str, Any]]) -> str:
    return json.dumps([json_object(r) for r in records], indent=2, allow_nan=False) + "\n"
