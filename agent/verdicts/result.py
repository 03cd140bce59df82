"""What every verdict returns: a value and the evidence behind it, rounded for storage as JSON."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class VerdictResult:
    """A verdict value and the evidence behind it (JSON-serialisable). Unpacks as ``value, evidence``."""

    value: str
    evidence: dict[str, Any]

    def __iter__(self) -> Iterator[Any]:
        return iter((self.value, self.evidence))


def rounded(value: float | None, digits: int = 3) -> float | None:
    """``value`` rounded for the evidence; None for a missing or non-finite one (evidence is strict JSON)."""
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits)
