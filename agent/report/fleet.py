"""Report fields that say where a row was measured: the device and the build of each row, so a report or
CSV out of a central database with many devices (a fleet pushing to one database) stays unambiguous."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.storage.models import Build, Device, Run, Sweep


def attach_fleet(session: Session, rows: list[dict[str, Any]]) -> None:
    """Fill the device and build fields of each row from its run's sweep, device and build (null where
    unknown)."""
    run_ids = [r["run_id"] for r in rows if r.get("run_id") is not None]
    found: dict[int, Any] = {}
    if run_ids:
        query = (
            select(Run.id, Device, Build, Sweep.uid)
            .join(Sweep, Run.sweep_id == Sweep.id)
            .join(Device, Sweep.device_id == Device.id)
            .outerjoin(Build, Run.build_id == Build.id)
            .where(Run.id.in_(run_ids))
        )
        found = {run_id: (device, build, uid) for run_id, device, build, uid in session.execute(query)}
    for row in rows:
        device, build, sweep_uid = found.get(row.get("run_id"), (None, None, None))  # type: ignore[arg-type]
        row["device_hostname"] = device.hostname if device else None
        row["device_board_model"] = device.board_model if device else None
        row["device_l4t_release"] = device.l4t_release if device else None
        row["device_uid"] = device.uid if device else None
        row["build_llama_cpp_python"] = build.llama_cpp_python_version if build else None
        row["build_backend"] = build.backend if build else None
        row["sweep_uid"] = sweep_uid
