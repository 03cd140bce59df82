"""``[serving] max_error_rate`` (the share of a level's requests that may fail with the level still ``ok``;
0 unless given, a share from 0 to 1) and ``prompt_cache`` (the issue's name for llama-server's
``cache_prompt``: one of the two); neither changes the spec ids of a plan that does not give it."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.serving import serving_plan_toml

from edgeprof.plan import PlanError, parse_plan

pytestmark = pytest.mark.timeout(60)


def parsed(tmp_path: Path, model: Path, **serving: object):
    return parse_plan(serving_plan_toml(model, conc=[1], **serving), base=tmp_path)


def test_max_error_rate_is_a_share_of_the_requests(tmp_path: Path, tiny_models) -> None:
    model = tiny_models["Q4_K_M"]
    plain = parsed(tmp_path, model)
    assert plain.serving is not None and plain.serving.max_error_rate is None
    assert "max_error_rate" not in plain.serving.to_json()  # earlier plans keep their spec ids
    for inside in (0, 0.25, 1):
        plan = parsed(tmp_path, model, max_error_rate=inside)
        assert plan.serving is not None and plan.serving.max_error_rate == inside
        assert plan.serving.to_json()["max_error_rate"] == inside
    for outside in (-0.01, 1.01, "none"):
        with pytest.raises(PlanError) as err:
            parsed(tmp_path, model, max_error_rate=outside)
        assert "serving.max_error_rate" in "\n".join(err.value.problems)


def test_prompt_cache_is_cache_prompt_by_its_other_name(tmp_path: Path, tiny_models) -> None:
    model = tiny_models["Q4_K_M"]
    plan = parsed(tmp_path, model, prompt_cache=True)
    assert plan.serving is not None and plan.serving.cache_prompt is True
    assert plan.serving.to_json() == parsed(tmp_path, model, cache_prompt=True).serving.to_json()  # type: ignore[union-attr]
    with pytest.raises(PlanError) as err:
        parsed(tmp_path, model, prompt_cache=True, cache_prompt=False)
    assert "give one of the two" in "\n".join(err.value.problems)
