"""The sweep's sequential decisions (agent/sweep/interleave.py ``SequentialGroup``) on a simulated device:
each config's steady reps are booked by a fake executor from a known speed, a per-process effect and a
throttled round where asked, into a real SQLite database; nothing reads a clock to assert. Synthetic.

Mutants seen failing: a settled rival kept running (``still`` built from every live rival), the budget not
checked (the loop ran past ``max_steady``), the open line never said."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session
from support.dbbuild import add_run, add_sweep

from edgeprof.plan import Decide, QualityBudget
from edgeprof.plan.model import ModelEntry, Params, Repeat, RunSpec, Workload
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Measurement, Run
from edgeprof.sweep.interleave import OpenConfig, block_speeds, measure_rivals


def spec(label: str, steady: int = 5) -> RunSpec:
    params = Params(n_ctx=256, n_gpu_layers=0, n_threads=1, n_batch=2048, n_ubatch=512, flash_attn="auto",
                    type_k="f16", type_v="f16", use_mmap=True)  # fmt: skip
    return RunSpec(
        model=ModelEntry(path=f"/m/{label}.gguf", label=label, group="g"),
        model_sha256=label * 8,
        params=params,
        workload=Workload(name="w", prompt=None, prompt_tokens=16, n_predict=8),
        repeat=Repeat(cold=1, warmup=1, steady=steady),
        timeout_s=60,
        cold_cache="keep",
    )


@dataclass
class SimDevice:
    """Known speeds; each fresh process moves them by its own effect (``proc_sd``, log scale)."""

    tps: dict[str, float]
    proc_sd: float = 0.01
    seed: int = 1
    blocks_run: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def block(self, label: str, n: int) -> list[float]:
        self.blocks_run[label] = self.blocks_run.get(label, 0) + 1
        process = math.exp(self.rng.gauss(0.0, self.proc_sd))
        return [self.tps[label] * process for _ in range(n)]


@dataclass
class SimExecutor:
    device: SimDevice
    label: str

    def run_block(self, session: Session, run: Run, _spec: RunSpec, _ctx: Any, block: dict[str, int]) -> None:
        for i, tg in enumerate(self.device.block(self.label, block["steady_n"])):
            session.add(Measurement(run_id=run.id, kind="steady", rep=block["steady_from"] + i, tg_tps=tg))
        session.commit()


@dataclass
class Lines:
    said: list[str] = field(default_factory=list)

    def start(self, _index: int, _label: str) -> None:
        pass

    def line(self, text: str) -> None:
        self.said.append(text)

    def decisions(self, text: str | None) -> None:
        if text:
            self.said.append(text)


@dataclass
class SimPlan:
    decide: Decide
    quality_budget: QualityBudget = field(default_factory=QualityBudget)


@dataclass
class SimLoop:
    """What the sweep's config loop lends the interleaving, over a simulated device."""

    session: Session
    device: SimDevice
    plan: SimPlan
    sweep_id: int
    progress: Lines = field(default_factory=Lines)
    hooks: Any = None
    decision_spent_s: float = 0.0

    def open_config(self, s: RunSpec, first: RunSpec) -> OpenConfig:
        run = add_run(self.session, self.sweep_id, len(self.device.blocks_run) + 1, model_label=s.model.label)
        run.status = "ok"
        executor = SimExecutor(self.device, s.model.label)
        block = {"index": 0, "steady_from": 0, "steady_n": first.repeat.steady, "warmup_from": 0}
        executor.run_block(self.session, run, first, None, block)
        return OpenConfig(s, run, executor, s.model.label, 1, 0.0)  # type: ignore[arg-type]

    def close_config(self, _opened: OpenConfig) -> None:
        pass

    def run_context(self, _run: Run) -> None:
        return None

    def rep_state(self) -> dict[str, Any]:
        return {"policy0.governor": "performance"}


@pytest.fixture
def session(tmp_path: Path) -> Session:
    engine = open_engine(f"sqlite:///{tmp_path / 's.db'}")
    s = new_session(engine)
    s.info["sweep_id"] = add_sweep(s).id
    s.commit()
    return s


def measure(session: Session, device: SimDevice, decide: Decide, labels: list[str]) -> SimLoop:
    loop = SimLoop(session, device, SimPlan(decide), session.info["sweep_id"])
    measure_rivals(loop, [spec(label) for label in labels])  # type: ignore[arg-type]
    return loop


def decisions(session: Session) -> dict[str, dict[str, Any]]:
    return {r.model_label: json.loads(r.decision_json) for r in session.query(Run) if r.decision_json}


@pytest.mark.timeout(60)
def test_a_clear_gap_stops_at_the_start_and_a_settled_rival_stops_costing_rounds(session: Session) -> None:
    device = SimDevice({"fast": 30.0, "slow": 15.0, "close": 29.4}, proc_sd=0.004)
    measure(session, device, Decide(tie_pct=1.0), ["fast", "slow", "close"])
    found = decisions(session)
    assert found["slow"]["state"] == "decided"
    assert found["slow"]["stopped"] == "settled"
    # slow was settled after the plan's 5 steady rounds and ran no more; the others went on until close was
    assert device.blocks_run["slow"] == 5
    assert device.blocks_run["fast"] == device.blocks_run["close"] > 5
    assert found["close"]["state"] == "decided"
    assert found["close"]["block_pairs"] == device.blocks_run["close"]
    for run in session.query(Run):  # the device's state as each block started
        assert len(json.loads(run.block_states_json)) == device.blocks_run[run.model_label]


@pytest.mark.timeout(60)
def test_an_undecidable_pair_is_stopped_by_its_budget_and_the_open_line_says_so(session: Session) -> None:
    device = SimDevice({"a": 20.0, "b": 20.4}, proc_sd=0.03)
    loop = measure(session, device, Decide(max_steady=9, tie_pct=1.0), ["a", "b"])
    found = decisions(session)
    assert found["a"]["stopped"] == found["b"]["stopped"] == "budget: 9 reps a rival"
    assert device.blocks_run == {"a": 9, "b": 9}
    opened = [line for line in loop.progress.said if line.startswith("open: ")]
    assert len(opened) == 4  # rounds 6 to 9, each announced with what is open and what budget is left
    assert "up to 4 more rounds (2 rivals running)" in opened[0] and "up to 1 more round (2" in opened[-1]


@pytest.mark.timeout(60)
def test_a_fixed_plan_runs_exactly_steady_reps(session: Session) -> None:
    device = SimDevice({"a": 20.0, "b": 20.4}, proc_sd=0.03)
    measure(session, device, Decide(sequential=False), ["a", "b"])
    assert device.blocks_run == {"a": 3, "b": 3}  # blocks of 2, 2 and 1
    assert decisions(session) == {}
    for run in session.query(Run):
        assert sum(len(v) for v in block_speeds(session, _opened(run)).values()) == 5


def _opened(run: Run) -> OpenConfig:
    blocks = {0: (0, 2), 1: (2, 2), 2: (4, 1)}
    return dataclasses.replace(OpenConfig(spec("x"), run, None, "x", 1, 0.0), blocks=blocks)  # type: ignore[arg-type]
