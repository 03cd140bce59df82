"""Rival configs measured interleaved (agent/sweep/interleave.py) on the tiny models: two files at two thread
counts are one condition; their steady reps run in blocks, round by round, the order reversed every other
round; each config keeps one cold start and is stored as one run; the report pairs the blocks and advises
on the thread count.

Mutants seen failing: rounds all in plan order (``round_order`` not reversing), the block children given a
cold rep (``rep_plan`` ignoring ``block``), and every spec measured alone (``rival_units`` returning
singletons)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from sqlalchemy import select
from support.plans import plan_toml
from support.runs import clean_env

from edgeprof.plan import parse_plan
from edgeprof.report import build_rows, render_table
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Run
from edgeprof.sweep import run_plan


def test_rivals_run_interleaved_in_blocks_and_the_report_advises_on_threads(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    text = plan_toml(
        {"q8": tiny_models["Q8_0"], "q4": tiny_models["Q4_K_M"]},
        name="interleave",
        workloads=[{"name": "w", "prompt_tokens": 16, "n_predict": 8}],
        repeat={"cold": 1, "warmup": 0, "steady": 5},
        run={"timeout_s": 60, "cold_cache": "keep"},
        threads=(1, 2),
        tables={"decide": {"sequential": False}},  # exactly 5 steady reps, in blocks of 2, 2 and 1 (as all
        # the suite's plans, tests/support/plans.py)
    )
    plan = parse_plan(text, source=str(tmp_path / "p.toml"), base=tmp_path)
    engine = open_engine(f"sqlite:///{tmp_path / 'e.db'}")
    outcome = run_plan(engine, plan, out=io.StringIO(), env=clean_env(), system_check=False)
    assert outcome.counts == {"ok": 4}
    with new_session(engine) as s:
        runs = list(s.scalars(select(Run).order_by(Run.seq)))
        blocks: dict[int, dict[int, list[float]]] = {}
        for run in runs:
            loads = sorted((p.t_start_mono, p.kind, p.rep) for p in run.phases if p.name == "load")
            # one cold start per config (its first child), then one warm child per later block
            assert [(k, r) for _t, k, r in loads] == [("cold", 0), ("warmup", 1), ("warmup", 2)]
            assert [m.kind for m in run.measurements].count("cold") == 1
            steady = sorted((m.t_start_mono, m.rep) for m in run.measurements if m.kind == "steady")
            assert [rep for _t, rep in steady] == [0, 1, 2, 3, 4]
            starts = [t for t, _k, _r in loads]
            blocks[run.id] = {
                b: [t for t, _ in steady if starts[b] < t and (b == 2 or t < starts[b + 1])] for b in range(3)
            }
            assert [len(v) for v in blocks[run.id].values()] == [2, 2, 1]
        order = [r.id for r in runs]
        for block, expected in ((0, order), (1, order[::-1]), (2, order)):
            in_time = sorted(order, key=lambda rid: blocks[rid][block][0])
            assert in_time == expected, f"block {block}"
        # every block of a round after every block of the round before
        for block in (1, 2):
            assert min(blocks[r][block][0] for r in order) > max(blocks[r][block - 1][-1] for r in order)
        rows = build_rows(s, outcome.sweep_id)
    assert all(sorted(r["_tg_tps_blocks"]) == [0, 1, 2] for r in rows)
    report = render_table(rows).split("\n\n", 1)[0]
    head = report.splitlines()[0]
    assert head.startswith("Recommendation (ctx 256, depth 0, ngl "), head
    assert "threads" not in head.split("):")[0]  # a rival, named in each variant's label instead
    if "no decision" not in head:
        advice = [x for x in report.splitlines() if x.startswith("  advice: threads ")]
        assert len(advice) == 1
        assert ("faster than threads" in advice[0]) != ("within noise" in advice[0])


class StopAtTheSecondRound:
    """Telemetry hooks that stop the sweep (as Ctrl-C) when the first later block is about to run."""

    def __init__(self, _sweep_id: int) -> None:
        pass

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def before_run(self, *_a: object) -> None:
        pass

    def on_child_event(self, *_a: object) -> None:
        pass

    def after_run(self, *_a: object) -> None:
        pass

    def resume_run(self, *_a: object) -> None:
        raise KeyboardInterrupt


def test_a_stop_between_rounds_leaves_no_run_finished_with_a_block_missing(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    """Mutant seen failing: the first round's runs left ``ok`` (``_hold`` not called): the resume skipped
    them, keeping runs of 2 steady reps as finished."""
    text = plan_toml(
        {"q8": tiny_models["Q8_0"], "q4": tiny_models["Q4_K_M"]},
        name="stopped",
        workloads=[{"name": "w", "prompt_tokens": 16, "n_predict": 4}],
        repeat={"cold": 1, "warmup": 0, "steady": 3},
        run={"timeout_s": 60, "cold_cache": "keep"},
    )
    plan = parse_plan(text, source=str(tmp_path / "p.toml"), base=tmp_path)
    engine = open_engine(f"sqlite:///{tmp_path / 'e.db'}")
    stopped = run_plan(engine, plan, out=io.StringIO(), env=clean_env(), telemetry=StopAtTheSecondRound)
    assert stopped.interrupted
    with new_session(engine) as s:
        assert {r.status for r in s.scalars(select(Run))} == {"interrupted"}
    resumed = run_plan(engine, plan, out=io.StringIO(), env=clean_env())
    assert resumed.n_skipped == 0 and resumed.counts == {"ok": 2}
    with new_session(engine) as s:
        done = [r for r in s.scalars(select(Run)) if r.status == "ok"]
        assert len(done) == 2
        # every block measured again: 3 steady reps at least (more where the sequential decision went on)
        counts = {sum(m.kind == "steady" for m in r.measurements) for r in done}
        assert len(counts) == 1 and min(counts) >= 3


def test_two_labels_of_one_file_are_said_to_be_one_file(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    """Mutant seen failing: the note keyed on the path instead of the sha256 (a copy is the same file)."""
    copy = tmp_path / "copy.gguf"
    copy.write_bytes(tiny_models["Q8_0"].read_bytes())
    text = plan_toml(
        {"a": tiny_models["Q8_0"], "b": copy},
        name="twins",
        workloads=[{"name": "w", "prompt_tokens": 16, "n_predict": 4}],
        repeat={"cold": 1, "warmup": 0, "steady": 2},
        run={"timeout_s": 60, "cold_cache": "keep"},
    )
    plan = parse_plan(text, source=str(tmp_path / "p.toml"), base=tmp_path)
    engine = open_engine(f"sqlite:///{tmp_path / 'e.db'}")
    out = io.StringIO()
    run_plan(engine, plan, out=out, env=clean_env(), system_check=False)
    assert "note: a and b are one file (sha256 " in out.getvalue()
    with new_session(engine) as s:
        rows = build_rows(s, 1)
    report = render_table(rows).split("\n\n", 1)[0]
    assert "  note: a and b are one file (sha256 " in report


def test_a_sequential_group_runs_one_rep_a_block_and_stores_how_it_ended(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    """The default: blocks of one steady rep, the group going on past ``steady`` while a comparison is open
    (within ``max_steady``), each run storing its group's decision and the device state per block; the
    report says how many block pairs it took and why it stopped.

    Mutant seen failing: ``block_sizes`` ignoring ``sequential`` (blocks of 2: 3 loads, not 3 + extra)."""
    text = plan_toml(
        {"q8": tiny_models["Q8_0"], "q4": tiny_models["Q4_K_M"]},
        name="sequential",
        workloads=[{"name": "w", "prompt_tokens": 16, "n_predict": 8}],
        repeat={"cold": 1, "warmup": 0, "steady": 3},
        run={"timeout_s": 60, "cold_cache": "keep"},
        tables={"decide": {"sequential": True, "max_steady": 5}},
    )
    plan = parse_plan(text, source=str(tmp_path / "p.toml"), base=tmp_path)
    engine = open_engine(f"sqlite:///{tmp_path / 'e.db'}")
    out = io.StringIO()
    outcome = run_plan(engine, plan, out=out, env=clean_env(), system_check=False)
    assert outcome.counts == {"ok": 2}
    with new_session(engine) as s:
        runs = list(s.scalars(select(Run).order_by(Run.seq)))
        for run in runs:
            loads = [p for p in run.phases if p.name == "load"]
            steady = [m for m in run.measurements if m.kind == "steady"]
            assert len(loads) == len(steady) and 3 <= len(steady) <= 5  # one rep a block, within the budget
            assert run.decision_json is not None
        record = json.loads(runs[1].decision_json or "{}")
        assert record["stopped"] in ("settled", "budget: 5 reps a rival")
        opened = out.getvalue().count("open: ")
        rounds = max(len([m for m in r.measurements if m.kind == "steady"]) for r in runs)
        assert opened == rounds - 3  # one line each extra round, saying what is open
        rows = build_rows(s, outcome.sweep_id)
    report = render_table(rows).split("\n\n", 1)[0]
    assert "  decided: sequential, from 3 to 5 reps a rival; stopped: " in report
    assert "anytime-valid 95 % confidence sequence over paired blocks" in report
    assert {r["decision_stopped"] for r in rows} <= {record["stopped"], None}
