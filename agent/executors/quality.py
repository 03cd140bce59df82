"""Quality runs (issue 9): KL divergence, same top token and perplexity of each variant vs its reference.

One run per (model, quality workload). The reference variant's log-probs over the text are computed once per
(reference file sha256, text sha256, ctx, chunks) into the cache folder (``cache_dir``), checked (header,
size and sha256) before every use: a truncated or corrupt file is rebuilt, never read. Every other variant
then streams through the text chunk by chunk against it in its own child process
(``edgeprof.runners.quality_worker``), so a crash or timeout is a stored row like any other run.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.gguf import GGUFInfo, read_gguf_info, sha256_file
from edgeprof.plan import MAX_CHUNKS, ModelEntry, Plan, QualitySpec, RunSpec
from edgeprof.run_states import utcnow
from edgeprof.runners.llama import ChildResult, RunInterrupted, run_child
from edgeprof.runners.quality_math import (
    CacheError,
    CacheReader,
    TokenScores,
    self_scores,
    summarize,
    verify_cache,
)
from edgeprof.storage.models import ModelFile, QualityResult, Run

CACHE_ENV = "EDGEPROF_CACHE_DIR"


def cache_dir() -> Path:
    """Where reference log-probs live: ``$EDGEPROF_CACHE_DIR``, else ``$XDG_CACHE_HOME/edgeprof/quality``,
    else ``~/.cache/edgeprof/quality`` (the XDG default). A cache, not data: deleting it costs one
    reference pass."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "edgeprof" / "quality"


def worker_command() -> list[str]:
    import sys

    return [sys.executable, "-m", "edgeprof.runners.quality_worker"]


def group_of(model: ModelEntry, info: GGUFInfo | None) -> str:
    """The same rule as the sweep's model_group: an explicit group, else GGUF name + arch + parameters."""
    if model.group:
        return model.group
    if info is None:
        return model.label
    return f"{info.name or info.arch or 'model'}|{info.arch}|{info.n_params}"


def _info(plan: Plan, model: ModelEntry) -> GGUFInfo | None:
    info = plan.model_info.get(model.path)
    if info is None:
        try:
            info = read_gguf_info(model.path)
        except ValueError:
            return None
    return info


def reference_entry(plan: Plan, model: ModelEntry, spec: QualitySpec) -> ModelEntry:
    """The workload's ``reference`` label, else the variant of the model's group with the most bits per
    weight counted from the tensor sizes (file size as the fallback); the first in plan order on a tie."""
    if spec.reference is not None:
        for m in plan.models:
            if m.label == spec.reference:
                return m
        raise ValueError(f"no model labelled {spec.reference!r} in the plan")
    group = group_of(model, _info(plan, model))
    best, best_bpw = model, -1.0
    for m in plan.models:
        info = _info(plan, m)
        if group_of(m, info) != group or info is None:
            continue
        bpw = info.tensor_bits_per_weight or info.bits_per_weight or 0.0
        if bpw > best_bpw + 1e-12:
            best, best_bpw = m, bpw
    return best


def _sha256_of(session: Session, path: str) -> str:
    known = session.scalars(
        select(ModelFile.sha256)
        .where(ModelFile.path == str(Path(path).resolve()))
        .order_by(ModelFile.id.desc())
    ).first()
    return known or sha256_file(path)


def cache_key(ref_sha256: str, spec: QualitySpec) -> dict[str, Any]:
    """What the reference log-probs depend on; stored in the cache header and checked on every use."""
    return {
        "model_sha256": ref_sha256,
        "text_sha256": spec.text_sha256,
        "ctx": spec.ctx,
        "chunks": spec.chunks,
        "max_chunks": MAX_CHUNKS,
    }


def cache_path(key: dict[str, Any]) -> Path:
    digest = hashlib.sha256(repr(sorted(key.items())).encode()).hexdigest()[:12]
    return cache_dir() / f"ref-{key['model_sha256'][:16]}-c{key['ctx']}-{digest}.eplp"


def _store_child(session: Session, run: Run, child: ChildResult, own: bool) -> None:
    from edgeprof.sweep.loop import _store_child as store

    if own:
        store(session, run, child, is_main=True)
    # A reference pass made for another variant's run: its phases are this run's time, its memory is not.
    else:
        from edgeprof.storage.models import Phase

        for ph in child.phases:
            session.add(
                Phase(
                    run_id=run.id,
                    name="reference_" + str(ph["name"]),
                    kind=ph.get("kind"),
                    rep=ph.get("rep"),
                    t_start_mono=float(ph["t_start"]),
                    t_end_mono=float(ph["t_end"]),
                )
            )


def _fail(session: Session, run: Run, child: ChildResult, prefix: str = "") -> Run:
    run.status = child.status
    run.reason = prefix + (child.reason or "failed")
    run.exit_code, run.signal_name = child.exit_code, child.signal_name
    run.log_tail = child.log_tail[-2000:] or None
    run.ended_at, run.t_end_mono = utcnow(), time.monotonic()
    session.commit()
    return run


def execute_quality_spec(
    session: Session,
    run: Run,
    spec: RunSpec,
    plan: Plan,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    env: dict[str, str] | None = None,
    heartbeat: Callable[[], None] | None = None,
    say: Callable[[str], None] | None = None,
) -> Run:
    """Make sure the reference cache is there and intact, score this variant against it, store the result."""
    q = spec.workload.quality
    assert q is not None
    tell = say or (lambda _line: None)
    run.t_start_mono = time.monotonic()
    ref = reference_entry(plan, spec.model, q)
    ref_sha = _sha256_of(session, ref.path)
    key = cache_key(ref_sha, q)
    path = cache_path(key)
    is_self = ref.label == spec.model.label
    events: dict[str, dict[str, Any]] = {}

    def relay(event: dict[str, Any]) -> None:
        kind = str(event.get("event"))
        if kind in ("cache_plan", "cache_written", "quality"):
            events[kind] = event
        if kind == "cache_plan":
            tell(
                f"reference cache ({ref.label}): writing {event['bytes'] / 1e6:.1f} MB to {event['path']} "
                f"({event['free_bytes'] / 1e9:.1f} GB free)"
            )
        if on_event is not None:
            on_event(event)

    def child_run(mode: str, model_path: str) -> ChildResult:
        job = {
            "mode": mode,
            "model_path": model_path,
            "params": spec.params.to_json(),
            "quality": {**q.to_json(), "max_chunks": MAX_CHUNKS},
            "cache_key": key,
            "cache_path": str(path),
        }
        if mode == "base":
            job["text"] = q.text
        # No write transaction may stay open while the child runs: the sweep lease's heartbeat writes on its
        # own connection from inside run_child, and would wait out SQLite's busy timeout behind ours.
        session.commit()
        try:
            return run_child(
                job, spec.timeout_s, on_event=relay, env=env, heartbeat=heartbeat, command=worker_command()
            )
        except RunInterrupted as stop:
            _store_child(session, run, stop.result, own=model_path == spec.model.path)
            run.status, run.reason = "interrupted", stop.result.reason
            run.ended_at, run.t_end_mono = utcnow(), time.monotonic()
            session.commit()
            raise

    reused = True
    try:
        verify_cache(path, key)
    except CacheError as why:
        reused = False
        if path.exists():
            tell(f"reference cache rejected ({why}); recomputing it")
            path.unlink()
        for stale in path.parent.glob(path.name + ".tmp-*"):  # left by a reference pass that was killed
            stale.unlink(missing_ok=True)
        child = child_run("base", ref.path)
        _store_child(session, run, child, own=is_self)
        if child.status != "ok":
            return _fail(session, run, child, "" if is_self else f"reference {ref.label}: ")
        try:
            verify_cache(path, key)
        except CacheError as still:
            run.status, run.reason = "error", f"the reference cache just written does not verify: {still}"
            run.ended_at, run.t_end_mono = utcnow(), time.monotonic()
            session.commit()
            return run
    reader = CacheReader(path)
    if is_self:
        # The reference against itself: KLD 0 and same top everywhere by definition; its PPL from the cache.
        scores = TokenScores.empty()
        for meta, _q in reader.chunks():
            scores.extend(self_scores(meta))
        summary = summarize(scores)
        run.status, run.reason = "ok", None
    else:
        child = child_run("score", spec.model.path)
        _store_child(session, run, child, own=True)
        if child.status != "ok" or "quality" not in events:
            return _fail(session, run, child)
        extra = ("event", "n_chunks", "peak_rss_mb")
        summary = {k: v for k, v in events["quality"].items() if k not in extra}
        run.status, run.reason = "ok", None
    session.add(
        QualityResult(
            run_id=run.id,
            reference_label=ref.label,
            reference_sha256=ref_sha,
            is_reference=is_self,
            text_sha256=q.text_sha256,
            text_source=q.source,
            ctx=q.ctx,
            n_chunks=reader.n_chunks,
            cache_path=str(path),
            cache_bytes=path.stat().st_size,
            cache_reused=reused,
            **summary,
        )
    )
    run.ended_at, run.t_end_mono = utcnow(), time.monotonic()
    session.commit()
    return run


def quality_of_run(session: Session, run_id: int) -> QualityResult | None:
    return session.scalars(
        select(QualityResult).where(QualityResult.run_id == run_id).order_by(QualityResult.id.desc())
    ).first()


def describe(session: Session, run: Run) -> str | None:
    """The progress line's outcome of a quality run."""
    qr = quality_of_run(session, run.id)
    if qr is None:
        return None
    if qr.is_reference:
        return f"ok  reference: PPL {qr.ppl:.5g}  n={qr.n_tokens} tokens"
    return (
        f"ok  KLD {qr.kld_mean:.5f}  same-top {qr.same_top_pct:.1f}%  PPL {qr.ppl:.5g} "
        f"(ref {qr.ppl_ref:.5g})  n={qr.n_tokens}"
    )
