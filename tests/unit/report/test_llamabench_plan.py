"""A llama-bench command line as a plan built in code: one workload per test, timing exactly llama-bench's
tokens; the flags as matrix axes; llama-bench's repetitions; the command kept as the plan text (a TOML
comment). The model file is a GGUF written here in Python (no llama.cpp)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from edgeprof.gguf import write_f16_gguf
from edgeprof.plan import NGL_ALL, PlanError, expand
from edgeprof.report.llamabench import (
    BENCH_MARK,
    bench_plan,
    name_of_test,
    parse_bench_args,
    parse_test_name,
    workload_of_test,
)
from edgeprof.report.llamabench.identity import ctx_of_test
from edgeprof.runners.protocol import kv_cells

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


@pytest.mark.parametrize(
    ("n_prompt", "n_gen", "prompt_tokens", "n_predict", "name"),
    [
        # pp: the prefill of P tokens is the timed part; one token sampled from it, no decode step
        (512, 0, 512, 1, "pp512"),
        # tg: BOS as the one-token prompt, then N-1 decode steps: N single-token decodes, as llama-bench's
        (0, 128, 1, 128, "tg128"),
        # pp+tg: P prompt tokens, then N decode steps after the first sampled token
        (512, 128, 512, 129, "pp512+tg128"),
    ],
)
def test_each_test_times_llama_benchs_tokens(
    n_prompt: int, n_gen: int, prompt_tokens: int, n_predict: int, name: str
) -> None:
    wl = workload_of_test(n_prompt, n_gen)
    assert (wl.prompt_tokens, wl.n_predict, wl.name, wl.ignore_eos) == (prompt_tokens, n_predict, name, True)
    assert name_of_test(n_prompt, n_gen) == name and parse_test_name(name) == (n_prompt, n_gen)


@pytest.mark.parametrize(
    ("n_prompt", "n_gen", "depth"), [(512, 0, 0), (0, 128, 0), (0, 256, 0), (512, 128, 4096)]
)
def test_the_request_of_a_test_fills_exactly_llama_benchs_context(
    n_prompt: int, n_gen: int, depth: int
) -> None:
    # p + n + d cells: a cell more (pp512 asking 513) would pad to 768 where llama-bench runs at 512
    wl = workload_of_test(n_prompt, n_gen)
    assert wl.prompt_tokens is not None and wl.ctx_fit
    assert kv_cells(depth, wl.prompt_tokens, wl.n_predict) == ctx_of_test(n_prompt, n_gen, depth)
    assert ctx_of_test(n_prompt, n_gen, depth) == n_prompt + n_gen + depth


@pytest.mark.parametrize("name", ["w", "pp", "pp12+", "+tg3", "tg4+pp2", "pp1tg2"])
def test_other_workload_names_are_no_test(name: str) -> None:
    assert parse_test_name(name) is None


def test_the_plan_crosses_every_flag_like_llama_bench(tmp_path: Path) -> None:
    model = write_f16_gguf(tmp_path / "m.gguf")
    argv = ["-m", "m.gguf", "-p", "64", "-n", "16", "-pg", "32,8", "-t", "1,2", "-d", "0,100", "-r", "3",
            "-ngl", "-1,0", "-fa", "on", "-ub", "256"]  # fmt: skip
    plan = bench_plan(parse_bench_args(argv), base=tmp_path)
    assert [m.label for m in plan.models] == ["m.gguf"] and plan.models[0].path == str(model)
    assert [w.name for w in plan.workloads] == ["pp64", "tg16", "pp32+tg8"]
    assert plan.axes["threads"] == (1, 2) and plan.axes["depth"] == (0, 100)
    assert plan.axes["ngl"] == (NGL_ALL, 0) and plan.axes["flash_attn"] == ("on",)
    assert plan.axes["n_ubatch"] == (256,) and plan.axes["n_batch"] == (2048,)
    assert plan.axes["ctx"] == (100 + 64,)  # the largest test context: pp64 at depth 100
    assert (plan.repeat.cold, plan.repeat.warmup, plan.repeat.steady) == (1, 1, 3)
    assert plan.n_specs() == 3 * 2 * 2 * 2
    specs = expand(plan, {str(model): "0" * 64})
    assert len(specs) == plan.n_specs() and len({s.spec_id for s in specs}) == len(specs)
    # each test at its own context, p + n + d, as llama-bench sizes it: never one for the whole command
    contexts = {(s.workload.name, s.params.depth): s.params.n_ctx for s in specs}
    assert contexts == {("pp64", 0): 64, ("pp64", 100): 164, ("tg16", 0): 16, ("tg16", 100): 116,
                        ("pp32+tg8", 0): 40, ("pp32+tg8", 100): 140}  # fmt: skip
    assert plan.text.startswith(BENCH_MARK) and "-pg 32,8" in plan.text
    assert tomllib.loads(plan.text) == {}  # a reader of plan_text that parses TOML sees an empty plan


def test_an_unreadable_model_is_a_plan_error(tmp_path: Path) -> None:
    (tmp_path / "bad.gguf").write_text("not a gguf")
    with pytest.raises(PlanError) as exc:
        bench_plan(parse_bench_args(["-m", "bad.gguf,none.gguf"]), base=tmp_path)
    assert [p.split(":")[0] for p in exc.value.problems] == ["-m bad.gguf", "-m none.gguf"]
