"""A soak held on a real llama-server (built by scripts/setup.sh) on the tiny demo model: its measured level
runs for the soak's duration at the config's concurrency, closed loop, and is stored as windows beside the
level, judged by the soak verdict and shown as a soak row. Bounded: 3 s in 0.5 s windows. Nothing asserts on
a speed, only on counts, clocks and intervals (the machine may be shared)."""

from __future__ import annotations

import io
import os
from itertools import pairwise
from pathlib import Path

import pytest
from sqlalchemy import select
from support.serving import foreign_plan_toml, running_llama_server, serving_plan_toml

from edgeprof.plan import Collect, Cooldown, parse_plan
from edgeprof.report import build_rows
from edgeprof.runners.llama_server import SERVER_FAULT_ENV, find_server
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Phase, Run, ServingLevel, ServingRequest, SoakWindow, Verdict
from edgeprof.sweep import Telemetry, run_plan

pytestmark = pytest.mark.timeout(300)

SERVER, _WHERE = find_server()
needs_server = pytest.mark.skipif(
    SERVER is None and not os.environ.get("CI"),
    reason="llama-server not built (scripts/setup.sh builds it; CI always has it)",
)
SOAK = {
    "name": "soak",
    "kind": "soak",
    "prompt_tokens": 16,
    "n_predict": 16,
    "duration_s": 3,
    "window_s": 0.5,
}


@needs_server
def test_a_soak_on_llama_server_is_stored_per_window_beside_its_level(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    text = serving_plan_toml(tiny_models["Q4_K_M"], conc=[2], requests=None).replace(
        '[[workload]]\nname = "w"\nprompt_tokens = 16\nn_predict = 8', "\n".join(
            ["[[workload]]", *(f"{k} = {v!r}".replace("'", '"') for k, v in SOAK.items())]
        )
    )  # fmt: skip
    assert 'kind = "soak"' in text
    plan = parse_plan(text, source=str(tmp_path / "plan.toml"), base=tmp_path)
    engine = open_engine(tmp_path / "s.db")
    env = {k: v for k, v in os.environ.items() if k != SERVER_FAULT_ENV}
    out = io.StringIO()

    def telemetry(sweep_id: int) -> Telemetry:  # this machine's own collectors: the verdicts need samples
        return Telemetry(engine, sweep_id, Collect(interval_ms=100, idle_s=0.0), Cooldown())

    outcome = run_plan(engine, plan, out=out, env=env, telemetry=telemetry)
    assert outcome.counts == {"ok": 1}, out.getvalue()
    assert "6 windows" in out.getvalue()
    with new_session(engine) as s:
        run = s.scalars(select(Run)).one()
        assert (run.runner, run.concurrency) == ("llama-server", 2)
        level = s.scalars(select(ServingLevel).where(ServingLevel.run_id == run.id)).one()
        windows = list(
            s.scalars(select(SoakWindow).where(SoakWindow.run_id == run.id).order_by(SoakWindow.idx))
        )
        assert [w.idx for w in windows] == list(range(6))
        assert windows[0].t_start_mono == pytest.approx(level.t_start_mono)
        assert windows[-1].t_end_mono == pytest.approx(level.t_start_mono + 3.0)
        for a, b in pairwise(windows):
            assert a.t_end_mono == b.t_start_mono  # contiguous, never overlapping
        measured = s.scalars(
            select(ServingRequest).where(ServingRequest.run_id == run.id, ServingRequest.kind == "measured")
        ).all()
        assert len({r.client for r in measured}) == 2  # closed loop at the config's concurrency
        # every token the server counted for a request that ended inside the soak is in a window
        inside = sum(
            r.output_tokens or 0
            for r in measured
            if r.t_end_mono is not None and r.t_end_mono < windows[-1].t_end_mono
        )
        assert inside <= sum(w.tokens for w in windows) <= sum(r.output_tokens or 0 for r in measured)
        phases = s.scalars(select(Phase).where(Phase.run_id == run.id, Phase.name == "soak_window")).all()
        assert len(phases) == 6
        kinds = {v.kind for v in s.scalars(select(Verdict).where(Verdict.run_id == run.id))}
        assert {"soak", "stability", "interference"} <= kinds  # the soak's verdict beside the level's
        rows = build_rows(s, outcome.sweep_id, include_serving=True)
    (row,) = [r for r in rows if r["runner"] == "llama-server"]
    assert row["soak_windows_n"] == 6 and row["soak_verdict"] is not None


@needs_server
def test_a_soak_on_a_server_edgeprof_did_not_start_is_cut_into_windows_the_same_way(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    assert SERVER is not None
    soak = {**SOAK, "prompt": "Once upon a time"}
    del soak["prompt_tokens"]
    with running_llama_server(SERVER, tiny_models["Q4_K_M"], slots=1) as base:
        text = foreign_plan_toml(base, conc=[1], workload=soak)
        plan = parse_plan(text, source=str(tmp_path / "plan.toml"), base=tmp_path)
        engine = open_engine(tmp_path / "f.db")
        out = io.StringIO()
        outcome = run_plan(engine, plan, out=out, env=dict(os.environ))
    assert outcome.counts == {"ok": 1}, out.getvalue()
    with new_session(engine) as s:
        run = s.scalars(select(Run)).one()
        assert run.runner == "openai"
        windows = list(s.scalars(select(SoakWindow).where(SoakWindow.run_id == run.id)))
        assert len(windows) == 6 and sum(w.tokens for w in windows) > 0
