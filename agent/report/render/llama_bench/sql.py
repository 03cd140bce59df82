"""llama-bench's ``-o sql``: ``CREATE TABLE IF NOT EXISTS llama_bench`` with its column types, then one
``INSERT`` per record; sqlite3 reads it as it reads llama-bench's own."""

from __future__ import annotations

from typing import Any

from edgeprof.report.llamabench.fields import FIELD_NAMES, FIELD_TYPES
from edgeprof.report.render.llama_bench.values import text_value

_SQL_TYPES = {"string": "TEXT", "bool": "INTEGER", "int": "INTEGER", "float": "REAL"}


def _literal(text: str) -> str:
    # llama-bench writes values between single quotes unescaped; a quote in a path would break its SQL, so
    # here it is doubled as SQL wants
    return "'" + text.replace("'", "''") + "'"


def render_sql(records: list[dict[str, Any]]) -> str:
    lines = ["CREATE TABLE IF NOT EXISTS llama_bench ("]
    last = len(FIELD_NAMES) - 1
    lines += [
        f"  {n} {_SQL_TYPES[FIELD_TYPES[n]]}{',' if i < last else ''}" for i, n in enumerate(FIELD_NAMES)
    ]
    lines += [");", ""]
    columns = ", ".join(FIELD_NAMES)
    for r in records:
        values = ", ".join(_literal(text_value(n, r[n])) for n in FIELD_NAMES)
        lines.append(f"INSERT INTO llama_bench ({columns}) VALUES ({values});")
    return "\n".join(lines) + "\n"
