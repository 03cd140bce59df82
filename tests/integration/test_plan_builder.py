"""The tests' plan builder renders plans the real parser accepts, with what the test asked for."""

from __future__ import annotations

import sys
from pathlib import Path

from support.plans import plan_toml

from edgeprof.plan import parse_plan

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def test_defaults_parse_into_one_small_config(tiny_models: dict[str, Path]) -> None:
    plan = parse_plan(plan_toml({"q8": tiny_models["Q8_0"]}), source="t.toml")
    assert plan.n_specs() == 1
    assert [m.label for m in plan.models] == ["q8"]


def test_what_the_test_asks_for_is_in_the_plan() -> None:
    doc = tomllib.loads(
        plan_toml(
            ["/m/a.gguf", {"path": "/m/b.gguf", "label": "b"}],
            ctx=[256, 512],
            matrix={"ngl": [0], "runner": ["llama-server"]},
            workloads=[
                {"name": "chat", "messages": [{"role": "user", "content": 'say "hi"'}], "n_predict": 4}
            ],
            repeat={"steady": 5},
            run={"timeout_s": 30},
            tables={"serving": {"requests": 3}},
        )
    )
    assert doc["matrix"]["models"] == ["/m/a.gguf", {"path": "/m/b.gguf", "label": "b"}]
    assert doc["matrix"]["ctx"] == [256, 512] and doc["matrix"]["runner"] == ["llama-server"]
    assert doc["workload"][0]["messages"][0]["content"] == 'say "hi"'
    assert doc["repeat"] == {"cold": 1, "warmup": 1, "steady": 5}
    assert doc["run"] == {"timeout_s": 30} and doc["serving"] == {"requests": 3}


def test_no_idle_baseline_or_cooldown_unless_the_test_asks_for_one(tiny_models: dict[str, Path]) -> None:
    # the plan's own defaults wait 3 s before every config of a CLI sweep; a test pays only what it names
    plain = parse_plan(plan_toml({"q8": tiny_models["Q8_0"]}), source="t.toml")
    assert plain.collect.idle_s == 0.0
    assert plain.cooldown.below_c is None and plain.cooldown.delay_s == 0.0
    asked = parse_plan(
        plan_toml(
            {"q8": tiny_models["Q8_0"]},
            tables={
                "collect": {"interval_ms": 50, "idle_s": 0.5},
                "cooldown": {"delay_s": 1.5, "per_rep": True},
            },
        ),
        source="t.toml",
    )
    assert (asked.collect.interval_ms, asked.collect.idle_s) == (50, 0.5)
    assert (asked.cooldown.delay_s, asked.cooldown.per_rep) == (1.5, True)
