"""Stored verdicts read back for reports: one value per config, one line per verdict, columns of a row."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.storage.models import Verdict
from edgeprof.verdicts.store import ERROR_VALUE, VERDICT_KINDS

# Worst first: what a config's verdict is when its runs disagree. A verdict that raised (``error``) judged
# nothing: any judgement of another attempt says more, but it is shown before a clean bill of health.
SEVERITY: dict[str, tuple[str, ...]] = {
    "throttle": ("throttled", "slowdown_not_thermal", "inconclusive", ERROR_VALUE, "not_throttled"),
    "stability": ("unstable", "inconclusive", ERROR_VALUE, "stable"),
    "interference": ("contended", "inconclusive", ERROR_VALUE, "quiet"),
}


@dataclass(frozen=True)
class VerdictLikeRow:
    """A verdict not (yet) stored: the same fields ``config_verdict`` reads from ``Verdict``."""

    kind: str
    value: str
    evidence_json: str = "{}"


def config_verdict(verdicts: Iterable[Verdict | VerdictLikeRow]) -> dict[str, str | None]:
    """One value per kind for a config measured by several runs (attempts): the worst of them."""
    out: dict[str, str | None] = {kind: None for kind in VERDICT_KINDS}
    for v in verdicts:
        order = SEVERITY.get(v.kind)
        if order is None:
            continue
        cur = out.get(v.kind)
        rank = order.index(v.value) if v.value in order else len(order)
        if cur is None or rank < (order.index(cur) if cur in order else len(order)):
            out[v.kind] = v.value
    return out


def verdicts_by_run(session: Session, run_ids: Sequence[int]) -> dict[int, dict[str, Verdict]]:
    """run id -> kind -> its stored verdict (latest row per kind)."""
    out: dict[int, dict[str, Verdict]] = {}
    if not run_ids:
        return out
    for v in session.scalars(select(Verdict).where(Verdict.run_id.in_(run_ids)).order_by(Verdict.id)):
        out.setdefault(v.run_id, {})[v.kind] = v
    return out


def summary_line(verdict: Verdict | VerdictLikeRow) -> str:
    """``value: first reasons`` for tables and HTML."""
    try:
        evidence = json.loads(verdict.evidence_json)
    except ValueError:
        evidence = {}
    reasons = evidence.get("reasons") if isinstance(evidence, dict) else None
    text = "; ".join(str(r) for r in reasons[:3]) if isinstance(reasons, list) else ""
    return f"{verdict.value}: {text}" if text else verdict.value


def attach_verdicts(session: Session, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add ``throttle_verdict`` and ``stability_verdict`` (None where not judged) to report rows in place."""
    found = verdicts_by_run(session, [int(r["run_id"]) for r in rows])
    for row in rows:
        mine = found.get(int(row["run_id"]), {})
        row["throttle_verdict"] = mine["throttle"].value if "throttle" in mine else None
        row["stability_verdict"] = mine["stability"].value if "stability" in mine else None
        row["interference_verdict"] = mine["interference"].value if "interference" in mine else None
    return rows
