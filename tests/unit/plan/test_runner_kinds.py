"""Runner kinds come from the runner registry: a runner added there with its kind is expanded, identified,
interleaved, counted and reported as that kind, with no name compared anywhere else. Each check below adds a
runner under a new name (an in-process one and a server edgeprof starts) and reads what the plan, the sweep's
interleaving and the report make of it."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.plans import plan_toml

from edgeprof.daemon.metric_counts import endpoint_of
from edgeprof.plan import expand, parse_plan
from edgeprof.plan.serving import server_slots
from edgeprof.report.cells import FOREIGN_QUALITY, fmt_quality
from edgeprof.report.columns import is_serving_runner
from edgeprof.runners import registry
from edgeprof.runners.registry import FOREIGN_SERVER, IN_PROCESS, OWN_SERVER, RunnerInfo
from edgeprof.sweep.interleave import interleaves

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def new_runners(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.RUNNERS, "cpp-b", RunnerInfo("cpp-b", "in-process (b)", IN_PROCESS))
    monkeypatch.setitem(
        registry.RUNNERS, "srv-b", RunnerInfo("srv-b", "HTTP API (srv-b)", OWN_SERVER, endpoint="generate")
    )
    monkeypatch.setitem(registry.RUNNERS, "far-b", RunnerInfo("far-b", "HTTP API (far-b)", FOREIGN_SERVER))


def _specs(tmp_path: Path, tiny_models: dict[str, Path], runners: list[str]) -> list:
    text = plan_toml(
        {"q4": tiny_models["Q4_K_M"]},
        matrix={"runner": runners, "concurrency": [1, 4]},
        repeat={"steady": 10},
    )
    plan = parse_plan(text, source=str(tmp_path / "plan.toml"), base=tmp_path)
    assert plan.specs_per_model() == {"q4": len(expand(plan, {m.path: "0" * 64 for m in plan.models}))}
    return expand(plan, {m.path: "0" * 64 for m in plan.models})


def test_a_new_in_process_runner_is_one_config_per_cell_and_interleaves(
    tmp_path: Path, tiny_models, new_runners: None
) -> None:
    specs = _specs(tmp_path, tiny_models, ["cpp-b", "srv-b"])
    by_runner = {r: [s for s in specs if s.params.runner == r] for r in ("cpp-b", "srv-b")}
    # in process: one config, no serving load in it or in its id, its steady reps split into blocks
    [cpp] = by_runner["cpp-b"]
    assert cpp.serving is None and cpp.params.concurrency is None
    assert interleaves(cpp)
    # a server: one config per concurrency, the [serving] table part of each, never interleaved
    assert [s.params.concurrency for s in by_runner["srv-b"]] == [1, 4]
    assert all(s.serving is not None and not interleaves(s) for s in by_runner["srv-b"])


def test_a_new_runners_kind_answers_every_serving_question(new_runners: None) -> None:
    assert not is_serving_runner("cpp-b") and is_serving_runner("srv-b") and is_serving_runner("far-b")
    assert server_slots("srv-b", 4) == 4  # a server edgeprof starts: one slot per client
    assert server_slots("far-b", 4) == 1 and server_slots("cpp-b", 4) == 1
    assert endpoint_of("cpp-b", None) == ""
    assert endpoint_of("srv-b", None) == "generate"  # its fixed endpoint
    assert endpoint_of("far-b", '{"server": {"endpoint": "chat"}}') == "chat"  # the one its run recorded
    assert fmt_quality({"runner": "far-b", "kld_mean": None}) == FOREIGN_QUALITY
    assert fmt_quality({"runner": "cpp-b", "kld_mean": None}) != FOREIGN_QUALITY


def test_a_runner_this_installation_does_not_know_reads_as_a_server() -> None:
    assert is_serving_runner("vllm-9") and not is_serving_runner(None)
    assert registry.kind_of(None).in_process and registry.kind_of("llama-server").server_slots(3) == 3
