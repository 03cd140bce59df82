"""What a bad plan is told: the problems ``parse_plan`` raises, each checked to be 'place: what is wrong'.

    only_problem(plan_toml([missing]))  ->  "matrix.models[0]: /…/missing.gguf: no such file"
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edgeprof.plan import PlanError, parse_plan


def problems(text: str, base: Path | None = None, system: Any = None) -> list[str]:
    """Every problem of a plan that must not validate, in the order validation found them."""
    with pytest.raises(PlanError) as info:
        parse_plan(text, source="p.toml", base=base, system=system)
    assert info.value.problems, "PlanError without problems"
    assert info.value.lines() == [f"p.toml: {p}" for p in info.value.problems]
    return info.value.problems


def only_problem(text: str, base: Path | None = None) -> str:
    """The one problem of a plan that has exactly one."""
    found = problems(text, base)
    assert len(found) == 1, found
    return found[0]
