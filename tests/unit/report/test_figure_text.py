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


def test_the_pareto_log_axis_ticks_read_as_numbers_while_labels_stay_literal() -> None:
    """Math parsing is off for labels, and matplotlib's log tick labels are mathtext: they printed as
    ``$\\mathdefault{10^{-1}}$``. The symlog axis's ticks are drawn as plain numbers ('10⁻¹')."""
    pytest.importorskip("matplotlib")
    from edgeprof.report.figures import speed_vs_kld_figure

    base = {"ctx": 512, "status": "ok", "quant": "Q4_K_M", "same_top_pct": 97.0, "workload": "w"}
    rows = [
        {**base, "model_label": "cost $5 or $6", "kld_mean": 0.0, "tg_tps_median": 10.0},
        {**base, "model_label": "b", "kld_mean": 0.004, "tg_tps_median": 14.0},
        {**base, "model_label": "c", "kld_mean": 0.2, "tg_tps_median": 20.0},
    ]
    with plain_text():
        fig = speed_vs_kld_figure(rows)
        assert fig is not None
        fig.canvas.draw()
    texts = [t.get_text() for ax in fig.axes for t in ax.get_xticklabels() if t.get_text()]
    assert texts and not [t for t in texts if "$" in t or "mathdefault" in t], texts
    assert {"10⁻⁴", "10⁻²", "10⁻¹"} <= set(texts), texts
    names = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert any(n.startswith("cost $5 or $6") for n in names)  # the user's label as written
