"""The openai runner's plan checks: the target is an http(s) URL with host and port, the model file is
optional (the server's URL stands in for it), the keys belong to that runner, and the workloads fit the
endpoint. Pure: no model file is read, nothing is started."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.serving import foreign_plan_toml

from edgeprof.plan import PlanError, expand, is_server_entry, parse_plan


def problems(text: str, tmp_path: Path) -> list[str]:
    with pytest.raises(PlanError) as err:
        parse_plan(text, source="plan.toml", base=tmp_path)
    return err.value.problems


def test_a_plan_without_models_measures_the_target(tmp_path: Path) -> None:
    plan = parse_plan(foreign_plan_toml("http://u:pw@127.0.0.1:8080", "completions"), base=tmp_path)
    (model,) = plan.models
    assert model.path == "http://127.0.0.1:8080" and model.label == "127.0.0.1:8080"  # no credentials
    assert is_server_entry(model.path) and plan.runners == ("openai",)
    assert plan.serving is not None and plan.serving.endpoint == "completions"
    specs = expand(plan, {model.path: "0" * 64})
    assert [(s.params.runner, s.params.concurrency) for s in specs] == [("openai", 1), ("openai", 2)]
    assert specs[0].job()["serving"]["target"] == "http://u:pw@127.0.0.1:8080"  # the runner still has them


def test_the_endpoint_defaults_to_chat_and_serving_ids_without_the_new_keys_are_unchanged(
    tmp_path: Path,
) -> None:
    plan = parse_plan(foreign_plan_toml("http://h:1").replace('endpoint = "chat"\n', ""), base=tmp_path)
    assert plan.serving is not None and plan.serving.endpoint == "chat"
    from edgeprof.plan import Serving

    assert set(Serving().to_json()) == {"requests", "duration_s", "warmup_requests", "request_timeout_s",
                                        "ready_timeout_s", "cache_prompt", "slo"}  # fmt: skip


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("localhost:8080", "http(s) URL with host and port"),
        ("http://127.0.0.1", "http(s) URL with host and port"),
        ("ftp://h:21", "http(s) URL with host and port"),
        ("http://:8080", "http(s) URL with host and port"),
        ("http://h:99999", "bad port"),
        ("http://h:8080/v1", "without /v1"),
        (8080, "got int 8080"),
    ],
)
def test_a_bad_target_is_the_one_problem(tmp_path: Path, target: object, why: str) -> None:
    text = foreign_plan_toml("PLACEHOLDER").replace('"PLACEHOLDER"', repr(target).replace("'", '"'))
    (only,) = problems(text, tmp_path)
    assert only.startswith("serving.target: ") and why in only and "\n" not in only


def test_runner_openai_needs_a_target_and_the_keys_need_the_runner(tmp_path: Path) -> None:
    text = foreign_plan_toml("http://h:1").replace('target = "http://h:1"\n', "")
    (only,) = problems(text, tmp_path)
    assert only.startswith("serving.target: missing")
    llama = foreign_plan_toml("http://h:1").replace('runner = ["openai"]', 'runner = ["llama-server"]')
    found = problems(llama.replace("[matrix]\n", '[matrix]\nmodels = ["nothere.gguf"]\n'), tmp_path)
    assert 'serving.target: needs runner = ["openai"] in [matrix]' in found
    assert 'serving.endpoint: needs runner = ["openai"] in [matrix]' in found
    bad = foreign_plan_toml("http://h:1", endpoint="responses")
    assert problems(bad, tmp_path) == ["serving.endpoint: expected one of chat, completions, got 'responses'"]


def test_the_workload_must_fit_the_endpoint(tmp_path: Path) -> None:
    tokens = foreign_plan_toml(
        "http://h:1", "chat", workload={"name": "t", "prompt_tokens": 8, "n_predict": 4}
    )
    (only,) = problems(tokens, tmp_path)
    assert only.startswith("workload 't': the chat endpoint takes text")
    chat = {"name": "c", "messages": [{"role": "user", "content": "hi"}], "n_predict": 4}
    assert (
        parse_plan(foreign_plan_toml("http://h:1", "chat", workload=chat), base=tmp_path).workloads[0].is_chat
    )
    (only,) = problems(foreign_plan_toml("http://h:1", "completions", workload=chat), tmp_path)
    assert 'messages need endpoint = "chat"' in only


def test_one_model_at_most_and_no_llama_cpp_axis_with_several_values(tmp_path: Path) -> None:
    text = foreign_plan_toml("http://h:1").replace("ctx = [256]", "ctx = [256, 512]")
    (only,) = problems(text, tmp_path)
    assert only.startswith("matrix.ctx: a server edgeprof did not start keeps its own settings")
    two = foreign_plan_toml("http://h:1").replace("[matrix]\n", '[matrix]\nmodels = ["a.gguf", "b.gguf"]\n')
    assert any(
        p.startswith('matrix.models: runner "openai" measures the one model') for p in problems(two, tmp_path)
    )


def test_the_api_key_is_named_by_a_variable_never_given(tmp_path: Path) -> None:
    plan = parse_plan(foreign_plan_toml("http://h:1", api_key_env="MY_KEY"), base=tmp_path)
    assert plan.serving is not None and plan.serving.to_json()["api_key_env"] == "MY_KEY"
    (only,) = problems(foreign_plan_toml("http://h:1", api_key_env="sk-123 456"), tmp_path)
    assert only.startswith("serving.api_key_env: expected the name of an environment variable")


def test_a_quality_workload_needs_a_model_file_kld_is_not_measured_on_a_foreign_server(
    tmp_path: Path,
) -> None:
    text = foreign_plan_toml("http://h:1")
    text += '\n[[workload]]\nname = "q"\nkind = "quality"\n'
    found = problems(text, tmp_path)
    assert any(p.startswith("workload 'q': quality (KLD) is not measured on a foreign server") for p in found)
