"""Plan validation without a model file to read: every problem named with its place, all at once, in the
order of the plan's tables. The validation of plans with real models and their expansion are in
tests/integration/test_plan_models.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.plan_problems import only_problem, problems
from support.plans import plan_toml

from edgeprof.plan import PlanError, load_plan


def test_missing_model_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.gguf"
    msg = only_problem(plan_toml([missing]))
    assert msg == f"matrix.models[0]: {missing}: no such file"


def test_glob_matching_nothing(tmp_path: Path) -> None:
    msg = only_problem(plan_toml(["*.nomatch.gguf"]), base=tmp_path)
    assert msg == "matrix.models[0]: no file matches '*.nomatch.gguf'"


def test_text_file_is_not_gguf(tmp_path: Path) -> None:
    text = tmp_path / "notes.gguf"
    text.write_text("hello, this is not a model\n")
    msg = only_problem(plan_toml([text]))
    assert msg.startswith(f"matrix.models[0]: {text}: not a GGUF file")


def test_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    msg = only_problem(plan_toml([empty]))
    assert msg == f"matrix.models[0]: {empty}: not a GGUF file (only 0 bytes)"


def test_malformed_toml() -> None:
    msg = only_problem('name = "x"\n[matrix\nctx = 1\n')
    assert msg.startswith("malformed TOML: ")


def test_several_errors_are_all_reported_at_once(tmp_path: Path) -> None:
    text = """\
nmae = "typo"

[matrix]
models = ["missing.gguf"]
ctx = "big"
ngl = -1

[[workload]]
name = "w"
prompt_tokens = 8

[repeat]
steady = 0
"""
    found = problems(text, base=tmp_path)
    assert len(found) == 6, found
    places = [p.split(": ", 1)[0] for p in found]
    assert sorted(places) == sorted(
        ["nmae", "matrix.ctx", "matrix.ngl", "matrix.models[0]", "workload[0]", "repeat.steady"]
    )


def test_problems_come_in_the_order_of_the_validation_steps(tmp_path: Path) -> None:
    # One wrong value in each table, the tables written in another order than validation takes them: the
    # list follows the steps (top level, matrix axes, models, workloads, repeat, run, quality budget, power
    # mode, cold cache, cooldown, collect, schedule, then the cross-field checks and the ceilings), so the
    # same plan always gets the same list, and `run --check` output stays comparable between versions.
    text = """\
nmae = "typo"

[schedule]
when = "now"

[collect]
interval_ms = 10

[cooldown]
delay_s = -1

[run]
cold_cache = "warm"
timeout_s = 0
allow_power_mode_change = "yes"
max_configs = 0

[quality_budget]
kld_mean = -1
min_reps = 0

[repeat]
steady = 0

[[workload]]
name = "w"
prompt_tokens = 8
n_predict = 600

[matrix]
models = ["missing.gguf"]
ngl = -1
ctx = 512
n_batch = 128
n_ubatch = 256
"""
    assert [p.split(": ", 1)[0] for p in problems(text, base=tmp_path)] == [
        "nmae",
        "matrix.ngl",
        "matrix.models[0]",
        "repeat.steady",
        "run.timeout_s",
        "quality_budget.kld_mean",
        "quality_budget.min_reps",
        "run.allow_power_mode_change",
        "run.cold_cache",
        "cooldown.delay_s",
        "collect.interval_ms",
        "schedule.when",
        "matrix.n_ubatch[0]",
        "workload 'w'",
        "run.max_configs",
    ]


def test_load_plan_missing_and_directory(tmp_path: Path) -> None:
    with pytest.raises(PlanError) as info:
        load_plan(tmp_path / "absent.toml")
    assert info.value.lines() == [f"{tmp_path / 'absent.toml'}: no such plan file"]
    with pytest.raises(PlanError) as info:
        load_plan(tmp_path)
    assert info.value.problems == ["is a directory, not a plan file"]
