"""The plan's ``[quality_budget]`` table: what the recommendation accepts against the reference."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (JetPack 6)
    import tomli as tomllib


@dataclass(frozen=True)
class QualityBudget:
    """Plan table ``[quality_budget]``: ``kld_mean`` (max mean KLD) and ``same_top_pct`` (min %)."""

    kld_mean: float = 0.05
    same_top_pct: float = 90.0

    def describe(self) -> str:
        return f"mean KLD ≤ {self.kld_mean:g}, same-top ≥ {self.same_top_pct:g} %"


BUDGET_KEYS = {"kld_mean", "same_top_pct"}


def parse_budget(raw: Any, problems: list[str]) -> QualityBudget:
    """Validate a plan's ``[quality_budget]`` table; each problem is appended as 'place: what is wrong'."""
    if raw is None:
        return QualityBudget()
    if not isinstance(raw, dict):
        problems.append("quality_budget: expected a table")
        return QualityBudget()
    for key in sorted(set(raw) - BUDGET_KEYS):
        allowed = ", ".join(sorted(BUDGET_KEYS))
        problems.append(f"quality_budget.{key}: unknown key (expected one of {allowed})")
    values: dict[str, float] = {}
    for key, lo, hi in (("kld_mean", 0.0, None), ("same_top_pct", 0.0, 100.0)):
        if key not in raw:
            continue
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"quality_budget.{key}: expected a number, got {value!r}")
        elif value < lo or (hi is not None and value > hi):
            bound = f"between {lo:g} and {hi:g}" if hi is not None else f">= {lo:g}"
            problems.append(f"quality_budget.{key}: must be {bound}, got {value}")
        else:
            values[key] = float(value)
    return QualityBudget(**values)


def budget_from_plan_text(text: str | None) -> QualityBudget:
    """The budget a stored sweep's plan set (its text is stored with the sweep); the default otherwise."""
    if not text:
        return QualityBudget()
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return QualityBudget()
    problems: list[str] = []
    budget = parse_budget(doc.get("quality_budget"), problems)
    return budget if not problems else QualityBudget()
