"""A serving level's stored memory prediction counts the server's slots (one per client, each with the plan's
ctx of KV): the sweep's prediction, the executor's budget and the server's command line agree on them, and
the report shows the prediction beside the level's peak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fakes import FakeRoot
from support.serving import serving_plan_toml

from edgeprof.executors.serving import kv_budget
from edgeprof.gguf import kv_bytes_per_cell, read_model_shape
from edgeprof.plan import expand, parse_plan
from edgeprof.storage.models import Run, ServingLevel
from edgeprof.sweep import FitChecker

pytestmark = pytest.mark.timeout(120)


def test_the_prediction_of_a_level_counts_its_slots(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    model = tiny_models["Q8_0"]
    plan = parse_plan(serving_plan_toml(model, conc=[1, 4]), str(tmp_path / "p.toml"), tmp_path)
    c1, c4 = expand(plan, {m.path: "0" * 64 for m in plan.models})
    assert (c1.params.concurrency, c4.params.concurrency) == (1, 4)
    FakeRoot(tmp_path).meminfo(MemAvailable=99999999)
    fit = FitChecker(tmp_path, gpu_offload=False)
    runs = [Run(), Run()]
    for run, spec in zip(runs, (c1, c4), strict=True):
        assert fit.assess(run, spec) is not None
    kv_mib = kv_bytes_per_cell(read_model_shape(str(model)), "f16", "f16") * c1.params.n_ctx / 2**20
    grown = (runs[1].mem_predicted_mb or 0) - (runs[0].mem_predicted_mb or 0)
    assert grown >= 3 * kv_mib * 0.99, (grown, kv_mib)  # three more slots of ctx each
    detail = json.loads(runs[1].mem_prediction_json or "{}")
    budget = kv_budget(c4, gpu_offload=False, root=str(tmp_path))
    assert budget["slots"] == 4 and budget["n_ctx_total"] == 4 * c4.params.n_ctx
    assert budget["prediction"]["kv_cpu_mb"] == pytest.approx(detail["kv_cpu_mb"], rel=1e-6)


def test_the_report_shows_the_prediction_beside_the_peak_of_a_level() -> None:
    from edgeprof.report.cells import fmt_memory
    from edgeprof.report.columns import shown
    from edgeprof.report.serving import serving_fields

    run = Run(runner="llama-server", concurrency=4, mem_predicted_mb=384.2, peak_rss_mb=375.0)
    level = ServingLevel(stats_json="{}", kv_budget_json=json.dumps({"predicted_mb": 380.0}))
    fields = serving_fields(run, level)
    assert fields["mem_predicted_mb"] == 384.2
    assert fmt_memory({**fields, "peak_rss_mb": 375.0}) == "384/375"
    run.mem_predicted_mb = None  # a run stored before the sweep predicted serving levels: the budget's
    assert serving_fields(run, level)["mem_predicted_mb"] == 380.0
    assert "mem" in [c.name for c in shown("table", "serving")]
