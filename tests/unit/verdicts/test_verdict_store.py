"""Verdicts on stored runs (agent/verdicts/store.py): a hand-built database, judged and stored, the clock
reference taken from comparable runs, and the roles and trip points stored with a sweep."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session
from support import dbbuild
from support.throttle_runs import STEADY_TPS, TRIPS, flat

from edgeprof.collectors import MetricRole
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import CollectorStatus, Measurement, Phase, Run, Sample, Sweep, Verdict
from edgeprof.verdicts import (
    analyse_run,
    attach_verdicts,
    run_roles,
    stored_roles,
    stored_trip_points,
    summary_line,
)


def add_run(
    s: Session,
    sweep: Sweep,
    seq: int,
    *,
    t0: float,
    temp: Callable[[float], float],
    freq: Callable[[float], float],
    tps: Sequence[float],
    threads: int = 4,
) -> Run:
    run = dbbuild.add_run(s, sweep, seq, model_label="m-q4", n_threads=threads)
    s.add(Phase(run_id=run.id, name="idle", t_start_mono=t0 - 5, t_end_mono=t0))
    s.add(Phase(run_id=run.id, name="load", kind="cold", rep=0, t_start_mono=t0, t_end_mono=t0 + 1))
    for i, v in enumerate(tps):
        a = t0 + 1 + 10 * i
        s.add(Phase(run_id=run.id, name="prefill", kind="steady", rep=i, t_start_mono=a, t_end_mono=a + 1))
        s.add(Phase(run_id=run.id, name="decode", kind="steady", rep=i, t_start_mono=a + 1, t_end_mono=a + 9))
        s.add(
            Measurement(
                run_id=run.id, kind="steady", rep=i, tg_tps=v, pp_tps=500.0, t_start_mono=a, t_end_mono=a + 9
            )
        )
    t = t0 - 5.0
    while t <= t0 + 1 + 10 * len(tps):
        rel = t - t0
        for metric, value in (("temp.cpu_c", temp(rel)), ("cpufreq.policy0.cur_mhz", freq(rel))):
            s.add(
                Sample(
                    sweep_id=sweep.id,
                    run_id=run.id,
                    t_mono=t,
                    t_wall=t,
                    source="x",
                    metric=metric,
                    value=value,
                )
            )
        s.add(
            Sample(
                sweep_id=sweep.id,
                run_id=run.id,
                t_mono=t,
                t_wall=t,
                source="x",
                metric="power.vdd_in_mw",
                value=None,
            )
        )
        t += 1.0
    s.commit()
    return run


def make_sweep(s: Session) -> Sweep:
    sweep = dbbuild.add_sweep(s, name="s", plan_hash="h", n_specs=3)
    s.commit()
    return sweep


def test_analyse_run_stores_verdicts_and_uses_comparable_runs_as_clock_reference(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "v.db")
    with new_session(engine) as s:
        sweep = make_sweep(s)
        cool = add_run(s, sweep, 1, t0=1000.0, temp=flat(45.0), freq=flat(2000.0), tps=STEADY_TPS)
        hot = add_run(s, sweep, 2, t0=2000.0, temp=lambda r: 70 + 0.2 * r, freq=flat(1500.0), tps=STEADY_TPS)
        other = add_run(
            s, sweep, 3, t0=3000.0, temp=lambda r: 70 + 0.2 * r, freq=flat(1500.0), tps=STEADY_TPS, threads=8
        )

        stored = analyse_run(s, cool.id, TRIPS)
        assert [(v.kind, v.value) for v in stored] == [
            ("throttle", "not_throttled"),
            ("stability", "stable"),
            ("interference", "inconclusive"),  # this hand-built run has no CPU-time counters
        ]
        hot_v = {v.kind: v for v in analyse_run(s, hot.id, TRIPS)}
        assert hot_v["throttle"].value == "throttled"
        assert summary_line(hot_v["throttle"]).startswith(
            "throttled: cpu clock 1500 MHz under load = 75% of 2000"
        )
        evidence = json.loads(hot_v["throttle"].evidence_json)
        assert evidence["clocks"]["domains"]["cpu"]["reference_mhz"] == 2000.0
        # A different thread count is a different load shape: run 1 is not its reference.
        other_v = {v.kind: v for v in analyse_run(s, other.id, TRIPS)}
        assert other_v["throttle"].value == "not_throttled"

        # A second collector reporting the same metric (jtop beside tegrastats) is not interleaved into it.
        for i in range(60):
            t = 995.5 + i
            s.add(
                Sample(
                    sweep_id=sweep.id,
                    run_id=cool.id,
                    t_mono=t,
                    t_wall=t,
                    source="jtop",
                    metric="temp.cpu_c",
                    value=95.0,
                )
            )
        s.commit()
        again = json.loads(analyse_run(s, cool.id, TRIPS)[0].evidence_json)
        assert again["temperature"]["zones"]["temp.cpu_c"]["max_c"] == 45.0

        analyse_run(s, hot.id, TRIPS)  # judging again replaces, never duplicates
        # throttle, stability, interference: one row each
        assert len(list(s.scalars(select(Verdict).where(Verdict.run_id == hot.id)))) == 3
        rows = attach_verdicts(s, [{"run_id": cool.id}, {"run_id": hot.id}, {"run_id": 999}])
        assert [r["throttle_verdict"] for r in rows] == ["not_throttled", "throttled", None]
        assert rows[0]["stability_verdict"] == "stable"
        with pytest.raises(ValueError, match="no run"):
            analyse_run(s, 12345)


def test_stored_roles_come_first_and_the_collector_classes_answer_for_the_rest(
    tmp_path: Path,
) -> None:
    engine = open_engine(tmp_path / "roles.db")
    board = MetricRole("temperature", "C", "gpu")
    with new_session(engine) as s:
        sweep = make_sweep(s)
        metrics = [
            {"name": "hwmon0.edge_c", "unit": "C", "kind": "gauge", "role": board.as_json()},
            # stored as what it was on that machine, whatever a collector of this name declares today
            {"name": "temp.cpu_c", "unit": "C", "kind": "gauge", "role": {"role": "other", "unit": "C"}},
            {"name": "temp.gpu_c", "unit": "C", "kind": "gauge", "trip_points": [["passive", 95.0]]},
        ]
        s.add(
            CollectorStatus(
                sweep_id=sweep.id, name="sysfs_thermal", ok=True, reason="", metrics_json=json.dumps(metrics)
            )
        )
        s.commit()
        assert stored_roles(s, sweep.id) == {"hwmon0.edge_c": board, "temp.cpu_c": MetricRole("other", "C")}
        assert stored_trip_points(s, sweep.id) == {"temp.gpu_c": [("passive", 95.0)]}
        sources = {"hwmon0.edge_c": "gone", "temp.cpu_c": "sysfs_thermal", "cpufreq.policy0.cur_mhz": "x"}
        roles = run_roles(s, sweep.id, sources)
    assert roles["hwmon0.edge_c"] == board
    assert roles["temp.cpu_c"].role == "other"
    # a metric the sweep stored no role for (an older sweep): as its collector class declares it
    assert roles["cpufreq.policy0.cur_mhz"].role == "clock"
    assert set(roles) == set(sources)
