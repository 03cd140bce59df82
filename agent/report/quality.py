"""Report fields of the quality runs: KLD, same top token and perplexity vs the reference.

A quality run's own row carries its figures; every speed row of the same model label in the sweep carries
the figures of one of them too (``quality_run_id`` says which run, ``quality_ctx`` at which ctx it scored:
the one at the row's own ctx where the sweep has it), so that "Q4_K_M: 31 t/s, KLD 0.03, same top 92 %"
reads on one line and a recommendation can weigh speed against quality per row.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.storage.models import QualityResult

# report field -> the QualityResult column it is read from (the fields' types: edgeprof.report.columns).
_MAP: tuple[tuple[str, str], ...] = (
    ("kld_mean", "kld_mean"),
    ("kld_se", "kld_se"),
    ("kld_median", "kld_median"),
    ("kld_p90", "kld_p90"),
    ("kld_p95", "kld_p95"),
    ("kld_p99", "kld_p99"),
    ("kld_max", "kld_max"),
    ("same_top_pct", "same_top_pct"),
    ("dp_top_mean", "dp_top_mean"),
    ("dp_top_p99", "dp_top_p99"),
    ("ppl", "ppl"),
    ("ppl_se", "ppl_se"),
    ("ppl_ref", "ppl_ref"),
    ("ppl_ref_se", "ppl_ref_se"),
    ("delta_ppl", "delta_ppl"),
    ("delta_ppl_se", "delta_ppl_se"),
    ("ln_ppl_ratio", "ln_ppl_ratio"),
    ("ln_ppl_ratio_se", "ln_ppl_ratio_se"),
    ("quality_n_tokens", "n_tokens"),
    ("quality_ctx", "ctx"),
    ("quality_chunks", "n_chunks"),
    ("quality_text_sha256", "text_sha256"),
    ("quality_reference_label", "reference_label"),
)


def _values(qr: QualityResult | None, run_id: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {name: (getattr(qr, col) if qr is not None else None) for name, col in _MAP}
    out["quality_run_id"] = run_id if qr is not None else None
    return out


def attach_quality(session: Session, rows: list[dict[str, Any]]) -> None:
    """Fill the quality fields of every row (NULL where the sweep has no quality run for the model)."""
    run_ids = [int(r["run_id"]) for r in rows]
    results: dict[int, QualityResult] = {}
    if run_ids:
        for qr in session.scalars(
            select(QualityResult).where(QualityResult.run_id.in_(run_ids)).order_by(QualityResult.id)
        ):
            results[qr.run_id] = qr  # the last one written for a run speaks
    by_label: dict[str, int] = {}
    by_label_ctx: dict[tuple[str, int], int] = {}
    for row in rows:
        rid = int(row["run_id"])
        if rid in results and row["status"] == "ok":
            # the first quality workload in plan order, and the first that scored at each ctx
            by_label.setdefault(row["model_label"], rid)
            by_label_ctx.setdefault((row["model_label"], results[rid].ctx), rid)
    for row in rows:
        rid = int(row["run_id"])
        if rid in results:
            row.update(_values(results[rid], rid))
            continue
        # a speed row carries the quality run that scored at its own ctx, where there is one; else the
        # first one, and its cells then say at which ctx it was measured (quality_ctx)
        source = by_label_ctx.get((row["model_label"], row["ctx"]), by_label.get(row["model_label"]))
        row.update(_values(results.get(source) if source is not None else None, source))
