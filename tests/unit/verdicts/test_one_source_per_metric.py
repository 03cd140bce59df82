"""One collector per metric (agent/verdicts/judge.py and agent/report/figures/plots.py): when two
collectors report the same metric, the verdicts and the plots read one of them, never both interleaved.
Synthetic readings."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from edgeprof.report.figures import load_samples
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Device, Run, Sweep
from edgeprof.storage.samples import write_batch
from edgeprof.telemetry import SampleRow
from edgeprof.verdicts import series_of


def _db_with_two_sources(tmp_path: Path) -> tuple[Any, int, int]:
    """A sweep and run whose temp.cpu_c comes from two collectors, interleaved in time (synthetic)."""
    engine = open_engine(tmp_path / "two.db")
    now = datetime(2026, 1, 1)
    with new_session(engine) as s:
        device = Device(fingerprint="d" * 64, hostname="h", arch="x86_64", facts_json="{}", first_seen=now)
        s.add(device)
        s.flush()
        sweep = Sweep(
            name="s", plan_text="", plan_hash="h", device_id=device.id, edgeprof_version="t", started_at=now,
            status="completed", n_specs=1,
        )
        s.add(sweep)
        s.flush()
        run = Run(
            sweep_id=sweep.id, spec_id="a", seq=1, model_label="m", model_group="g", model_path="/m",
            workload_name="w", workload_hash="h", workload_json="{}", params_json="{}", repeat_json="{}",
            n_ctx=1, n_gpu_layers=0, n_threads=1, n_batch=1, n_ubatch=1, flash_attn="off", type_k="f16",
            type_v="f16", use_mmap=True, status="ok", started_at=now,
        )
        s.add(run)
        s.flush()
        rows = [SampleRow(float(t), float(t), "first", "temp.cpu_c", 40.0, run.id) for t in range(0, 20, 2)]
        rows += [SampleRow(float(t), float(t), "second", "temp.cpu_c", 90.0, run.id) for t in range(1, 20, 2)]
        write_batch(s, sweep.id, rows)
        s.commit()
        return engine, sweep.id, run.id


def test_two_collectors_of_one_metric_are_never_interleaved(tmp_path: Path) -> None:
    """Mutant: the one-source-per-metric rule removed, so 40 °C and 90 °C readings alternate in one series."""
    engine, sweep_id, run_id = _db_with_two_sources(tmp_path)
    with new_session(engine) as s:
        values = {v for _t, v in series_of(s, [run_id])[run_id]["temp.cpu_c"]}
        plotted = {v for _t, v in load_samples(s, sweep_id)["temp.cpu_c"]}
    assert len(values) == 1 and len(plotted) == 1 and values == plotted
