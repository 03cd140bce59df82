"""The sweep's verdict step (agent/sweep/verdicts.py): a run without telemetry still gets its stability
verdict (the reps' speeds are all it needs), and a verdict that raises is stored as ``error`` with its
reason and said in one warning line, its sibling verdicts judged as usual."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session
from support import dbbuild

from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Measurement, Run, Verdict
from edgeprof.sweep.verdicts import judge_run


def run_without_telemetry(s: Session, tps: list[float]) -> Run:
    """A run with steady reps and not one sample (a ``--no-telemetry`` sweep's run)."""
    sweep = dbbuild.add_sweep(s)
    run = dbbuild.add_run(s, sweep, 1, model_label="m-q4")
    for i, v in enumerate(tps):
        a = 10.0 * i
        s.add(Measurement(run_id=run.id, kind="steady", rep=i, tg_tps=v, pp_tps=500.0,
                          t_start_mono=a, t_end_mono=a + 9))  # fmt: skip
    s.commit()
    return run


def stored(s: Session, run_id: int) -> dict[str, Verdict]:
    return {v.kind: v for v in s.scalars(select(Verdict).where(Verdict.run_id == run_id))}


def test_a_run_without_telemetry_gets_its_stability_verdict(tmp_path: Path) -> None:
    with new_session(open_engine(tmp_path / "v.db")) as s:
        steady = run_without_telemetry(s, [20.0, 20.1, 19.9, 20.0, 20.2])
        noisy = run_without_telemetry(s, [20.0, 31.0, 12.0, 20.0, 20.2])
        warnings: list[str] = []
        for run in (steady, noisy):
            judge_run(s, run, warnings.append)
        assert warnings == []
        assert stored(s, steady.id)["stability"].value == "stable"
        assert stored(s, noisy.id)["stability"].value == "unstable"
        # what needs telemetry says what is missing, never a clean bill of health
        assert stored(s, steady.id)["throttle"].value == "inconclusive"
        assert stored(s, steady.id)["interference"].value != "quiet"


def test_a_verdict_that_raises_is_stored_as_error_with_one_warning_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import edgeprof.verdicts.store as store

    def broken(*_a: object, **_k: object) -> object:
        raise ZeroDivisionError("spread of nothing")

    monkeypatch.setattr(store, "stability", broken)
    with new_session(open_engine(tmp_path / "v.db")) as s:
        run = run_without_telemetry(s, [20.0, 20.1, 19.9, 20.0, 20.2])
        warnings: list[str] = []
        judge_run(s, run, warnings.append)
        verdicts = stored(s, run.id)
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("warning: run ") and "stability" in warnings[0]
    assert "ZeroDivisionError: spread of nothing" in warnings[0]
    assert verdicts["stability"].value == "error"
    reasons = json.loads(verdicts["stability"].evidence_json)["reasons"]
    assert reasons == ["the stability verdict failed: ZeroDivisionError: spread of nothing"]
    assert verdicts["throttle"].value == "inconclusive"  # its siblings are judged as usual


def test_gathering_that_raises_stores_every_verdict_as_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import edgeprof.verdicts.store as store

    def broken(*_a: object, **_k: object) -> object:
        raise RuntimeError("samples unreadable")

    monkeypatch.setattr(store, "inputs_for_run", broken)
    with new_session(open_engine(tmp_path / "v.db")) as s:
        run = run_without_telemetry(s, [20.0, 20.1, 19.9])
        warnings: list[str] = []
        judge_run(s, run, warnings.append)
        values = {k: v.value for k, v in stored(s, run.id).items()}
    assert values == {"throttle": "error", "stability": "error", "interference": "error"}
    assert len(warnings) == 1 and "samples unreadable" in warnings[0]


def test_storing_that_fails_stores_the_error_instead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from edgeprof import verdicts

    def broken(*_a: object, **_k: object) -> object:
        raise RuntimeError("database said no")

    monkeypatch.setattr(verdicts, "analyse_run", broken)
    with new_session(open_engine(tmp_path / "v.db")) as s:
        run = run_without_telemetry(s, [20.0, 20.1, 19.9])
        warnings: list[str] = []
        judge_run(s, run, warnings.append)
        values = {k: v.value for k, v in stored(s, run.id).items()}
    assert values == {"throttle": "error", "stability": "error", "interference": "error"}
    assert len(warnings) == 1 and "database said no" in warnings[0]


def test_closing_a_config_judges_it_without_telemetry(tmp_path: Path) -> None:
    """The config loop's last step for a config is the verdict step, with no telemetry hooks at all."""
    from types import SimpleNamespace

    from edgeprof.sweep.interleave import OpenConfig
    from edgeprof.sweep.loop import ConfigLoop, SweepOutcome

    lines: list[str] = []
    progress = SimpleNamespace(line=lines.append, finish=lambda *a: lines.append("finish"))
    fitter = SimpleNamespace(annotate_bandwidth=lambda *a: None, calibrate=lambda *a: None)
    with new_session(open_engine(tmp_path / "v.db")) as s:
        run = run_without_telemetry(s, [20.0, 20.1, 19.9, 20.0, 20.2])
        run.status = "failed"  # described by its status: no executor needed for the line
        s.commit()
        loop = ConfigLoop.__new__(ConfigLoop)  # only what close_config reads
        loop.session, loop.progress, loop.fitter, loop.hooks = s, progress, fitter, None  # type: ignore[assignment]
        loop.outcome, loop.index = SweepOutcome(sweep_id=run.sweep_id, n_specs=1, n_skipped=0), 1
        loop.close_config(OpenConfig(None, run, None, "m-q4", 1, 0.0))  # type: ignore[arg-type]
        assert stored(s, run.id)["stability"].value == "stable"
    assert lines == ["finish"]
