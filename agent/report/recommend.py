"""The answer: which variant to run here, per (model group, ctx, ngl, workload).

The fastest variant (steady tg_tps median) whose quality stays within the plan's budget (mean KLD and
same-top-token share against the group's reference, from a ``kind = "quality"`` workload) and that ran —
a config predicted not to fit is stored ``skipped_memory`` and is never a candidate — with the runner-up and
the evidence for both, one line each.

Rules, each for a reason:
- a variant without a quality measurement is not within the budget (unknown is not "good enough"); the
  reference is, by definition (KLD 0 against itself). Where no variant of a group has a quality
  measurement at all the line says so and falls back to speed alone, rather than recommending nothing;
- speed is compared on the medians; the min–max spread and n are printed so a reader can see when two
  variants overlap (the line then says "within noise").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from edgeprof.plan import QualityBudget


@dataclass
class Candidate:
    row: Mapping[str, Any]
    kld_mean: float | None
    same_top_pct: float | None
    is_reference: bool

    @property
    def label(self) -> str:
        return str(self.row["model_label"])


@dataclass
class Recommendation:
    model_group: str
    ctx: int
    ngl: int
    workload: str
    budget: QualityBudget
    best: Candidate | None
    runner_up: Candidate | None
    quality_known: bool
    excluded: list[str] = field(default_factory=list)

    def lines(self, show_group: bool = True) -> list[str]:
        where = f"ctx {self.ctx}, ngl {self.ngl}, {self.workload}"
        if show_group:
            where = f"{self.model_group}: {where}"
        if self.best is None:
            why = "; ".join(self.excluded) if self.excluded else "no variant ran"
            return [f"Recommendation ({where}): none — {why}"]
        rule = f"fastest within {self.budget.describe()} that fits in memory"
        if not self.quality_known:
            rule = 'fastest that fits in memory; quality NOT measured (add a kind = "quality" workload)'
        out = [f"Recommendation ({where}): {self.best.label} — {rule}"]
        out.append(f"  evidence: {evidence(self.best)}")
        if self.runner_up is not None:
            overlap = _overlap(self.best.row, self.runner_up.row)
            out.append(f"  runner-up: {evidence(self.runner_up)}{' (within noise)' if overlap else ''}")
        else:
            out.append("  runner-up: none within the budget")
        return out


def _overlap(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    if None in (a.get("tg_tps_min"), a.get("tg_tps_max"), b.get("tg_tps_min"), b.get("tg_tps_max")):
        return False
    return bool(a["tg_tps_min"] <= b["tg_tps_max"] and b["tg_tps_min"] <= a["tg_tps_max"])


def evidence(c: Candidate) -> str:
    r = c.row
    parts = [f"{c.label} ({r.get('quant') or '?'})"]
    if r.get("tg_tps_median") is not None:
        parts.append(
            f"tg {r['tg_tps_median']:.1f} t/s [{r['tg_tps_min']:.1f}–{r['tg_tps_max']:.1f}] n={r['tg_tps_n']}"
        )
    if c.is_reference and c.kld_mean is None:
        parts.append("reference (KLD 0)")
    elif c.kld_mean is not None:
        q = f"KLD {c.kld_mean:.4f}"
        if c.same_top_pct is not None:
            q += f", same-top {c.same_top_pct:.1f} %"
        parts.append(q + (" (reference)" if c.is_reference else ""))
    else:
        parts.append("quality not measured")
    mem = []
    if r.get("mem_predicted_mb") is not None:
        mem.append(f"≈ {r['mem_predicted_mb']:.0f} MiB predicted")
    if r.get("peak_rss_mb") is not None:
        mem.append(f"{r['peak_rss_mb']:.0f} MiB peak RSS")
    if mem:
        parts.append(", ".join(mem))
    if r.get("bw_pct") is not None:
        parts.append(f"{r['bw_pct']:.0f} % of measured bandwidth")
    return " · ".join(parts)


def _quality_of(
    row: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]
) -> tuple[float | None, float | None]:
    """The variant's quality: its own row's, else a quality row of the same model label (same ngl first)."""
    if row.get("kld_mean") is not None:
        return row["kld_mean"], row.get("same_top_pct")
    same = [
        r
        for r in rows
        if r.get("kld_mean") is not None
        and r["model_label"] == row["model_label"]
        and r["model_group"] == row["model_group"]
    ]
    same.sort(key=lambda r: (r["ngl"] != row["ngl"], r["ctx"] != row["ctx"], r["run_id"]))
    if not same:
        return None, None
    return same[0]["kld_mean"], same[0].get("same_top_pct")


def _is_speed_row(row: Mapping[str, Any]) -> bool:
    return row.get("kld_mean") is None or row.get("tg_tps_median") is not None


def recommend(rows: Sequence[Mapping[str, Any]], budget: QualityBudget | None = None) -> list[Recommendation]:
    """One recommendation per (model group, ctx, ngl, workload) of the speed rows, in the rows' order."""
    budget = budget or QualityBudget()
    keys: list[tuple[str, int, int, str]] = []
    groups: dict[tuple[str, int, int, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        if not _is_speed_row(row):
            continue  # a quality workload's own rows carry no speed to rank
        key = (str(row["model_group"]), int(row["ctx"]), int(row["ngl"]), str(row["workload"]))
        if key not in groups:
            keys.append(key)
            groups[key] = []
        groups[key].append(row)
    out: list[Recommendation] = []
    for key in keys:
        members = groups[key]
        cands: list[Candidate] = []
        for row in members:
            kld, top = _quality_of(row, rows)
            ref_label = row.get("quality_reference_label") or row.get("reference_label")
            is_ref = ref_label is not None and row["model_label"] == ref_label
            cands.append(Candidate(row, kld, top, is_ref))
        quality_known = any(c.kld_mean is not None for c in cands)
        excluded: list[str] = []
        eligible: list[Candidate] = []
        for c in cands:
            r = c.row
            if r["status"] != "ok" or r.get("tg_tps_median") is None:
                reason = r["status"] if r["status"] != "ok" else "no steady decode measured"
                excluded.append(f"{c.label}: {reason}" + (f" ({r['reason']})" if r.get("reason") else ""))
                continue
            if quality_known and not c.is_reference:
                if c.kld_mean is None:
                    excluded.append(f"{c.label}: quality not measured")
                    continue
                if c.kld_mean > budget.kld_mean or (
                    c.same_top_pct is not None and c.same_top_pct < budget.same_top_pct
                ):
                    top_s = f", same-top {c.same_top_pct:.1f} %" if c.same_top_pct is not None else ""
                    excluded.append(f"{c.label}: outside the quality budget (KLD {c.kld_mean:.4f}{top_s})")
                    continue
            eligible.append(c)
        eligible.sort(key=lambda c: -float(c.row["tg_tps_median"]))
        out.append(
            Recommendation(
                model_group=key[0],
                ctx=key[1],
                ngl=key[2],
                workload=key[3],
                budget=budget,
                best=eligible[0] if eligible else None,
                runner_up=eligible[1] if len(eligible) > 1 else None,
                quality_known=quality_known,
                excluded=excluded,
            )
        )
    return out


def mark_rows(rows: Sequence[dict[str, Any]], recs: Sequence[Recommendation]) -> None:
    """Set each row's ``recommendation``: "best", "runner_up" or None."""
    role: dict[int, str] = {}
    for rec in recs:
        if rec.best is not None:
            role[int(rec.best.row["run_id"])] = "best"
        if rec.runner_up is not None:
            role[int(rec.runner_up.row["run_id"])] = "runner_up"
    for row in rows:
        row["recommendation"] = role.get(int(row["run_id"]))


def render_recommendations(recs: Sequence[Recommendation]) -> list[str]:
    show_group = len({r.model_group for r in recs}) > 1
    lines: list[str] = []
    for rec in recs:
        lines += rec.lines(show_group=show_group)
    return lines
