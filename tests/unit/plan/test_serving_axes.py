"""The plan's serving axes: the runner axis keeps the spec ids plans had before it, crosses the load levels
only with the server, and a bad serving plan lists every problem at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.plans import plan_toml
from support.serving import serving_plan_toml

from edgeprof.plan import PlanError, expand, parse_plan

pytestmark = pytest.mark.timeout(60)


def test_the_runner_axis_keeps_old_spec_ids_and_crosses_levels_only_with_the_server(
    tmp_path: Path, tiny_models
) -> None:
    model = tiny_models["Q4_K_M"]
    workload = {"name": "w", "prompt_tokens": 16, "n_predict": 8}

    def axis(**matrix: Any):
        text = plan_toml({"q4": model}, name="serve", ctx=[128], matrix=matrix, workloads=[workload])
        return parse_plan(text, base=tmp_path)

    plain = axis()
    explicit = axis(runner=["llama-cpp"])
    sha = {m.path: "0" * 64 for m in plain.models}
    ids = [s.spec_id for s in expand(plain, sha)]
    assert ids == [s.spec_id for s in expand(explicit, sha)]
    assert "runner" not in expand(plain, sha)[0].params.to_json()
    both = axis(runner=["llama-cpp", "llama-server"], concurrency=[1, 4])
    specs = expand(both, sha)
    assert both.n_specs() == len(specs) == 3  # in-process once, the server at c = 1 and c = 4
    assert [s.params.runner for s in specs] == ["llama-cpp", "llama-server", "llama-server"]
    assert specs[0].spec_id == ids[0]
    assert len({s.spec_id for s in specs}) == 3


def test_bad_serving_plans_list_every_problem(tmp_path: Path, tiny_models) -> None:
    model = tiny_models["Q4_K_M"]
    text = serving_plan_toml(model, conc=[0, 2], requests=0, req_timeout=-1, runner=["llama-server", "vllm"])
    with pytest.raises(PlanError) as err:
        parse_plan(text, base=tmp_path)
    joined = "\n".join(err.value.problems)
    needles = ("matrix.runner[1]", "matrix.concurrency[0]", "serving.requests", "serving.request_timeout_s")
    for needle in needles:
        assert needle in joined
    no_server = serving_plan_toml(model, conc=[1], requests=2, req_timeout=5, ready_timeout=5, runner=None)
    with pytest.raises(PlanError) as err:
        parse_plan(no_server, base=tmp_path)
    assert any("needs a serving runner" in p for p in err.value.problems)
