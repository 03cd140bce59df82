"""One builder for the hand-built (synthetic) test databases: a device, a sweep and runs with
every NOT NULL column given a neutral default, so a test states only what it is about.

Used by test_compare, test_plots_html, test_report and test_verdicts instead of four copies of the same
20-column ``Run(...)``. Rows are flushed (ids assigned), never committed: the caller decides.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.storage.models import Device, QualityResult, Run, Sweep

T0 = datetime(2024, 1, 1)

DEVICE_DEFAULTS: dict[str, Any] = {
    "fingerprint": "fp",
    "hostname": "h",
    "arch": "aarch64",
    "facts_json": "{}",
    "first_seen": T0,
}
SWEEP_DEFAULTS: dict[str, Any] = {
    "name": "s",
    "plan_text": "",
    "edgeprof_version": "0",
    "started_at": T0,
    "status": "completed",
    "n_specs": 1,
}
RUN_DEFAULTS: dict[str, Any] = {
    "model_label": "m",
    "model_group": "m",
    "model_path": "/m.gguf",
    "workload_name": "w",
    "workload_hash": "wh",
    "workload_json": '{"n_predict": 64}',
    "params_json": "{}",
    "repeat_json": "{}",
    "n_ctx": 512,
    "n_gpu_layers": 0,
    "n_threads": 4,
    "n_batch": 512,
    "n_ubatch": 512,
    "flash_attn": "auto",
    "type_k": "f16",
    "type_v": "f16",
    "use_mmap": True,
    "status": "ok",
    "started_at": T0,
}


def add_device(s: Session, **fields: Any) -> Device:
    """The device with this fingerprint (default ``fp``), created if the database has none yet."""
    values = DEVICE_DEFAULTS | fields
    found = s.scalars(select(Device).where(Device.fingerprint == values["fingerprint"])).first()
    if found is not None:
        return found
    device = Device(**values)
    s.add(device)
    s.flush()
    return device


def add_sweep(s: Session, device: Device | None = None, **fields: Any) -> Sweep:
    values = SWEEP_DEFAULTS | fields
    values.setdefault("plan_hash", values["name"])
    sweep = Sweep(device_id=(device or add_device(s)).id, **values)
    s.add(sweep)
    s.flush()
    return sweep


def add_run(s: Session, sweep: Sweep | int, seq: int, **fields: Any) -> Run:
    """A run of ``sweep`` (or a sweep id) with neutral defaults; ``fields`` override any column."""
    sweep_id = sweep if isinstance(sweep, int) else sweep.id
    values = RUN_DEFAULTS | {"spec_id": f"spec{seq}"} | fields
    run = Run(sweep_id=sweep_id, seq=seq, **values)
    s.add(run)
    s.flush()
    return run


def quality_result(run_id: int, kld: float, **fields: Any) -> QualityResult:
    """A quality run's result with one mean KLD standing for every KLD figure (synthetic); ``fields``
    set the rest (reference, chunking, same-top, PPL)."""
    values: dict[str, Any] = {
        "reference_sha256": "f" * 64,
        "text_sha256": "t" * 64,
        "text_source": "synthetic",
        "kld_mean": kld,
        "kld_se": kld / 10,
        "kld_median": kld,
        "kld_p90": kld,
        "kld_p95": kld,
        "kld_p99": kld,
        "kld_max": kld,
        "dp_top_mean": 0.0,
        "dp_top_p99": 0.0,
        "ln_ppl_ratio": 0.0,
    }
    return QualityResult(run_id=run_id, **(values | fields))
