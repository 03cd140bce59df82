"""A label is the user's text, never math (agent/report/figures/canvas.py ``plain_text``, used by the HTML
report for every figure): matplotlib reads a text with two ``$`` as mathtext, so a model called
``a$\\frac$b`` failed its whole figure and ``cost $5 or $6`` lost its dollars."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgeprof.report.figures import comparison_png, plain_text
from edgeprof.report.render.html import _figures_html

HOSTILE = ("a$\\frac$b", "cost $5 or $6", "$x^{$")


def rows() -> list[dict[str, object]]:
    base = {"quant": "Q4_K_M", "ctx": 512, "ngl": 0, "status": "ok", "workload": "w", "tg_tps_min": 9.0}
    return [
        {**base, "model_label": label, "run_id": i, "tg_tps_median": 10.0 + i, "tg_tps_max": 12.0}
        for i, label in enumerate(HOSTILE)
    ]


def test_a_label_with_dollars_is_drawn_as_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    with plain_text():
        comparison_png(rows(), tmp_path / "c.png")  # mathtext would raise on the first label
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_the_html_report_draws_every_figure_with_plain_text(tmp_path: Path) -> None:
    html = _figures_html([("Configs compared", lambda p: comparison_png(rows(), p))])
    assert "<img" in html and "figure not drawn" not in html, html[:300]
