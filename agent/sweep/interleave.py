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

Sequential decisions (the plan's ``[decide]``, on by default, agent/plan/budget.py ``Decide``): every block is
one steady rep in a child of its own (the process, not the rep, is what varies between blocks: its memory
placement, its neighbours), and after the plan's ``steady`` rounds the group goes on, round by round, while
any rival's comparison with the leader is open: neither decided nor a tie within the resolution
(``edgeprof.stats.paired_decision``: an anytime-valid interval, so looking after every round costs no
error). A rival settled against the leader runs no more blocks; the leader runs while any is open. The
group stops when all are settled or its budget is spent (reps, minutes, the sweep's minutes); each run
stores how its group ended (``run.decision_json``), and the device's state as each block started
(``run.block_states_json``).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.executors import Executor, RunContext
from edgeprof.plan import Decide, RunSpec
from edgeprof.plan.budget import spec_condition
from edgeprof.run_states import utcnow
from edgeprof.runners.registry import kind_of
from edgeprof.stats import PairedDecision, pair_confidence_pct, paired_decision
from edgeprof.storage.models import Measurement, Run

# Steady reps per block where a group runs a fixed n (``[decide] sequential = false``). Two, not one: with the
# default 5 steady reps a side, blocks of one would leave five pairs, where no paired rank interval can reach
# 95 % (the sign test's least two-sided p is 1/16); blocks of 2, 2 and 1 can, and each later block costs one
# model load and one warm-up more. A sequential group's blocks are one rep each (``block_sizes``).
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
    blocks: dict[int, tuple[int, int]] = field(default_factory=dict)  # block -> (first steady rep, reps)

    @property
    def n_steady(self) -> int:
        return sum(n for _first, n in self.blocks.values())


class RivalLoop(Protocol):
    """What the sweep's config loop lends the interleaving (agent/sweep/loop.py ConfigLoop)."""

    session: Session
    hooks: Any

    def open_config(self, spec: RunSpec, first: RunSpec) -> OpenConfig | None: ...

    def close_config(self, opened: OpenConfig) -> None: ...

    def run_context(self, run: Run) -> RunContext: ...


def block_sizes(steady: int, sequential: bool = False) -> list[int]:
    """The steady reps of each block: ``BLOCK_REPS`` each, the last one what is left; one each where the
    group decides sequentially (its observations are the block pairs)."""
    size = 1 if sequential else BLOCK_REPS
    return [min(size, steady - start) for start in range(0, steady, size)]


def interleaves(spec: RunSpec, sequential: bool = False) -> bool:
    """Whether a spec's steady reps can be split into blocks: in-process generation with more than one block
    (a soak is one measurement; a quality run has no reps; a server's level is one load)."""
    return (
        kind_of(spec.params.runner).in_process
        and spec.workload.kind == "generation"
        and len(block_sizes(spec.repeat.steady, sequential)) > 1
    )


def rival_units(
    specs: Sequence[RunSpec], group_of: Callable[[RunSpec], str], sequential: bool = False
) -> list[list[RunSpec]]:
    """The specs in plan order, the rivals of each condition gathered at the place of the first of them
    (one spec alone where it has no rival or cannot be interleaved)."""
    units: list[list[RunSpec]] = []
    by_condition: dict[tuple[Any, ...], list[RunSpec]] = {}
    for spec in specs:
        if not interleaves(spec, sequential):
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
    decide = _decide_of(loop)
    sizes = block_sizes(unit[0].repeat.steady, decide.sequential)
    opened: list[OpenConfig] = []
    for spec in unit:
        first = dataclasses.replace(spec, repeat=dataclasses.replace(spec.repeat, steady=sizes[0]))
        state = _state_now(loop)
        config = loop.open_config(spec, first)
        if config is not None:
            config.blocks[0] = (0, sizes[0])
            _note_block_state(config.run, 0, state)
            _hold(loop.session, config.run)
            opened.append(config)
    for round_index in range(1, len(sizes)):
        for config in round_order(opened, round_index):
            if config.run.status == "running":
                _run_block(loop, config, round_index, sizes[round_index])
    if decide.sequential and len(opened) > 1:
        SequentialGroup(loop, opened, decide, len(sizes)).run()
    for config in opened:
        if config.run.ended_at is None:  # held through its blocks: it ends now, ok unless a block failed
            config.run.status = "ok" if config.run.status == "running" else config.run.status
            config.run.ended_at, config.run.t_end_mono = utcnow(), time.monotonic()
            loop.session.commit()
        loop.close_config(config)


def _decide_of(loop: RivalLoop) -> Decide:
    plan = getattr(loop, "plan", None)
    return plan.decide if plan is not None else Decide(sequential=False)


def _state_now(loop: RivalLoop) -> dict[str, Any] | None:
    """The device's state now (governor, caps, power mode, jetson_clocks), where the loop can read it."""
    read = getattr(loop, "rep_state", None)
    return read() if read is not None else None


def _note_block_state(run: Run, block: int, state: dict[str, Any] | None) -> None:
    if state is None:
        return
    states = json.loads(run.block_states_json) if run.block_states_json else {}
    states[str(block)] = state
    run.block_states_json = json.dumps(states, sort_keys=True)


def block_speeds(session: Session, config: OpenConfig) -> dict[int, list[float]]:
    """Block -> the tg t/s of the steady reps stored for it so far."""
    rows = session.execute(
        select(Measurement.rep, Measurement.tg_tps).where(
            Measurement.run_id == config.run.id, Measurement.kind == "steady"
        )
    ).all()
    by_rep = {int(rep): float(tg) for rep, tg in rows if tg is not None and tg > 0}
    out: dict[int, list[float]] = {}
    for block, (first, n) in config.blocks.items():
        found = [by_rep[r] for r in range(first, first + n) if r in by_rep]
        if found:
            out[block] = found
    return out


@dataclass
class SequentialGroup:
    """A group of rivals after the plan's steady rounds: one more round for the rivals still open, until
    each is settled against the leader or the budget is spent (the module's docstring)."""

    loop: RivalLoop
    members: list[OpenConfig]
    decide: Decide
    next_round: int
    stopped: str = ""  # why the group stopped: "settled", "budget: ..."

    def run(self) -> None:
        steady = self.members[0].spec.repeat.steady
        max_rounds = self.decide.max_reps(steady)
        t_start = min(c.t0 for c in self.members)
        while True:
            live = [c for c in self.members if c.run.status == "running"]
            leader, standing = self.standing(live)
            still = [c for c in live if c is not leader and not _settled(standing.get(id(c)))]
            if leader is None or not still:
                self.stopped = "settled"
                break
            why = self._over_budget(max_rounds, t_start)
            if why:
                self.stopped = f"budget: {why}"
                break
            self._say_open(leader, still, standing, max_rounds)
            t_round = time.monotonic()
            for config in round_order([leader, *still], self.next_round):
                _run_block(self.loop, config, self.next_round, 1)
            _spend_sweep_time(self.loop, time.monotonic() - t_round)
            self.next_round += 1
        self._store(*self.standing([c for c in self.members if c.run.status == "running"]))

    def standing(self, live: Sequence[OpenConfig]) -> tuple[OpenConfig | None, dict[int, PairedDecision]]:
        """The leader (highest median) among the live rivals, and each other's decision against it."""
        speeds = {id(c): block_speeds(self.loop.session, c) for c in live}
        ranked = [c for c in live if speeds[id(c)]]
        if not ranked:
            return None, {}
        leader = max(ranked, key=lambda c: _median([v for vs in speeds[id(c)].values() for v in vs]))
        level = pair_confidence_pct(_confidence_pct(self.loop), len(self.members))
        standing = {
            id(c): paired_decision(speeds[id(leader)], speeds[id(c)], level, self.decide.tie_pct)
            for c in ranked
            if c is not leader
        }
        return leader, standing

    def _over_budget(self, max_rounds: int, t_start: float) -> str | None:
        if self.next_round >= max_rounds:
            return f"{max_rounds} reps a rival"
        minutes = self.decide.group_minutes
        if minutes is not None and time.monotonic() - t_start > 60 * minutes:
            return f"{self.decide.group_minutes:g} min for the group"
        spent = getattr(self.loop, "decision_spent_s", 0.0)
        if self.decide.sweep_minutes is not None and spent > 60 * self.decide.sweep_minutes:
            return f"{self.decide.sweep_minutes:g} min of extra rounds for the sweep"
        return None

    def _say_open(
        self,
        leader: OpenConfig,
        still: Sequence[OpenConfig],
        standing: dict[int, PairedDecision],
        max_rounds: int,
    ) -> None:
        progress = getattr(self.loop, "progress", None)
        if progress is None:
            return
        pairs = "; ".join(f"{leader.label} vs {c.label}: {standing[id(c)].describe()}" for c in still)
        left = max_rounds - self.next_round
        rounds = f"{left} more round{'s' if left != 1 else ''}"
        text = f"open: {pairs}; up to {rounds} ({len(still) + 1} rivals running)"
        note = getattr(progress, "decisions", None)
        if note is not None:
            note(text)
        else:
            progress.line(text)

    def _store(self, leader: OpenConfig | None, standing: dict[int, PairedDecision]) -> None:
        """Each run's record of how the group ended: its decision against the leader, why it stopped."""
        for config in self.members:
            record: dict[str, Any] = {
                "rule": "confidence sequence (Lai 1976), paired blocks",
                "stopped": self.stopped,
                "rounds": self.next_round,
                "leader": leader.label if leader is not None else None,
                "budget": self.decide.describe(config.spec.repeat.steady),
            }
            found = standing.get(id(config))
            if found is not None:
                record.update(
                    block_pairs=found.n_pairs, state=found.state, ratio=found.ratio, low=found.low,
                    high=found.high, confidence_pct=found.confidence_pct, tie_pct=found.tie_pct,
                    tie_from=found.tie_from,
                )  # fmt: skip
            config.run.decision_json = json.dumps(record, sort_keys=True)
        self.loop.session.commit()
        progress = getattr(self.loop, "progress", None)
        note = getattr(progress, "decisions", None)
        if note is not None:
            note(None)


def _settled(found: PairedDecision | None) -> bool:
    return found is not None and found.state in ("decided", "tie")


def _median(values: Sequence[float]) -> float:
    xs = sorted(values)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2.0


def _confidence_pct(loop: RivalLoop) -> float:
    plan = getattr(loop, "plan", None)
    return float(plan.quality_budget.confidence_pct) if plan is not None else 95.0


def _spend_sweep_time(loop: RivalLoop, seconds: float) -> None:
    """The sweep's extra rounds so far, against ``[decide] sweep_minutes``."""
    if hasattr(loop, "decision_spent_s"):
        loop.decision_spent_s += seconds


def _hold(session: Session, run: Run) -> None:
    """A run whose first child ended ``ok`` stays ``running`` until its last block (a stop in between
    leaves it unfinished, so a resume measures it again rather than keep it with a block missing)."""
    if run.status == "ok":
        run.status, run.ended_at = "running", None
        session.commit()


def _run_block(loop: RivalLoop, config: OpenConfig, round_index: int, n_reps: int) -> None:
    spec = config.spec
    progress = getattr(loop, "progress", None)
    if progress is not None:  # the live line (or a log's line) names the block now running
        progress.start(config.index, f"{config.label} (block {round_index + 1})")
    resume = getattr(loop.hooks, "resume_run", None)
    if resume is not None:
        resume(loop.session, config.run)  # telemetry's samples belong to this run again
    _note_block_state(config.run, round_index, _state_now(loop))
    block = {
        "index": round_index,
        "steady_from": config.n_steady,
        "steady_n": n_reps,
        # numbered after the plan's own warm-ups, one (or the plan's count) per later block
        "warmup_from": spec.repeat.warmup + (round_index - 1) * max(1, spec.repeat.warmup),
    }
    config.blocks[round_index] = (config.n_steady, n_reps)
    run_block = getattr(config.executor, "run_block", None)
    if run_block is None:  # an executor without blocks never gets here (``interleaves``)
        raise RuntimeError(f"{type(config.executor).__name__} cannot run blocks of steady reps")
    run_block(loop.session, config.run, spec, loop.run_context(config.run), block)
