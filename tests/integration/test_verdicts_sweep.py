"""End to end: a real tiny model runs while a fake sysfs tree heats up and throttles; the stored verdict
says throttled, with the clock cap and the zone as its evidence."""

from __future__ import annotations

import io
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from support.fakes import FakeRoot
from support.plans import plan_toml

from edgeprof.collectors import ThermalZonesCollector, build_collectors
from edgeprof.plan import Collect, Cooldown, parse_plan
from edgeprof.runners import FAULT_ENV
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Run, Verdict
from edgeprof.sweep import Telemetry, run_plan
from edgeprof.verdicts import analyse_run, trip_points_from


def fake_hot_sys(root: Path) -> FakeRoot:
    """Synthetic sysfs tree (not a capture): one zone with a passive trip at 85 °C, one cpufreq policy."""
    fake = FakeRoot(root)
    trips = (("active", 50000), ("passive", 85000), ("critical", 105000))
    fake.thermal_zone(0, "cpu-thermal", 60000, mode="enabled", trips=trips)
    fake.cpufreq_policy(0, "0", 2000000, 2000000, 2000000, "schedutil")
    return fake


class Heater(threading.Thread):
    """Once the model is loaded: the zone climbs 40 °C/s from 60 °C (held at 84 °C, 1 °C under the passive
    trip) and the kernel "caps" the CPU from 2000 to 1000 MHz, as a thermal governor does."""

    def __init__(self, fake: FakeRoot) -> None:
        super().__init__(daemon=True)
        self.fake = fake
        self.go = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.go.wait(0.01):
            if self.stop.is_set():
                return
        policy = "sys/devices/system/cpu/cpufreq/policy0"
        self.fake.replace(f"{policy}/scaling_max_freq", 1000000)
        self.fake.replace(f"{policy}/scaling_cur_freq", 1000000)
        # the temperature is a function of the time since the load (not of how often this thread ran)
        t0 = time.monotonic()
        while not self.stop.wait(0.01):
            temp = min(60.0 + 40.0 * (time.monotonic() - t0), 84.0)
            self.fake.replace("sys/class/thermal/thermal_zone0/temp", int(temp * 1000))


@pytest.mark.llama
def test_end_to_end_a_run_that_heats_and_loses_clock_is_judged_throttled(tmp_path: Path, tiny_models) -> None:
    fake = fake_hot_sys(tmp_path / "root")
    text = plan_toml(
        [tiny_models["Q4_K_M"]],
        workloads=[{"name": "w", "prompt_tokens": 32, "n_predict": 200}],
        repeat={"warmup": 2, "steady": 20},
        run={"timeout_s": 600},
    )
    plan = parse_plan(text, str(tmp_path / "p.toml"), tmp_path)
    engine = open_engine(tmp_path / "e2e.db")
    collectors = build_collectors(fake.root)
    heater = Heater(fake)

    class HeatingTelemetry(Telemetry):
        def on_child_event(self, run: Run, event: dict[str, Any]) -> None:
            super().on_child_event(run, event)
            if event.get("event") == "loaded":
                heater.go.set()

    def factory(sweep_id: int) -> Telemetry:
        return HeatingTelemetry(
            engine, sweep_id, Collect(interval_ms=50, idle_s=0.2), Cooldown(), collectors=collectors
        )

    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    heater.start()
    try:
        outcome = run_plan(engine, plan, out=io.StringIO(), telemetry=factory, env=env)
    finally:
        heater.stop.set()
        heater.join(timeout=5)
    assert outcome.counts == {"ok": 1}
    trips = trip_points_from(collectors)
    assert trips == ThermalZonesCollector(fake.root).trip_points()
    assert ("passive", 85.0) in trips["temp.cpu_c"]

    with new_session(engine) as s:
        run = s.scalars(select(Run)).one()
        analyse_run(s, run.id, trips)
    with new_session(engine) as s:  # read back what was stored, in a fresh session
        stored = {v.kind: v for v in s.scalars(select(Verdict).where(Verdict.run_id == run.id))}
    assert set(stored) == {"throttle", "stability", "interference"}
    evidence = json.loads(stored["throttle"].evidence_json)
    assert evidence["samples_under_load"] >= 5, "the run was too short for 5 readings at 50 ms"
    assert stored["throttle"].value == "throttled", evidence["reasons"]
    assert {"clock", "temperature"} <= set(evidence["signals"])
    assert evidence["clocks"]["domains"]["cpu_cap.policy0"]["status"] == "dropped"
    assert evidence["clocks"]["domains"]["cpu_cap.policy0"]["reference_mhz"] == 2000.0
    zone = evidence["temperature"]["zones"]["temp.cpu_c"]
    assert zone["rising"] or zone["near_trip"]
    assert zone["trip"] == {"type": "passive", "c": 85.0}
    assert stored["stability"].value in ("stable", "unstable")
