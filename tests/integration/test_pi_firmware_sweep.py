"""A real sweep (llama.cpp decoding a tiny model) whose telemetry is a SYNTHETIC Raspberry Pi
(tests/support/boards.py): its firmware caps and throttles the ARM clock (0x20006, 1000 MHz measured) while
cpufreq keeps reading the 1500 MHz Linux asked for. The stored throttle verdict names the firmware's flags,
judges the measured clock, says the cpufreq figure was not what ran, and the cooldown read the board's
temperature from the firmware, the only thermometer it has."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.boards import SyntheticPi
from support.fakes import FakeRoot
from support.runs import one_config_sweep

from edgeprof.collectors.rpi_firmware import RpiFirmwareCollector
from edgeprof.collectors.sysfs_cpufreq import CpuFreqCollector

pytestmark = pytest.mark.timeout(180)


@pytest.mark.llama
def test_a_pi_sweep_is_judged_on_its_firmware(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    from sqlalchemy import select

    from edgeprof.plan import Collect
    from edgeprof.storage.db import new_session
    from edgeprof.storage.models import CollectorStatus, Run, Verdict

    root = tmp_path / "root"
    pi = SyntheticPi(FakeRoot(root), jitter_hz=52_736)
    pi.set(arm_mhz=1000.0, temp_c=81.5, throttled=0x20006, requested_mhz=1500.0)
    collectors = [CpuFreqCollector(root), RpiFirmwareCollector(root, runner=pi.vcgencmd)]
    collect = Collect(interval_ms=100, idle_s=0.3, collectors=("sysfs_cpufreq", "rpi_firmware"))
    # long enough under load for the verdict's 5 readings at 100 ms even where the tiny model decodes at
    # its quiet-machine speed (10 reps of 224 tokens: over a second)
    engine = one_config_sweep(
        tmp_path, tiny_models["Q8_0"], collect, steady=10, n_predict=224, collectors=collectors
    )
    with new_session(engine) as s:
        run = s.scalars(select(Run)).one()
        assert run.start_temp_c == pytest.approx(81.5)  # the firmware is the cooldown's thermometer
        status = s.scalars(select(CollectorStatus).where(CollectorStatus.name == "rpi_firmware")).one()
        stored = {m["name"]: m.get("role", {}) for m in json.loads(status.metrics_json)}
        assert stored["rpi.throttled_flags"]["flags"] == "rpi_firmware"  # the decoder travels with the sweep
        assert stored["rpi.arm_clock_mhz"]["measured"] is True
        verdict = s.scalars(select(Verdict).where(Verdict.run_id == run.id, Verdict.kind == "throttle")).one()
        evidence = json.loads(verdict.evidence_json)
    assert verdict.value == "throttled", evidence["reasons"]
    assert any(
        r.startswith("rpi.throttled_flags: ArmFrequencyCapped, Throttled during load (cause: heat)")
        for r in evidence["reasons"]
    ), evidence["reasons"]
    assert evidence["clocks"]["domains"]["cpu"]["metrics"] == ["rpi.arm_clock_mhz"]
    assert any("not what ran" in n for n in evidence["notes"]), evidence["notes"]
