"""Interleaved rivals where one fails (agent/sweep/interleave.py ``measure_rivals``): a rival whose first
child or a later block fails gets no further block while the others run all of theirs; it is closed with
its failure kept (never turned into ``ok`` at the end), and every rival is closed exactly once."""

from __future__ import annotations

import dataclasses
from typing import Any

from edgeprof.executors import RunContext
from edgeprof.plan.model import ModelEntry, Params, Repeat, RunSpec, Workload
from edgeprof.storage.models import Run
from edgeprof.sweep.interleave import OpenConfig, measure_rivals


def spec(label: str) -> RunSpec:
    params = Params(n_ctx=256, n_gpu_layers=0, n_threads=1, n_batch=2048, n_ubatch=512, flash_attn="auto",
                    type_k="f16", type_v="f16", use_mmap=True)  # fmt: skip
    return RunSpec(
        model=ModelEntry(path=f"/m/{label}.gguf", label=label, group="g"),
        model_sha256=label * 8,
        params=params,
        workload=Workload(name="w", prompt=None, prompt_tokens=16, n_predict=8),
        repeat=Repeat(cold=1, warmup=1, steady=5),  # blocks of 2, 2, 1
        timeout_s=60,
        cold_cache="keep",
    )


class Session:
    def commit(self) -> None:
        pass


@dataclasses.dataclass
class Executor:
    """Runs blocks; ``fail``: (label, block index) -> the status that block ends in."""

    fail: dict[tuple[str, int], str]
    blocks: list[tuple[str, int]] = dataclasses.field(default_factory=list)

    def run_block(self, _s: Any, run: Run, spec: RunSpec, _ctx: Any, block: dict[str, Any]) -> None:
        self.blocks.append((spec.model.label, block["index"]))
        status = self.fail.get((spec.model.label, block["index"]))
        if status is not None:
            run.status, run.reason = status, f"block {block['index']} {status}"


@dataclasses.dataclass
class Loop:
    executor: Executor
    session: Any = dataclasses.field(default_factory=Session)
    hooks: Any = None
    closed: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def open_config(self, spec: RunSpec, first: RunSpec) -> OpenConfig | None:
        assert first.repeat.steady == 2  # the first block's reps
        status = self.executor.fail.get((spec.model.label, 0), "ok")
        run = Run(status=status, model_label=spec.model.label)
        if status != "ok":
            run.reason = f"block 0 {status}"
        return OpenConfig(spec, run, self.executor, spec.model.label, 1, 0.0)  # type: ignore[arg-type]

    def close_config(self, opened: OpenConfig) -> None:
        self.closed.append((opened.run.model_label, opened.run.status))

    def run_context(self, run: Run) -> RunContext:
        return None  # type: ignore[return-value]


def test_a_rival_failed_in_its_first_child_gets_no_block_and_stays_failed() -> None:
    executor = Executor(fail={("q4", 0): "failed"})
    loop = Loop(executor)
    measure_rivals(loop, [spec("q8"), spec("q4")])
    assert executor.blocks == [("q8", 1), ("q8", 2)]  # q4: none after its failed first child
    assert loop.closed == [("q8", "ok"), ("q4", "failed")]


def test_a_rival_failed_in_a_later_block_gets_no_more_and_is_not_made_ok() -> None:
    executor = Executor(fail={("q8", 1): "timeout"})
    loop = Loop(executor)
    measure_rivals(loop, [spec("q8"), spec("q4")])
    # round 1 runs q4 then q8 (reversed), round 2 q8 then q4: q8's third block is never run
    assert executor.blocks == [("q4", 1), ("q8", 1), ("q4", 2)]
    assert loop.closed == [("q8", "timeout"), ("q4", "ok")]
