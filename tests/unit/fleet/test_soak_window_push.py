"""Soak windows travel with their run by a global uid (migration 18): their telemetry figures are filled in
after the row is written, so a second push updates the central copy instead of failing on (run, idx); a
window written before the migration gets the content identity of (run uid, index), the same in the
device's DB and in the central one.

All data here is synthetic (made up in the tests).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select, text, update
from sqlalchemy.orm import Session
from support.dbbuild import add_run, add_sweep

from edgeprof.fleet import export_sweeps, import_export, push_sweeps
from edgeprof.storage.db import open_engine
from edgeprof.storage.identity import content_uid
from edgeprof.storage.migrations import upgrade
from edgeprof.storage.models import Run, SoakWindow

pytestmark = pytest.mark.timeout(120)


def _window(run_id: int, idx: int) -> SoakWindow:
    return SoakWindow(
        run_id=run_id, idx=idx, t_start_mono=10.0 * idx, t_end_mono=10.0 * idx + 10, tokens=50, decode_s=5.0
    )


def test_a_soak_window_filled_in_later_updates_the_central_copy(tmp_path: Path) -> None:
    source, target = open_engine(tmp_path / "device.db"), open_engine(tmp_path / "central.db")
    with Session(source) as s:
        run = add_run(s, add_sweep(s), 1)
        s.add_all([_window(run.id, 0), _window(run.id, 1)])
        s.commit()
    first = push_sweeps(source, target, [1])
    assert first.sent[0][1].added["soak_window"] == 2
    with source.begin() as conn:  # the window's telemetry arrives after the row (as the soak executor does)
        conn.execute(update(SoakWindow).where(SoakWindow.idx == 1).values(temp_max_c=71.5))
    again = push_sweeps(source, target, [1], recheck=True)
    counts = again.sent[0][1]
    assert counts.n_added == 0 and counts.updated["soak_window"] == 1
    with Session(target) as s:
        assert s.scalars(select(SoakWindow.temp_max_c).order_by(SoakWindow.idx)).all() == [None, 71.5]
        local_uids = set(Session(source).scalars(select(SoakWindow.uid)))
        assert set(s.scalars(select(SoakWindow.uid))) == local_uids and len(local_uids) == 2


def test_windows_written_before_the_migration_get_their_content_identity(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'v16.db'}")
    upgrade(engine, target=16)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO device (uid, fingerprint, hostname, arch, facts_json, first_seen) "
                "VALUES ('d', 'fp', 'h', 'aarch64', '{}', '2026-01-01 00:00:00')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO sweep (uid, name, plan_text, plan_hash, device_id, edgeprof_version, "
                "started_at, status, n_specs) "
                "VALUES ('s', 's', '', 'h', 1, '0', '2026-01-01 00:00:00', 'completed', 1)"
            )
        )
    with Session(engine) as s:  # a run row as v16 knew it
        run_uid = s.execute(
            text(
                "INSERT INTO run (uid, sweep_id, spec_id, seq, model_label, model_group, model_path, "
                "workload_name, workload_hash, workload_json, params_json, repeat_json, n_ctx, n_gpu_layers, "
                "n_threads, n_batch, n_ubatch, flash_attn, type_k, type_v, use_mmap, status, started_at) "
                "VALUES ('run-uid', 1, 'a', 1, 'm', 'm', '/m', 'w', 'h', '{}', '{}', '{}', 512, 0, 4, 512, "
                "512, 'auto', 'f16', 'f16', 1, 'ok', '2026-01-01 00:00:00') RETURNING uid"
            )
        ).scalar_one()
        s.execute(
            text(
                "INSERT INTO soak_window (run_id, idx, t_start_mono, t_end_mono, tokens, decode_s) "
                "VALUES (1, 0, 0, 10, 50, 5), (1, 1, 10, 20, 50, 5)"
            )
        )
        s.commit()
    upgrade(engine)
    with Session(engine) as s:
        uids = s.scalars(select(SoakWindow.uid).order_by(SoakWindow.idx)).all()
        assert s.scalar(select(Run.uid)) == run_uid
    assert uids == [content_uid("soak_window", run_uid, 0), content_uid("soak_window", run_uid, 1)]
    engine.dispose()


def test_an_export_from_before_the_uid_imports_and_meets_the_same_windows(tmp_path: Path) -> None:
    source = open_engine(tmp_path / "device.db")
    with Session(source) as s:
        run = add_run(s, add_sweep(s), 1)
        s.add_all([_window(run.id, 0), _window(run.id, 1)])
        s.commit()
    dump = io.StringIO()
    export_sweeps(source, [1], dump)
    lines = [json.loads(x) for x in dump.getvalue().splitlines()]
    for item in lines:  # as schema 16-17 wrote it: soak windows without a uid
        if item.get("t") == "soak_window":
            del item["r"]["uid"]
    old = "\n".join(json.dumps(x) for x in lines) + "\n"
    target = open_engine(tmp_path / "central.db")
    for expected in (2, 0):
        counts = import_export(io.StringIO(old), "old.jsonl", target)
        assert counts.added["soak_window"] == expected
    with Session(target) as s:
        run_uid = s.scalar(select(Run.uid))
        uids = s.scalars(select(SoakWindow.uid).order_by(SoakWindow.idx)).all()
    assert uids == [content_uid("soak_window", run_uid, 0), content_uid("soak_window", run_uid, 1)]
