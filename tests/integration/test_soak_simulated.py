"""SYNTHETIC: a real soak of the tiny demo model on a simulated device, judged end to end.

The device is ``support.heating.LiveDevice``, played in a fake sysfs root by a background thread while the
soak runs: one thermal zone whose temperature follows a first-order heating model driven by the child's
CPU time, with a passive trip point, and a cpufreq policy whose cap drops when the zone passes the trip.
The real ThermalZones and cpufreq collectors read that root every 50 ms; the real /proc/stat counters say
what other processes did. When the cap drops, the worker's test fault (``SLOW_FILE_ENV``) slows its
decode by the same fraction a real cap would, so the stored soak verdict has a known answer.

Nothing here asserts on a speed beyond the ratio the fault injects (the machine may be shared): the
windows' speeds are compared with each other, never with a number of tokens per second.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from support.fakes import FakeRoot
from support.heating import LiveDevice
from support.plans import plan_toml

from edgeprof.collectors import CpuFreqCollector, ProcStatCollector, ThermalZonesCollector
from edgeprof.plan import Collect, Cooldown, parse_plan
from edgeprof.runners import FAULT_ENV, SLOW_FILE_ENV
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Run, SoakWindow, Verdict
from edgeprof.sweep import Telemetry, run_plan
from edgeprof.verdicts import SoakThresholds, WindowSpeed, inputs_for_run, judge_soak

pytestmark = pytest.mark.llama

WINDOW_S = 0.5
SLOWDOWN = 0.4  # the test fault's share of the decode speed lost once the cap drops


class DeviceTelemetry(Telemetry):
    """The sweep's own telemetry, also handing the child's events to the simulated device (its pid, the
    soak's start on the shared clock)."""

    def __init__(self, device: LiveDevice, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.device = device

    def on_child_event(self, run: Run, event: dict[str, Any]) -> None:
        self.device.on_event(event)
        super().on_child_event(run, event)


def soak_on(tmp_path: Path, model: Path, device: LiveDevice, duration_s: float) -> tuple[Any, int]:
    """One soak of ``model`` while ``device`` plays; (engine, run id)."""
    soak = {"name": "soak", "kind": "soak", "prompt_tokens": 16, "n_predict": 32,
            "duration_s": duration_s, "window_s": WINDOW_S}  # fmt: skip
    plan = parse_plan(plan_toml({"q8": model}, name="sim", workloads=[soak]), str(tmp_path / "p.toml"), tmp_path)
    engine = open_engine(tmp_path / "sim.db")

    def factory(sweep_id: int) -> Telemetry:
        collectors = [ThermalZonesCollector(device.root.root), CpuFreqCollector(device.root.root),
                      ProcStatCollector()]  # fmt: skip
        # the zone starts at ambient (40 °C): below 45 °C the cooldown is over at once
        collect, cooldown = Collect(interval_ms=50, idle_s=0.0), Cooldown(below_c=45.0)
        return DeviceTelemetry(device, engine, sweep_id, collect, cooldown, collectors=collectors)

    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    env[SLOW_FILE_ENV] = str(device.slow_file)
    with device:
        outcome = run_plan(engine, plan, out=io.StringIO(), telemetry=factory, env=env)
    assert outcome.counts == {"ok": 1}
    with new_session(engine) as s:
        run_id = s.scalars(select(Run.id)).one()
    return engine, run_id


def stored(engine: Any, run_id: int) -> tuple[Verdict, list[SoakWindow]]:
    with new_session(engine) as s:
        verdict = s.scalars(select(Verdict).where(Verdict.run_id == run_id, Verdict.kind == "soak")).one()
        rows = list(s.scalars(select(SoakWindow).where(SoakWindow.run_id == run_id).order_by(SoakWindow.idx)))
        s.expunge_all()
    return verdict, rows


def evidence(verdict: Verdict) -> dict[str, Any]:
    import json

    return dict(json.loads(verdict.evidence_json))


def window_at(rows: list[SoakWindow], t: float) -> int:
    return next(w.idx for w in rows if w.t_start_mono <= t < w.t_end_mono)


def test_synthetic_a_cap_dropped_at_the_trip_point_is_a_throttle_at_that_window_and_its_slowdown(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    # One decode thread heats the zone toward 40 + 40 °C per core (tau 4 s): the 54 °C trip comes 1.7 s into
    # the soak at a whole core, 3.5 s at 0.6 of one (a shared machine): after the 3 burst windows (1.5 s),
    # before the last third (from 4 s), so that burst and sustained are the speeds before and after it.
    device = LiveDevice(FakeRoot(tmp_path / "root"), tmp_path / "slow", trip_c=54.0, slowdown=SLOWDOWN)
    engine, run_id = soak_on(tmp_path, tiny_models["Q8_0"], device, duration_s=6)
    verdict, rows = stored(engine, run_id)
    ev = evidence(verdict)
    assert device.trip_t is not None, f"the zone never reached its trip point (hottest {device.hottest_c:.1f})"
    assert verdict.value == "throttled", ev["reasons"]
    trip_window = window_at(rows, device.trip_t)
    assert abs(ev["first_throttle"]["window"] - trip_window) <= 1, (ev["first_throttle"], trip_window)
    assert ev["first_throttle"]["what"] == "cpu clock cap 1510 -> 1190 MHz"
    # the fault slowed decode by 40 %: sustained / burst near 0.6 (well below 0.8), and every window after
    # the trip below every window before it
    assert ev["sustained_ratio"] < 0.8, ev
    assert ev["sustained_ratio"] == pytest.approx(1 - SLOWDOWN, abs=0.12)
    before = [w.tg_tps for w in rows if w.idx < trip_window and w.tg_tps]
    after = [w.tg_tps for w in rows if w.idx > trip_window and w.tg_tps]
    assert before and after and max(after) < min(before)
