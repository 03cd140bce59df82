"""llama-bench's ``-o jsonl``: one JSON object per line, as ``-o json``'s objects."""

from __future__ import annotations

import json
from typing import Any

from edgeprof.report.render.llama_bench.json import json_object


def render_jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(json_object(r), allow_nan=False) + "\n" for r in records)
