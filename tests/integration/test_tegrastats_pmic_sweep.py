"""A live sweep whose tegrastats collector reads a TX2 capture line with ``PMIC@100C`` (the SYNTHETIC test
double tests/fixtures/fake_tegrastats/tegrastats replaying tests/fixtures/captures/tegrastats, a real line)
never reports 100 °C as the board's temperature: not in a verdict, a column, a phase aggregate or a
Prometheus metric."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from support.captures import TEGRASTATS_CAPTURES, read_capture
from support.paths import FIXTURES
from support.runs import one_config_sweep

FAKE = FIXTURES / "fake_tegrastats" / "tegrastats"


@pytest.mark.llama
def test_a_pmic_at_100_c_is_never_the_boards_temperature(
    tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy import select

    from edgeprof.daemon.exposition import metrics_text
    from edgeprof.plan import Collect
    from edgeprof.report import build_rows
    from edgeprof.storage.db import new_session
    from edgeprof.storage.models import Measurement, PhaseStat, Run, Verdict

    lines = [ln for ln in read_capture("tx2_l4t28-era_2.txt", TEGRASTATS_CAPTURES) if "PMIC@100C" in ln]
    assert lines, "the TX2 capture holds PMIC@100C"
    source = tmp_path / "lines.txt"
    source.write_text("".join(f"{ln}\n" for ln in lines))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(FAKE, bin_dir / "tegrastats")
    path = f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("FAKE_TEGRASTATS_LINES", str(source))
    collect = Collect(interval_ms=100, idle_s=0.3, collectors=("tegrastats",))
    engine = one_config_sweep(
        tmp_path, tiny_models["Q8_0"], collect, tables={"collect": {"collectors": ["tegrastats"]}}
    )
    with new_session(engine) as s:
        run = s.scalars(select(Run)).one()
        # the cooldown reads the board's temperature from tegrastats when it has no thermal zone
        assert run.start_temp_c is not None and run.start_temp_c < 100.0, run.start_temp_c
        temps = [m.temp_max_c for m in s.scalars(select(Measurement).where(Measurement.run_id == run.id))]
        assert temps and all(t is not None and t < 100.0 for t in temps), temps
        aggregated = {p.metric for p in s.scalars(select(PhaseStat).where(PhaseStat.run_id == run.id))}
        assert "temp.pmic_c" not in aggregated and "temp.gpu_c" in aggregated
        is_throttle = Verdict.kind == "throttle"
        throttle = s.scalars(select(Verdict).where(Verdict.run_id == run.id, is_throttle)).one()
        evidence = json.loads(throttle.evidence_json)
        assert "temp.pmic_c" not in evidence["temperature"]["zones"]
        assert "temp.pmic_c" in evidence["evidence"]["excluded_zones"]
        rows = build_rows(s, run.sweep_id)
        assert all(r["temp_max_c"] is None or r["temp_max_c"] < 100.0 for r in rows)
    scraped = metrics_text(engine).decode()
    temp_lines = [ln for ln in scraped.splitlines() if ln.startswith("edgeprof_temperature_max_celsius")]
    assert temp_lines and all(float(ln.rsplit(" ", 1)[1]) < 100.0 for ln in temp_lines), temp_lines
