"""Report fields of the quality runs (issue 9): KLD, same top token and perplexity vs the reference.

A quality run's own row carries its figures; every speed row of the same model label in the sweep carries
the same figures too (``quality_run_id`` says which run they come from), so that "Q4_K_M: 31 t/s, KLD 0.03,
same top 92 %" reads on one line and a recommendation can weigh speed against quality per row.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.storage.models import QualityResult

# (report field, QualityResult column or None, JSON type); appended to the report's fields in this order.
_MAP: tuple[tuple[str, str, str], ...] = (
    ("kld_mean", "kld_mean", "number|null"),
    ("kld_se", "kld_se", "number|null"),
    ("kld_median", "kld_median", "number|null"),
    ("kld_p90", "kld_p90", "number|null"),
    ("kld_p95", "kld_p95", "number|null"),
    ("kld_p99", "kld_p99", "number|null"),
    ("kld_max", "kld_max", "number|null"),
    ("same_top_pct", "same_top_pct", "number|null"),
    ("dp_top_mean", "dp_top_mean", "number|null"),
    ("dp_top_p99", "dp_top_p99", "number|null"),
    ("ppl", "ppl", "number|null"),
    ("ppl_se", "ppl_se", "number|null"),
    ("ppl_ref", "ppl_ref", "number|null"),
    ("ppl_ref_se", "ppl_ref_se", "number|null"),
    ("delta_ppl", "delta_ppl", "number|null"),
    ("delta_ppl_se", "delta_ppl_se", "number|null"),
    ("ln_ppl_ratio", "ln_ppl_ratio", "number|null"),
    ("ln_ppl_ratio_se", "ln_ppl_ratio_se", "number|null"),
    ("quality_n_tokens", "n_tokens", "integer|null"),
    ("quality_ctx", "ctx", "integer|null"),
    ("quality_chunks", "n_chunks", "integer|null"),
    ("quality_text_sha256", "text_sha256", "string|null"),
    ("quality_reference_label", "reference_label", "string|null"),
)

QUALITY_FIELDS: tuple[tuple[str, str], ...] = (
    *((name, kind) for name, _col, kind in _MAP),
    ("quality_run_id", "integer|null"),
)


def _values(qr: QualityResult | None, run_id: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {name: (getattr(qr, col) if qr is not None else None) for name, col, _k in _MAP}
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
    for row in rows:
        rid = int(row["run_id"])
        if rid in results and row["status"] == "ok":
            by_label.setdefault(row["model_label"], rid)  # the first quality workload in plan order
    for row in rows:
        rid = int(row["run_id"])
        if rid in results:
            row.update(_values(results[rid], rid))
            continue
        source = by_label.get(row["model_label"])
        row.update(_values(results.get(source) if source is not None else None, source))


def fmt_quality(row: dict[str, Any]) -> str:
    """'KLD 0.0312 / 92.1 %' for a table cell; 'reference' for the reference itself; '—' when none."""
    if row.get("kld_mean") is None:
        return "—"
    if row.get("quality_reference_label") == row.get("model_label"):
        return "reference"
    return f"{row['kld_mean']:.4f} / {row['same_top_pct']:.1f}%"
