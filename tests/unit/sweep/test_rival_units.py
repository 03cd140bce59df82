"""Which specs the sweep measures interleaved (agent/sweep/interleave.py, with the rule of
agent/plan/budget.py): the files of a group and their speed parameters are rivals; another ctx, another
workload, another group, a serving level or too few steady reps is not; the rounds alternate their order."""

from __future__ import annotations

import dataclasses

from edgeprof.plan.model import ModelEntry, Params, Repeat, RunSpec, Workload
from edgeprof.sweep.interleave import block_sizes, interleaves, rival_units, round_order


def spec(label: str, group: str = "g", steady: int = 5, workload: str = "w", **params: object) -> RunSpec:
    base = Params(n_ctx=256, n_gpu_layers=0, n_threads=1, n_batch=2048, n_ubatch=512, flash_attn="auto",
                  type_k="f16", type_v="f16", use_mmap=True)  # fmt: skip
    return RunSpec(
        model=ModelEntry(path=f"/m/{label}.gguf", label=label, group=group),
        model_sha256=label * 8,
        params=dataclasses.replace(base, **params),  # type: ignore[arg-type]
        workload=Workload(name=workload, prompt=None, prompt_tokens=16, n_predict=8),
        repeat=Repeat(cold=1, warmup=1, steady=steady),
        timeout_s=60,
        cold_cache="keep",
    )


def labels(units: list[list[RunSpec]]) -> list[list[str]]:
    return [[f"{s.model.label}/t{s.params.n_threads}/c{s.params.n_ctx}" for s in unit] for unit in units]


def by_group(s: RunSpec) -> str:
    return s.model.group or s.model.label


def test_files_and_thread_counts_are_rivals_ctx_is_not() -> None:
    specs = [spec("q8"), spec("q8", n_threads=2), spec("q8", n_ctx=512), spec("q4"), spec("q4", n_threads=2)]
    assert labels(rival_units(specs, by_group)) == [
        ["q8/t1/c256", "q8/t2/c256", "q4/t1/c256", "q4/t2/c256"],
        ["q8/t1/c512"],
    ]


def test_other_groups_workloads_serving_levels_and_single_blocks_stand_alone() -> None:
    specs = [
        spec("q8"),
        spec("other", group="h"),
        spec("q4", workload="chat"),
        spec("q4", runner="llama-server", concurrency=2),
        spec("q4", steady=2),  # one block: nothing to alternate
    ]
    assert [len(u) for u in rival_units(specs, by_group)] == [1, 1, 1, 1, 1]
    assert not interleaves(specs[3]) and not interleaves(specs[4]) and interleaves(specs[0])


def test_blocks_and_the_order_of_rounds() -> None:
    assert block_sizes(5) == [2, 2, 1] and block_sizes(6) == [2, 2, 2] and block_sizes(1) == [1]
    members = ["a", "b", "c"]
    assert [round_order(members, r) for r in range(3)] == [members, ["c", "b", "a"], members]  # type: ignore[arg-type]
