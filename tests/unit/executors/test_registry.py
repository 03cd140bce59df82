"""The executor registry: every runner a plan may name has an executor and every executor a runner, a spec
and a stored run find the same one (by runner name and workload kind), and each executor's label and
progress summary read as the sweep has always printed them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.plans import plan_toml

from edgeprof.executors import (
    EXECUTOR_HOMES,
    InProcessExecutor,
    QualityExecutor,
    ServingExecutor,
    all_executors,
    executor_for,
    executor_of_run,
    executor_of_spec,
    workload_kind_of,
)
from edgeprof.plan import expand, parse_plan
from edgeprof.runners.registry import DEFAULT_RUNNER, RUNNERS, RunnerInfo
from edgeprof.storage.models import Measurement, Run

pytestmark = pytest.mark.timeout(60)


def _specs(tmp_path: Path, tiny_models: dict[str, Path]) -> list:
    """One model under every runner at concurrency 1 and 4, plus a quality workload."""
    text = plan_toml(
        {"q4": tiny_models["Q4_K_M"]},
        matrix={"runner": ["llama-cpp", "llama-server"], "concurrency": [1, 4], "request_rate": [2.5]},
        workloads=[
            {"name": "w", "prompt_tokens": 16, "n_predict": 8},
            {"name": "kld", "kind": "quality", "ctx": 64, "chunks": 1},
        ],
    )
    plan = parse_plan(text, source=str(tmp_path / "plan.toml"), base=tmp_path)
    return expand(plan, {m.path: "0" * 64 for m in plan.models})


def test_every_runner_has_one_executor_and_every_executor_a_runner() -> None:
    executors = all_executors()
    generation = {e.runner for e in executors if e.workload_kind == "generation"}
    assert generation == set(RUNNERS)
    assert {e.runner for e in executors} <= set(RUNNERS)
    keys = [(e.runner, e.workload_kind) for e in executors]
    assert len(keys) == len(set(keys))  # one executor per (runner, workload kind)
    # each line of the registry names the class whose hooks say the same runner and workload kind
    assert keys == list(EXECUTOR_HOMES)
    # The child side names nothing of the agent: a runner is a name, a scenario, its kind and what a
    # report says of its server.
    assert set(RunnerInfo.__dataclass_fields__) == {
        "name", "scenario", "kind", "endpoint", "chat", "title", "token_source"
    }


def test_a_spec_finds_its_executor_by_runner_and_workload_kind(tmp_path: Path, tiny_models) -> None:
    specs = _specs(tmp_path, tiny_models)
    found = [(s.params.runner, s.workload.kind, type(executor_of_spec(s))) for s in specs]
    assert found == [
        ("llama-cpp", "generation", InProcessExecutor),
        ("llama-server", "generation", ServingExecutor),
        ("llama-server", "generation", ServingExecutor),
        ("llama-cpp", "quality", QualityExecutor),
    ]


def test_a_stored_run_finds_the_executor_its_spec_had(tmp_path: Path, tiny_models) -> None:
    for spec in _specs(tmp_path, tiny_models):
        run = Run(runner=spec.params.runner, workload_json=json.dumps(spec.workload.to_json()))
        assert workload_kind_of(run) == spec.workload.kind
        assert executor_of_run(run) is executor_of_spec(spec)
    # Rows written before the runner column existed, or with no workload: the in-process generation one.
    assert type(executor_of_run(Run(runner=None, workload_json=None))) is InProcessExecutor
    assert type(executor_of_run(Run(runner=DEFAULT_RUNNER, workload_json="not json"))) is InProcessExecutor
    with pytest.raises(LookupError, match="no executor for runner 'vllm'"):
        executor_for("vllm")


def test_labels_name_the_runner_and_load_only_for_the_server(tmp_path: Path, tiny_models) -> None:
    inproc, c1, c4, quality = (executor_of_spec(s).label(s) for s in _specs(tmp_path, tiny_models))
    assert inproc == "q4 ctx=256 ngl=999 t=1 b=2048 fa=auto wl=w"
    assert c1 == inproc + " llama-server c=1 rate=2.5/s"
    assert c4 == inproc + " llama-server c=4 rate=2.5/s"
    assert quality.startswith("q4 ctx=64 ") and quality.endswith(" wl=kld") and "llama-server" not in quality


def test_the_in_process_summary_is_the_steady_reps_medians() -> None:
    run = Run(status="ok")
    run.measurements = [
        Measurement(kind="cold", rep=0, tg_tps=1.0, pp_tps=1.0),  # a cold rep is not a steady one
        Measurement(kind="steady", rep=0, tg_tps=10.0, pp_tps=100.0),
        Measurement(kind="steady", rep=1, tg_tps=12.0, pp_tps=None),
        Measurement(kind="steady", rep=2, tg_tps=20.0, pp_tps=300.0),
    ]
    assert InProcessExecutor().describe(None, run) == "ok  tg 12.0 t/s  pp 200.0 t/s"  # type: ignore[arg-type]
    assert InProcessExecutor().describe(None, Run(status="ok")) == "ok"  # type: ignore[arg-type]
