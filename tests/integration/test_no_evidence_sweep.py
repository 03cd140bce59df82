"""A live sweep on a fake device root with no thermal zone and no cpufreq, so the only "CPU clock" is
psutil's /proc/cpuinfo figure (static on this VM and on any machine without cpufreq): no row may say
``not_throttled``, and the reason names what is missing. The root is SYNTHETIC (support.fakes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select
from support.fakes import FakeRoot
from support.runs import one_config_sweep

from edgeprof.collectors import build_collectors
from edgeprof.plan import Collect
from edgeprof.storage.db import new_session
from edgeprof.storage.models import Verdict


@pytest.mark.llama
def test_no_thermometer_and_a_static_clock_never_read_not_throttled(tmp_path: Path, tiny_models) -> None:
    fake = FakeRoot(tmp_path / "root")  # no thermal zone, no cpufreq policy
    collect = Collect(interval_ms=50, idle_s=0.2)
    collectors = build_collectors(fake.root)
    engine = one_config_sweep(tmp_path, tiny_models["Q4_K_M"], collect, steady=5, collectors=collectors)
    with new_session(engine) as s:
        throttle = s.scalars(select(Verdict).where(Verdict.kind == "throttle")).one()
    evidence = json.loads(throttle.evidence_json)
    found = evidence.get("evidence", {})
    if found.get("thermometers") or found.get("clocks"):
        pytest.skip(f"this machine has a thermometer or a moving clock: {found}")
    assert throttle.value == "inconclusive", evidence["reasons"]
    assert "no thermometer and no observable clock on this machine" in evidence["reasons"]
    assert not any("not thermal" in r for r in evidence["reasons"])
    # the same judgement from the command line, as JSON
    out = subprocess.run(
        [sys.executable, "-m", "edgeprof", "analyse", "--db", str(tmp_path / "t.db"), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "XDG_DATA_HOME": str(tmp_path / "x")},
    )
    assert out.returncode == 0, out.stderr
    [judged] = json.loads(out.stdout).values()
    assert judged["throttle"]["value"] == "inconclusive"
