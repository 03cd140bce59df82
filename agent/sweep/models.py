"""The sweep's models step: each model file hashed (only when it changed since its last hash) into its one
``model_file`` row, and the group that says which quants are the same model."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.executors import group_of
from edgeprof.gguf import GGUFInfo, read_gguf_info, sha256_file
from edgeprof.plan import Plan, RunSpec, is_server_entry
from edgeprof.storage.identity import add_unique
from edgeprof.storage.models import ModelFile


def get_or_create_model_file(
    session: Session, info: GGUFInfo, progress: Callable[[], None] | None = None
) -> ModelFile:
    """The model's row, hashing the file only when its size or mtime changed since the last hash."""
    path = str(Path(info.path).resolve())
    known = session.scalars(
        select(ModelFile).where(ModelFile.path == path).order_by(ModelFile.id.desc())
    ).first()
    if known is not None and known.size_bytes == info.size_bytes and known.mtime_ns == info.mtime_ns:
        if known.tensor_bytes is None:  # recorded before the tensor sizes were stored
            known.tensor_bytes = info.tensor_bytes or None
        return known
    digest = sha256_file(path, progress=progress)
    existing = session.scalar(select(ModelFile).where(ModelFile.path == path, ModelFile.sha256 == digest))
    if existing is not None:
        existing.size_bytes, existing.mtime_ns = info.size_bytes, info.mtime_ns
        existing.tensor_bytes = existing.tensor_bytes or info.tensor_bytes or None
        return existing
    mf = ModelFile(
        path=path,
        sha256=digest,
        size_bytes=info.size_bytes,
        mtime_ns=info.mtime_ns,
        arch=info.arch,
        name=info.name,
        n_params=info.n_params,
        quant_type=info.quant_type,
        file_type=info.file_type,
        n_layers=info.n_layers,
        context_length=info.context_length,
        vocab_size=info.vocab_size,
        tensor_bytes=info.tensor_bytes or None,
    )
    return add_unique(session, mf, path=path, sha256=digest)


@dataclass
class ModelRows:
    """Per model path of the plan: its file's sha256 (part of every spec id) and its row's id."""

    sha256: dict[str, str] = field(default_factory=dict)
    file_id: dict[str, int] = field(default_factory=dict)


def hash_models(session: Session, plan: Plan, heartbeat: Callable[[], None]) -> ModelRows:
    """Every model of the plan hashed into its row, one commit each."""
    rows = ModelRows()
    for model in plan.models:
        if is_server_entry(model.path):
            # a foreign server's own model (runner openai): no file to hash, no model_file row; its URL
            # is what its spec ids are made of
            rows.sha256[model.path] = hashlib.sha256(f"server {model.path}".encode()).hexdigest()
            continue
        info = plan.model_info.get(model.path) or read_gguf_info(model.path)
        mf = get_or_create_model_file(session, info, progress=heartbeat)
        rows.sha256[model.path], rows.file_id[model.path] = mf.sha256, mf.id
        # Hashing the next model beats the lease from its own connection: on SQLite an open write
        # transaction here would make every beat wait out the busy timeout, and fail.
        session.commit()
    return rows


def model_group(spec: RunSpec, info: GGUFInfo | None) -> str:
    """Which quants are 'the same model': an explicit group, else GGUF name + arch + parameter count."""
    return group_of(spec.model, info)


def same_file_lines(plan: Plan, rows: ModelRows) -> list[str]:
    """A line for each set of the plan's model labels whose files have one sha256: one file, whatever their
    rows will say (its copies on two disks differ in their cold start only)."""
    labels: dict[str, list[str]] = {}
    for model in plan.models:
        sha = rows.sha256.get(model.path)
        if sha is not None and not is_server_entry(model.path):
            labels.setdefault(sha, []).append(model.label)
    return [
        f"note: {' and '.join(names)} are one file (sha256 {sha[:12]}…): their steady speeds can differ "
        "only by the machine"
        for sha, names in labels.items()
        if len(names) > 1
    ]
