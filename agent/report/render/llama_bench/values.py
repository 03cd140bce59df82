"""A record's value as llama-bench prints it in its text formats (csv, sql, md): C++'s std::to_string, so
integers as integers, doubles with six decimals, booleans as 0 and 1."""

from __future__ import annotations

from typing import Any

from edgeprof.report.llamabench.fields import FIELD_TYPES


def text_value(name: str, value: Any) -> str:
    kind = FIELD_TYPES.get(name, "string")
    if value is None:
        return ""
    if kind == "bool":
        return "1" if value else "0"
    if kind == "float":
        return f"{float(value):.6f}"
    if kind == "int":
        return str(int(value))
    return str(value)
