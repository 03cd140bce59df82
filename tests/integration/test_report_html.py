"""The HTML report of one real tiny sweep (the demo GGUFs, synthetic weights) with a failing config: the
failure's reason escaped on the page, both figures embedded, nothing fetched from anywhere."""

from __future__ import annotations

import html
import io
import os
import re
from pathlib import Path

import pytest
from sqlalchemy import select
from support.plans import plan_toml

from edgeprof.plan import Collect, Cooldown, parse_plan
from edgeprof.report import render_html
from edgeprof.report.figures import timeline_png
from edgeprof.runners import FAULT_ENV
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Run
from edgeprof.sweep import Telemetry, run_plan
from edgeprof.verdicts import analyse_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.llama
def test_html_of_a_real_tiny_sweep_with_a_failing_config(tmp_path: Path, tiny_models) -> None:
    text = plan_toml(
        [tiny_models["Q4_K_M"], tiny_models["Q8_0"]],
        workloads=[{"name": "w", "prompt_tokens": 16, "n_predict": 32}],
        repeat={"warmup": 0, "steady": 3},
        run={"timeout_s": 120},
    )
    plan = parse_plan(text, str(tmp_path / "p.toml"), tmp_path)
    engine = open_engine(tmp_path / "real.db")
    root = tmp_path / "no-sensors"
    root.mkdir()

    def factory(sweep_id: int) -> Telemetry:
        return Telemetry(engine, sweep_id, Collect(interval_ms=50, idle_s=0.1), Cooldown(), root=root)

    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    env[FAULT_ENV] = "exit@load:q8_0"
    outcome = run_plan(engine, plan, out=io.StringIO(), telemetry=factory, env=env)
    assert outcome.counts.get("ok") == 1 and sum(outcome.counts.values()) == 2
    with new_session(engine) as s:
        runs = list(s.scalars(select(Run)))
        for run in runs:
            analyse_run(s, run.id)
        page = render_html(s, outcome.sweep_id)
        png = timeline_png(s, outcome.sweep_id, tmp_path / "t.png").read_bytes()
    assert png[:8] == PNG_MAGIC and len(png) > 10_000
    failed = [r for r in runs if r.status != "ok"]
    assert len(failed) == 1 and failed[0].reason
    assert html.escape(failed[0].reason, quote=True) in page
    assert "edgeprof-demo-tiny-q4_k_m" in page
    assert page.count('src="data:image/png;base64,') == 2
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page, re.I)
