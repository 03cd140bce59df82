"""The sweep's store step: a config's ``run`` row as it starts, and what a stop leaves behind."""

from __future__ import annotations

import json

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.plan import RunSpec
from edgeprof.run_states import utcnow
from edgeprof.storage.models import Run, Sweep


def new_run(sweep: Sweep, spec: RunSpec, seq: int, model_file_id: int | None, group: str) -> Run:
    """The row of one config about to start (``running``): the spec as it was asked for, column by column."""
    p = spec.params
    return Run(
        sweep_id=sweep.id,
        spec_id=spec.spec_id,
        seq=seq,
        model_file_id=model_file_id,
        model_label=spec.model.label,
        model_group=group,
        model_path=spec.model.path,
        workload_name=spec.workload.name,
        workload_hash=spec.workload.hash,
        workload_json=json.dumps(spec.workload.to_json()),
        params_json=json.dumps(p.to_json(), sort_keys=True),
        repeat_json=json.dumps(spec.repeat.to_json()),
        n_ctx=p.n_ctx,
        n_gpu_layers=p.n_gpu_layers,
        n_threads=p.n_threads,
        n_batch=p.n_batch,
        n_ubatch=p.n_ubatch,
        flash_attn=p.flash_attn,
        type_k=p.type_k,
        type_v=p.type_v,
        use_mmap=p.use_mmap,
        depth=p.depth,
        swa_full=p.swa_full,
        kv_unified=p.kv_unified,
        offload_kqv=p.offload_kqv,
        op_offload=p.op_offload,
        poll=p.poll,
        n_seq_max=p.n_seq_max,
        ignore_eos=spec.workload.ignore_eos,
        runner=p.runner,
        concurrency=p.concurrency,
        request_rate=p.request_rate,
        status="running",
        started_at=utcnow(),
    )


def interrupted_before(session: Session, sweep: Sweep, spec: RunSpec, run: Run) -> bool:
    """Whether an earlier run of ``spec`` in this sweep was stopped before it finished (a resumed sweep redoes
    it as ``run``; the stopped run keeps what it measured)."""
    earlier = select(Run.id).where(
        Run.sweep_id == sweep.id, Run.spec_id == spec.spec_id, Run.id != run.id, Run.status == "interrupted"
    )
    return session.scalars(earlier.limit(1)).first() is not None


def store_interrupted(session: Session, sweep: Sweep) -> None:
    """A stop by the user: whatever run was still ``running`` and the sweep are marked ``interrupted``;
    everything committed before stays, and running the plan again resumes there."""
    session.rollback()
    for stuck in session.scalars(select(Run).where(Run.sweep_id == sweep.id, Run.status == "running")):
        stuck.status, stuck.reason = "interrupted", stuck.reason or "stopped by the user"
        stuck.ended_at = utcnow()
    sweep.status, sweep.ended_at = "interrupted", utcnow()
    session.commit()
