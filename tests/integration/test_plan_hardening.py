"""Bounded plans (agent/plan/bounds.py, agent/plan/parse.py): every number has a ceiling and is refused
with its place, a ctx beyond the model's training needs explicit permission, a huge matrix needs
max_configs and is never expanded, and an oversized plan file is refused before parsing. Real tiny models
(the trained context is read from them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.runs import edgeprof, one_line_error

from edgeprof.plan import PlanError, parse_plan

# Placeholders instead of the plan builder: these plans put keys where a test needs them, including
# tables the builder always writes itself ([run], [repeat]).
BASE = """
name = "b"
[matrix]
models = ["{q4}"]
{matrix}
[[workload]]
name = "w"
prompt_tokens = 8
n_predict = 8
{workload}
{rest}
"""


def bad(models: dict[str, Path], matrix: str = "", workload: str = "", rest: str = "") -> list[str]:
    text_ = BASE.format(q4=models["Q4_K_M"], matrix=matrix, workload=workload, rest=rest)
    with pytest.raises(PlanError) as info:
        parse_plan(text_, source="p.toml")
    return info.value.problems


@pytest.mark.parametrize(
    ("matrix", "rest", "place"),
    [
        ("", "[run]\ntimeout_s = nan", "run.timeout_s"),
        ("", "[collect]\nidle_s = inf", "collect.idle_s"),
        ("", "[cooldown]\ndelay_s = 1e12", "cooldown.delay_s"),
        ("ctx = [4294967424]", "", "matrix.ctx[0]"),
        ("ctx = [1000000000]", "", "matrix.ctx[0]"),
        ("ctx = [4096]", "", "matrix.ctx"),  # the tiny model is trained for 2048
        ("", "[repeat]\nsteady = 1000000000", "repeat.steady"),
        ("threads = [100000]", "", "matrix.threads[0]"),
        ("n_batch = [100000000]", "", "matrix.n_batch[0]"),
    ],
)
def test_out_of_bounds_numbers_are_refused_with_their_place(
    tiny_models: dict[str, Path], matrix: str, rest: str, place: str
) -> None:
    problems = bad(tiny_models, matrix=matrix, rest=rest)
    assert any(p.startswith(place + ":") for p in problems), problems


def test_ctx_beyond_the_trained_context_needs_explicit_permission(tiny_models: dict[str, Path]) -> None:
    text_ = BASE.format(
        q4=tiny_models["Q4_K_M"],
        matrix="ctx = [4096]",
        workload="",
        rest="[run]\nallow_ctx_beyond_train = true",
    )
    assert parse_plan(text_, source="p.toml").axes["ctx"] == (4096,)


def test_a_huge_matrix_needs_max_configs_and_is_never_expanded(tiny_models: dict[str, Path]) -> None:
    matrix = f"ctx = {list(range(1048, 2048))}\nn_batch = {list(range(1, 10001))}\nmmap = [true, false]"
    problems = bad(tiny_models, matrix=matrix + '\nflash_attn = ["on", "off", "auto"]\nn_ubatch = [1]')
    assert any(p.startswith("matrix:") and "max_configs" in p for p in problems), problems
    # Under the limit, or with an explicit max_configs, it validates.
    ok = BASE.format(q4=tiny_models["Q4_K_M"], matrix="ctx = [512, 1024]", workload="", rest="")
    assert parse_plan(ok, source="p.toml").n_specs() == 2
    few = BASE.format(
        q4=tiny_models["Q4_K_M"], matrix="ctx = [512, 1024]", workload="", rest="[run]\nmax_configs = 1"
    )
    with pytest.raises(PlanError, match="max_configs"):
        parse_plan(few, source="p.toml")


def test_a_plan_file_over_the_size_limit_is_refused_before_parsing(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    big.write_bytes(b"# " + b"x" * (1 << 20) + b"\n[[[not toml")
    proc = edgeprof("run", str(big), "--check")
    assert "at most" in one_line_error(proc)
