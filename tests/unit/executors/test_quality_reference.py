"""A quality plan as the quality executor reads it: once per model, never the text in the spec, every
problem listed; the reference variant is the one with the most bits per weight, unless the plan names it."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.plans import plan_toml
from support.quality import quality_plan, quality_plan_toml

from edgeprof.executors import reference_entry
from edgeprof.plan import PlanError, expand, parse_plan

pytestmark = pytest.mark.timeout(60)


def test_quality_plan_validation(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    plan = quality_plan(tmp_path, tiny_models)
    specs = expand(plan, {m.path: "0" * 64 for m in plan.models})
    assert len(specs) == 3 and plan.n_specs() == 3  # once per model, not per matrix cell
    assert all(s.params.n_ctx == 64 and s.params.n_batch == 64 for s in specs)
    assert "text" not in specs[0].workload.to_json()["quality"]  # its hash, not the text
    bad = quality_plan_toml(tiny_models, reference="nope", bogus=1)
    with pytest.raises(PlanError) as err:
        parse_plan(bad, source="p.toml", base=tmp_path)
    text = "; ".join(err.value.problems)
    assert "no model labelled 'nope'" in text and "bogus" in text


def test_reference_is_the_most_bits_per_weight_from_tensor_sizes_unless_named(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    models = [{"path": str(tiny_models[q]), "label": q[:2].lower()} for q in ("Q4_K_M", "Q8_0", "Q5_K_M")]

    def plan_with(**reference: str):
        workload = {"name": "kld", "kind": "quality", "ctx": 64, **reference}
        return parse_plan(plan_toml(models, workloads=[workload]), source="p.toml", base=tmp_path)

    plan = plan_with()
    q4 = plan.models[0]
    info = {m.label: plan.model_info[m.path] for m in plan.models}
    bpw = {label: i.tensor_bits_per_weight or 0.0 for label, i in info.items()}
    assert bpw["q8"] > bpw["q5"] > bpw["q4"] > 0
    wl = plan.workloads[0].quality
    assert wl is not None and reference_entry(plan, q4, wl).label == "q8"
    named = plan_with(reference="q5")
    assert named.workloads[0].quality is not None
    assert reference_entry(named, q4, named.workloads[0].quality).label == "q5"
