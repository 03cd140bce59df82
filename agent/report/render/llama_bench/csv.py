"""llama-bench's ``-o csv``: a header of the field names, then every value quoted, as llama-bench writes it
(no samples: they are lists)."""

from __future__ import annotations

from typing import Any

from edgeprof.report.llamabench.fields import FIELD_NAMES
from edgeprof.report.render.llama_bench.values import text_value


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def render_csv(records: list[dict[str, Any]]) -> str:
    lines = [",".join(FIELD_NAMES)]
    lines += [",".join(_quoted(text_value(n, r[n])) for n in FIELD_NAMES) for r in records]
    return "\n".join(lines) + "\n"
