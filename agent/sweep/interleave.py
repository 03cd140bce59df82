"""Rival configs measured interleaved: within a condition (agent/plan/budget.py ``spec_condition``) the steady
reps of the files and of the competing parameters alternate in time, in blocks, so that the host's drift
(another tenant, a warming board, a background job) falls on every rival alike instead of on whichever ran
last.

How: each rival's first child runs as always (cold start, warm-ups, then its first block of steady reps), in
plan order; then every later block of each rival runs in a fresh child of its own (a discarded warm-up, then
the block), round by round, the order reversed every other round (A B, B A, A B, ...: a linear drift
cancels over a pair of rounds). Block ``i`` of every rival runs in round ``i``: the report pairs them
(agent/report/speed_ratio.py ``blocked_ratio``). Cold starts stay one per fresh process of the first round,
as the plan's ``[repeat] cold`` says; the later children are warm (their load is a ``warmup`` phase).

Children, not one warm process per rival kept alive through the condition: only one model is resident at a
time, so the memory check of each config still holds, and a crash still costs one block of one config.
A run stays ``running`` until its last block: a sweep stopped in between redoes the whole set on resume.
The agent's reasons not to start (its time window, the disk guard) are asked before a set, not inside it:
a set is one comparison.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.orm import Session

from edgeprof.executors import Executor, RunContext
from edgeprof.plan import RunSpec
from edgeprof.plan.budget import spec_condition
from edgeprof.run_states import utcnow
from edgeprof.runners.registry import kind_of
from edgeprof.storage.models import Run

# Steady reps per block. Two, not one: with the default 5 steady reps a side, blocks of one would leave five
# pairs, where no paired rank interval can reach 95 % (the sign test's least two-sided p is 1/16); blocks of
# 2, 2 and 1 can, and each later block costs one model load and one warm-up more.
BLOCK_REPS = 2


@dataclass
class OpenConfig:
    """A config whose first child ran and whose run row waits for its last block."""

    spec: RunSpec
    run: Run
    executor: Executor
    label: str
    index: int  # its place among the plan's configs, for its progress line
    t0: float  # monotonic time it started


class RivalLoop(Protocol):
    """What the sweep's config loop lends the interleaving (agent/sweep/loop.py ConfigLoop)."""

    session: Session
    hooks: Any

    def open_config(self, spec: RunSpec, first: RunSpec) -> OpenConfig | None: ...

    def close_config(self, opened: OpenConfig) -> None: ...

    def run_context(self, run: Run) -> RunContext: ...


def block_sizes(steady: int) -> list[int]:
    """The steady reps of each block: ``BLOCK_REPS`` each, the last one what is left."""
    return [min(BLOCK_REPS, steady - start) for start in range(0, steady, BLOCK_REPS)]


def interleaves(spec: RunSpec) -> bool:
    """Whether a spec's steady reps can be split into blocks: in-process generation with more than one block
    (a soak is one measurement; a quality run has no reps; a server's level is one load)."""
    return (
        kind_of(spec.params.runner).in_process
        and spec.workload.kind == "generation"
        and len(block_sizes(spec.repeat.steady)) > 1
    )


def rival_units(specs: Sequence[RunSpec], group_of: Callable[[RunSpec], str]) -> list[list[RunSpec]]:
    """The specs in plan order, the rivals of each condition gathered at the place of the first of them
    (one spec alone where it has no rival or cannot be interleaved)."""
    units: list[list[RunSpec]] = []
    by_condition: dict[tuple[Any, ...], list[RunSpec]] = {}
    for spec in specs:
        if not interleaves(spec):
            units.append([spec])
            continue
        key = spec_condition(spec, group_of(spec))
        if key in by_condition:
            by_condition[key].append(spec)
        else:
            by_condition[key] = [spec]
            units.append(by_condition[key])
    return units


def round_order(members: Sequence[OpenConfig], round_index: int) -> list[OpenConfig]:
    """Round 0, 2, 4, ... in plan order, the others reversed (A B, B A, A B, ...)."""
    return list(members) if round_index % 2 == 0 else list(reversed(members))


def measure_rivals(loop: RivalLoop, unit: Sequence[RunSpec]) -> None:
    """Measure a set of rival configs interleaved, block by block; each is stored as one run."""
    sizes = block_sizes(unit[0].repeat.steady)
    opened: list[OpenConfig] = []
    for spec in unit:
        first = dataclasses.replace(spec, repeat=dataclasses.replace(spec.repeat, steady=sizes[0]))
        config = loop.open_config(spec, first)
        if config is not None:
            _hold(loop.session, config.run)
            opened.append(config)
    for round_index in range(1, len(sizes)):
        for config in round_order(opened, round_index):
            if config.run.status == "running":
                _run_block(loop, config, sizes, round_index)
    for config in opened:
        if config.run.ended_at is None:  # held through its blocks: it ends now, ok unless a block failed
            config.run.status = "ok" if config.run.status == "running" else config.run.status
            config.run.ended_at, config.run.t_end_mono = utcnow(), time.monotonic()
            loop.session.commit()
        loop.close_config(config)


def _hold(session: Session, run: Run) -> None:
    """A run whose first child ended ``ok`` stays ``running`` until its last block (a stop in between
    leaves it unfinished, so a resume measures it again rather than keep it with a block missing)."""
    if run.status == "ok":
        run.status, run.ended_at = "running", None
        session.commit()


def _run_block(loop: RivalLoop, config: OpenConfig, sizes: Sequence[int], round_index: int) -> None:
    spec = config.spec
    progress = getattr(loop, "progress", None)
    if progress is not None:  # the live line (or a log's line) names the block now running
        progress.start(config.index, f"{config.label} (block {round_index + 1}/{len(sizes)})")
    resume = getattr(loop.hooks, "resume_run", None)
    if resume is not None:
        resume(loop.session, config.run)  # telemetry's samples belong to this run again
    block = {
        "index": round_index,
        "steady_from": sum(sizes[:round_index]),
        "steady_n": sizes[round_index],
        # numbered after the plan's own warm-ups, one (or the plan's count) per later block
        "warmup_from": spec.repeat.warmup + (round_index - 1) * max(1, spec.repeat.warmup),
    }
    run_block = getattr(config.executor, "run_block", None)
    if run_block is None:  # an executor without blocks never gets here (``interleaves``)
        raise RuntimeError(f"{type(config.executor).__name__} cannot run blocks of steady reps")
    run_block(loop.session, config.run, spec, loop.run_context(config.run), block)
