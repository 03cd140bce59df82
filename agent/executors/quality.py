"""Quality runs: KL divergence, same top token and perplexity of each variant vs its reference.

One run per (model, quality workload). The reference variant's log-probs over the text are computed once per
(reference file sha256, text sha256, ctx, chunks) into the cache folder (``cache_dir``), checked (header,
size and sha256) before every use: a truncated or corrupt file is rebuilt, never read. Every other variant
then streams through the text chunk by chunk against it in its own child process
(``edgeprof.runners.quality_worker``), so a crash or timeout is a stored row like any other run.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.executors.base import EnergyOver, RunContext, config_label, end_run
from edgeprof.executors.store import add_phases, file_identity, model_identity, store_child
from edgeprof.gguf import GGUFInfo, read_gguf_info, sha256_file
from edgeprof.plan import MAX_CHUNKS, ModelEntry, Plan, QualitySpec, RunSpec
from edgeprof.runners import ChildResult, RunInterrupted, run_child
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
    return [sys.executable, "-m", "edgeprof.runners.quality_worker"]


def group_of(model: ModelEntry, info: GGUFInfo | None) -> str:
    """Which quants are "the same model": an explicit group, else GGUF name + arch + parameter count (the
    sweep stores it as each run's model_group; a reference is chosen within it)."""
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
    if own:
        store_child(session, run, child, is_main=True)
    else:
        # A reference pass made for another variant's run: its phases are this run's time, its memory is not.
        add_phases(session, run, child.phases, prefix="reference_")


def _fail(session: Session, run: Run, child: ChildResult, prefix: str = "") -> Run:
    run.status = child.status
    run.reason = prefix + (child.reason or "failed")
    run.exit_code, run.signal_name = child.exit_code, child.signal_name
    run.log_tail = child.log_tail[-2000:] or None
    return end_run(session, run)


class QualityRun:
    """One variant against its reference: make sure the reference cache is there and intact (a reference
    pass when not), score the variant against it in its own child, store the result."""

    def __init__(self, session: Session, run: Run, spec: RunSpec, ctx: RunContext) -> None:
        q = spec.workload.quality
        assert q is not None
        self.session, self.run, self.spec, self.ctx, self.q = session, run, spec, ctx, q
        self.ref = reference_entry(ctx.plan, spec.model, q)
        self.ref_sha = _sha256_of(session, self.ref.path)
        self.key = cache_key(self.ref_sha, q)
        self.path = cache_path(self.key)
        self.is_self = self.ref.label == spec.model.label
        self.events: dict[str, dict[str, Any]] = {}

    def measure(self) -> Run:
        reused = True
        try:
            verify_cache(self.path, self.key)
        except CacheError as why:
            reused = False
            if not self.make_reference(why):
                return self.run
        reader = CacheReader(self.path)
        summary = self.self_summary(reader) if self.is_self else self.score_variant()
        if summary is None:
            return self.run
        self.run.status, self.run.reason = "ok", None
        q = self.q
        self.session.add(
            QualityResult(
                run_id=self.run.id,
                reference_label=self.ref.label,
                reference_sha256=self.ref_sha,
                is_reference=self.is_self,
                text_sha256=q.text_sha256,
                text_source=q.source,
                ctx=q.ctx,
                n_chunks=reader.n_chunks,
                cache_path=str(self.path),
                cache_bytes=self.path.stat().st_size,
                cache_reused=reused,
                **summary,
            )
        )
        return end_run(self.session, self.run)

    def make_reference(self, why: CacheError) -> bool:
        """Compute the reference's log-probs into the cache; False when that failed (stored on the run)."""
        path, run = self.path, self.run
        if path.exists():
            self.ctx.tell(f"reference cache rejected ({why}); recomputing it")
            path.unlink()
        for stale in path.parent.glob(path.name + ".tmp-*"):  # left by a reference pass that was killed
            stale.unlink(missing_ok=True)
        child = self.child_run("base", self.ref.path)
        _store_child(self.session, run, child, own=self.is_self)
        if child.status != "ok":
            _fail(self.session, run, child, "" if self.is_self else f"reference {self.ref.label}: ")
            return False
        try:
            verify_cache(path, self.key)
        except CacheError as still:
            run.status, run.reason = "error", f"the reference cache just written does not verify: {still}"
            end_run(self.session, run)
            return False
        return True

    def self_summary(self, reader: CacheReader) -> dict[str, Any]:
        """The reference against itself: KLD 0 and same top everywhere by definition; PPL from the cache."""
        scores = TokenScores.empty()
        for meta, _q in reader.chunks():
            scores.extend(self_scores(meta))
        return summarize(scores)

    def score_variant(self) -> dict[str, Any] | None:
        """The variant's figures from its scoring child; None when the child failed (stored on the run)."""
        child = self.child_run("score", self.spec.model.path)
        _store_child(self.session, self.run, child, own=True)
        if child.status != "ok" or "quality" not in self.events:
            _fail(self.session, self.run, child)
            return None
        extra = ("event", "n_chunks", "peak_rss_mb")
        return {k: v for k, v in self.events["quality"].items() if k not in extra}

    def relay(self, event: dict[str, Any]) -> None:
        kind = str(event.get("event"))
        if kind in ("cache_plan", "cache_written", "quality"):
            self.events[kind] = event
        if kind == "cache_plan":
            self.ctx.tell(
                f"reference cache ({self.ref.label}): writing {event['bytes'] / 2**20:.1f} MiB to "
                f"{event['path']} ({event['free_bytes'] / 2**20:.0f} MiB free)"
            )
        if self.ctx.on_event is not None:
            self.ctx.on_event(event)

    def reference_row(self) -> ModelFile | None:
        """The reference file's row under the sha256 its cache is keyed by (hashed before any config)."""
        path = str(Path(self.ref.path).resolve())
        with self.session.no_autoflush:  # no write transaction may open before the child runs
            return self.session.scalars(
                select(ModelFile).where(ModelFile.path == path, ModelFile.sha256 == self.ref_sha)
            ).first()

    def child_run(self, mode: str, model_path: str) -> ChildResult:
        """A quality worker child: ``base`` writes the reference cache, ``score`` scores a variant on it."""
        job: dict[str, Any] = {
            "mode": mode,
            "model_path": model_path,
            "params": self.spec.params.to_json(),
            "quality": {**self.q.to_json(), "max_chunks": MAX_CHUNKS},
            "cache_key": self.key,
            "cache_path": str(self.path),
        }
        if mode == "base":
            job["text"] = self.q.text
        # the model loaded is the model hashed: the reference's log-probs and the variant's scores are
        # stored under their files' sha256, which a file replaced since would make false
        job["model_identity"] = (
            model_identity(self.session, self.run)
            if model_path == self.spec.model.path
            else file_identity(self.reference_row())
        )
        # No write transaction may stay open while the child runs: the sweep lease's heartbeat writes on its
        # own connection from inside run_child, and would wait out SQLite's busy timeout behind ours.
        self.session.commit()
        ctx = self.ctx
        try:
            return run_child(
                job,
                self.spec.timeout_s,
                on_event=self.relay,
                env=ctx.env,
                heartbeat=ctx.heartbeat,
                command=worker_command(),
            )
        except RunInterrupted as stop:
            _store_child(self.session, self.run, stop.result, own=model_path == self.spec.model.path)
            self.run.status, self.run.reason = "interrupted", stop.result.reason
            end_run(self.session, self.run)
            raise


class QualityExecutor:
    runner = "llama-cpp"  # its children are llama-cpp-python workers (edgeprof.runners.quality_worker)
    workload_kind = "quality"

    def execute(self, session: Session, run: Run, spec: RunSpec, ctx: RunContext) -> Run:
        """Make sure the reference cache is there and intact, score the variant against it, store it."""
        run.t_start_mono = time.monotonic()
        return QualityRun(session, run, spec, ctx).measure()

    def label(self, spec: RunSpec) -> str:
        return config_label(spec)

    def describe(self, session: Session, run: Run) -> str:
        return describe(session, run) or "ok"

    def attach_energy(self, session: Session, run: Run, energy: EnergyOver) -> None:
        """None: a quality run's figures are about its outputs, not its speed or energy."""


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
