"""A foreign server's row in the quality column: its logits are out of reach, so the cell says why rather than
leave the blank that means "not run" (and never a 0 that would read as a perfect match)."""

from __future__ import annotations

from edgeprof.report.cells import FOREIGN_QUALITY, fmt_quality


def test_an_openai_row_says_quality_is_not_measured_on_a_foreign_server() -> None:
    assert fmt_quality({"runner": "openai", "kld_mean": None}) == FOREIGN_QUALITY
    assert FOREIGN_QUALITY == "not measured: foreign server"
    assert fmt_quality({"runner": "llama-server", "kld_mean": None}) == "—"  # the others as before
    row = {"runner": "llama-cpp", "kld_mean": 0.01, "same_top_pct": 99.0, "model_label": "q4"}
    assert fmt_quality(row).startswith("0.0100 / 99.0%")
