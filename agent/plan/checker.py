"""The problem collector of plan validation: every check adds 'place: what is wrong' and carries on.

A user fixing a plan at 11 p.m. before an overnight sweep wants every mistake listed with its place, so no
check raises; each returns None for a value it refused, and the caller skips what depends on it.
"""

from __future__ import annotations

import difflib
import math
from typing import Any

# What SQLite's INTEGER holds, and TOML's own range; every plan integer is stored or passed on as one.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class Checker:
    """Collects the problems of one plan, in the order the checks meet them."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def add(self, place: str, message: str) -> None:
        self.problems.append(f"{place}: {message}")

    def unknown_keys(self, table: dict[str, Any], allowed: set[str], place: str) -> None:
        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(key, sorted(allowed), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                self.add(f"{place}.{key}" if place else key, f"unknown key{hint}")

    def table(self, doc: dict[str, Any], key: str, place: str) -> dict[str, Any]:
        value = doc.get(key, {})
        if not isinstance(value, dict):
            self.add(place, f"expected a table, got {type_name(value)}")
            return {}
        return value

    def integer(self, value: Any, place: str, minimum: int | None = None) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int):
            self.add(place, f"expected an integer, got {type_name(value)} {value!r}")
            return None
        if not INT64_MIN <= value <= INT64_MAX:  # a plan given as data, not TOML: SQLite stores int64
            self.add(place, f"{value} does not fit a 64-bit integer")
            return None
        if minimum is not None and value < minimum:
            self.add(place, f"must be >= {minimum}, got {value}")
            return None
        return value

    def number(self, value: Any, place: str, minimum: float | None = None) -> float | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.add(place, f"expected a number, got {type_name(value)} {value!r}")
            return None
        if not math.isfinite(value):  # nan passes every comparison; inf is no bound at all
            self.add(place, f"must be a finite number, got {value}")
            return None
        if minimum is not None and value < minimum:
            self.add(place, f"must be >= {minimum:g}, got {value}")
            return None
        return float(value)

    def boolean(self, value: Any, place: str) -> bool | None:
        if not isinstance(value, bool):
            self.add(place, f"expected true or false, got {type_name(value)} {value!r}")
            return None
        return value

    def string(self, value: Any, place: str) -> str | None:
        if not isinstance(value, str):
            self.add(place, f"expected a string, got {type_name(value)} {value!r}")
            return None
        return value


def type_name(value: Any) -> str:
    """A value's type as TOML calls it, for the messages a plan's author reads."""
    return {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "array",
        dict: "table",
    }.get(type(value), type(value).__name__)


def as_list(value: Any) -> list[Any]:
    """A plan may give one value where a list is expected (``ctx = 512`` for ``ctx = [512]``)."""
    return value if isinstance(value, list) else [value]
