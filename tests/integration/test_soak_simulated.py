"""SYNTHETIC: a real soak of the tiny demo model on a simulated device, judged end to end.

The device is ``support.heating.LiveDevice``, played in a fake sysfs root by a background thread while the
soak runs: one thermal zone whose temperature follows a first-order heating model, with a passive trip
point, and a cpufreq policy whose cap drops when the zone passes the trip. The real ThermalZones and
cpufreq collectors read that root every 50 ms; the real /proc/stat counters say what other processes did.

Every figure the assertions rest on is the simulation's, never the machine's speed: the zone's temperature
is a function of the time since the soak's start (not of the CPU the child got), and the worker's test
fault (``SLOW_FILE_ENV``) books each decode step at the simulated device's step time, longer once the cap
dropped. So the tests give the same answer on an idle machine and at load 10 (benchmarks/self/soak.py
measures real soaks).
"""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import threading
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


def soak_on(
    tmp_path: Path, model: Path, device: LiveDevice, duration_s: float, **keys: float
) -> tuple[Any, int]:
    """One soak of ``model`` while ``device`` plays; (engine, run id). ``keys``: more keys of the soak
    workload (its steady-state slope and span)."""
    soak = {"name": "soak", "kind": "soak", "prompt_tokens": 16, "n_predict": 32,
            "duration_s": duration_s, "window_s": WINDOW_S, **keys}  # fmt: skip
    toml = plan_toml({"q8": model}, name="sim", workloads=[soak])
    plan = parse_plan(toml, str(tmp_path / "p.toml"), tmp_path)
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
    return dict(json.loads(verdict.evidence_json))


def window_at(rows: list[SoakWindow], t: float) -> int:
    return next(w.idx for w in rows if w.t_start_mono <= t < w.t_end_mono)


def test_synthetic_a_cap_dropped_at_the_trip_point_is_a_throttle_at_that_window_and_its_slowdown(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    # Half a core heats the zone toward 80 °C (80 °C per core above 40 °C, tau 4 s): the 54 °C trip comes
    # 4 s · ln(40 / 26) = 1.72 s into the soak, after the 3 burst windows (1.5 s) and before the last third
    # (from 4 s), so that burst and sustained are the speeds before and after it.
    device = LiveDevice(FakeRoot(tmp_path / "root"), tmp_path / "slow", trip_c=54.0, slowdown=SLOWDOWN,
                        k_c_per_core=80.0, load_cores=0.5)  # fmt: skip
    assert device.trip_after_s() == pytest.approx(4.0 * math.log(40.0 / 26.0))
    engine, run_id = soak_on(tmp_path, tiny_models["Q8_0"], device, duration_s=6)
    verdict, rows = stored(engine, run_id)
    ev = evidence(verdict)
    assert device.trip_t is not None and device.soak_t0 is not None
    assert device.trip_t - device.soak_t0 == pytest.approx(1.72, abs=0.01)
    assert verdict.value == "throttled", ev["reasons"]
    trip_window = window_at(rows, device.trip_t)
    assert abs(ev["first_throttle"]["window"] - trip_window) <= 1, (ev["first_throttle"], trip_window)
    # the first signal is the cap the real cpufreq collector read, or the speed drop it caused (dated at
    # the start of the window the cap dropped in, so it can come first); the cap is on the window rows
    what = ev["first_throttle"]["what"]
    assert what == "cpu clock cap 1510 -> 1190 MHz" or what.startswith("speed -"), what
    capped = [w.idx for w in rows if "cpu cap 1510->1190 MHz" in json.loads(w.throttle_json or "[]")]
    assert capped and abs(capped[0] - trip_window) <= 1 and capped == list(range(capped[0], len(rows)))
    # the simulated device's steps took 40 % longer from the trip on: sustained / burst is 0.6, and every
    # window before the trip is at the simulated speed, every one after it at 60 % of it
    assert ev["sustained_ratio"] == pytest.approx(1 - SLOWDOWN, abs=1e-3)
    before = [w.tg_tps for w in rows if w.idx < trip_window]
    after = [w.tg_tps for w in rows if w.idx > trip_window]
    assert before == pytest.approx([1000.0 / device.step_ms] * len(before), rel=1e-6)
    assert after == pytest.approx([(1 - SLOWDOWN) * 1000.0 / device.step_ms] * len(after), rel=1e-6)


def test_synthetic_without_the_slowdown_a_zone_settling_below_its_trip_is_not_throttled_and_steady(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    # tau 0.5 s: the zone settles 12 °C above ambient (20 °C per core, 0.6 of one) within 3 s, below the
    # 95 °C trip
    device = LiveDevice(FakeRoot(tmp_path / "root"), tmp_path / "slow", trip_c=95.0, tau_s=0.5,
                        k_c_per_core=20.0, load_cores=0.6)  # fmt: skip
    # The plan states the steady-state criterion scaled to seconds (1 °C per span: the default 0.5 °C/min
    # over 120 s is 30 °C/min over 2 s), so a 6-s soak can show it.
    engine, run_id = soak_on(
        tmp_path, tiny_models["Q8_0"], device, duration_s=6, steady_span_s=2.0, steady_c_per_min=30.0
    )
    verdict, rows = stored(engine, run_id)
    ev = evidence(verdict)
    # it heated 12 °C and stayed below the trip, at the simulated speed throughout
    assert device.trip_t is None and device.hottest_c == pytest.approx(device.settled_c(), abs=0.1)
    assert ev["first_throttle"] is None
    assert ev["thermal"]["steady_state_s"] is not None and ev["thermal"]["steady_state_s"] <= 6.0
    assert ev["thermal"]["steady_temp_c"] == pytest.approx(device.settled_c(), abs=0.5)
    assert ev["sustained_ratio"] == pytest.approx(1.0, abs=1e-3)
    assert verdict.value == "not_throttled", ev["reasons"]
    assert "(under 30 °C/min over 2 s)" in ev["reasons"][-1]
    # With the default criterion (0.5 °C/min over 120 s) the same windows and series cannot show a steady
    # state, and the judgement says so instead of inventing one.
    with new_session(engine) as s:
        inputs = inputs_for_run(s, s.get(Run, run_id))
    speeds = [WindowSpeed(w.idx, w.t_start_mono, w.t_end_mono, w.tokens, w.decode_s, w.tg_tps, w.pp_tps)
              for w in rows]  # fmt: skip
    judged = judge_soak(speeds, inputs.series, inputs.roles, SoakThresholds(), gpu_in_use=inputs.gpu_in_use)
    assert judged.steady_state_s is None
    assert judged.value == "not_steady", judged.evidence["reasons"]
    assert "shorter than the 120-s span steady state is judged over" in judged.evidence["reasons"][0]


class Hog:
    """A CPU hog started ``after_s`` into the soak (on the simulation's time): a real busy process, so that
    the /proc/stat counters see other work, and the simulated device told that it lost ``share`` of its
    core to it (its decode steps take that much longer), so the slowdown is the same on any machine. It
    heats nothing."""

    def __init__(self, device: LiveDevice, after_s: float, share: float) -> None:
        self.device, self.after_s, self.share = device, after_s, share
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_t: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-hog", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            t0 = self.device.soak_t0
            if t0 is not None and time.monotonic() >= t0 + self.after_s:
                self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
                self.device.slow_by(self.share)
                self.started_t = t0 + self.after_s
                return

    def __enter__(self) -> Hog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def test_synthetic_a_cpu_hog_halfway_without_heat_is_a_slowdown_not_thermal(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    device = LiveDevice(FakeRoot(tmp_path / "root"), tmp_path / "slow", k_c_per_core=0.0, trip_c=54.0)
    with Hog(device, after_s=3.0, share=2 / 3) as hog:
        engine, run_id = soak_on(tmp_path, tiny_models["Q8_0"], device, duration_s=6)
    verdict, rows = stored(engine, run_id)
    ev = evidence(verdict)
    assert hog.started_t is not None and device.trip_t is None
    assert verdict.value == "slowdown_not_thermal", ev["reasons"]
    assert ev["first_throttle"] is None
    # the hog took two thirds of the simulated core: sustained is a third of burst
    assert ev["sustained_ratio"] == pytest.approx(1 / 3, abs=1e-3), ev["reasons"]
    assert ev["cause"] == "contention", ev["reasons"]
    assert ev["clocks"] == "held" and ev["thermal"]["rise_c"] == pytest.approx(0.0, abs=0.01)
    # every window after the hog's start is a slow one
    hog_window = window_at(rows, hog.started_t)
    assert set(range(hog_window + 1, len(rows))) <= set(ev["slow_windows"]), (hog_window, ev["slow_windows"])
