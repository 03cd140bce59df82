"""The report of a sweep with a depth axis, on a real tiny generated GGUF (synthetic weights and label): the
table, Markdown and HTML show tg t/s and TTFT against context depth, and the depth fill is its own phase."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from sqlalchemy import select
from support.plans import plan_toml

from edgeprof.gguf import write_f16_gguf
from edgeprof.plan import parse_plan
from edgeprof.report import FIELD_NAMES, build_rows, render_html, render_markdown, render_table
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Run
from edgeprof.sweep import env_without_fault, run_plan

pytestmark = [pytest.mark.llama, pytest.mark.timeout(300)]


def test_report_and_html_plot_tg_and_ttft_against_depth(tmp_path: Path) -> None:
    model = write_f16_gguf(tmp_path / "plain-synthetic.gguf")
    text = plan_toml(
        {"plain-synth": model},
        ctx=[512],
        matrix={"depth": [0, 128]},
        workloads=[{"name": "s", "prompt_tokens": 16, "n_predict": 6}],
        repeat={"cold": 1, "warmup": 0, "steady": 2},
        run={"timeout_s": 120},
    )
    plan = parse_plan(text, source=str(tmp_path / "plan.toml"), base=tmp_path)
    engine = open_engine(f"sqlite:///{tmp_path / 'depth.db'}")
    outcome = run_plan(engine, plan, out=io.StringIO(), env=env_without_fault())
    assert outcome.counts == {"ok": 2}
    with new_session(engine) as s:
        rows = build_rows(s, outcome.sweep_id)
        assert [r["depth"] for r in rows] == [0, 128]
        assert rows[1]["kv_used_cells"] == rows[0]["kv_used_cells"] + 128
        table = render_table(rows)
        assert "tg t/s and TTFT against context depth" in table and "depth    128" in table
        assert "depth    128" in render_markdown(rows)
        html = render_html(s, outcome.sweep_id)
        fills = {
            (r.depth, ph.kind)
            for r in s.scalars(select(Run)).all()
            for ph in r.phases
            if ph.name == "depth_fill"
        }
    assert "tg t/s and TTFT against depth" in html
    # the fill is its own phase, once per process (cold; then the warm-up/steady child restores it)
    assert fills == {(128, "cold")}
    assert set(FIELD_NAMES) <= set(rows[0])
