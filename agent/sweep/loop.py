"""Run a plan: for each run spec, in order, a child process per cold start; store every outcome.

The sweep never stops for a failed run: a crash, hang or load failure is a stored row with a reason. It stops
for Ctrl-C/SIGTERM, after marking the current run and the sweep ``interrupted``; everything committed so far
stays, and running the same plan again resumes where it stopped.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

from sqlalchemy import Engine, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from edgeprof import __version__
from edgeprof.device import (
    backend_of,
    collect_device_facts,
    comparable_state,
    get_or_create_device,
    jetson_state,
    switch_power_mode,
    system_warnings,
)
from edgeprof.gguf import GGUFInfo, drop_page_cache, read_gguf_info, sha256_file
from edgeprof.plan import Plan, RunSpec, expand
from edgeprof.run_states import FINISHED_STATUSES, SKIPPED_MEMORY, utcnow
from edgeprof.runners.llama import ChildResult, RunInterrupted, run_child
from edgeprof.storage.identity import add_unique
from edgeprof.storage.models import Build, Device, Measurement, ModelFile, Phase, Run, Sweep
from edgeprof.sweep.fit import FitChecker, record_sweep_bandwidth
from edgeprof.sweep.lease import Lease, lease_key, mark_interrupted, reconcile_plan
from edgeprof.sweep.lease import acquire as acquire_lease
from edgeprof.sweep.progress import Progress

# FINISHED_STATUSES and utcnow live in run_states (light enough for `status`); imported here for the sweep's
# callers that name them through this module.


class SweepHooks(Protocol):
    """Telemetry and cooldown attach here; every method is optional in spirit (no-ops by default)."""

    def before_run(self, session: Session, run: Run, spec: RunSpec) -> None: ...

    def on_child_event(self, run: Run, event: dict[str, Any]) -> None: ...

    def after_run(self, session: Session, run: Run, spec: RunSpec) -> None: ...

    # Optional: ``between_reps(session, run, event) -> seconds waited`` cools down before each steady rep.


@dataclass
class SweepOutcome:
    sweep_id: int
    n_specs: int
    n_skipped: int
    counts: dict[str, int] = field(default_factory=dict)
    interrupted: bool = False
    paused: str | None = None  # why no further config was started (time window, disk space)


def get_or_create_model_file(
    session: Session, info: GGUFInfo, progress: Callable[[], None] | None = None
) -> ModelFile:
    """The model's row, hashing the file only when its size or mtime changed since the last hash."""
    path = str(Path(info.path).resolve())
    known = session.scalars(
        select(ModelFile).where(ModelFile.path == path).order_by(ModelFile.id.desc())
    ).first()
    if known is not None and known.size_bytes == info.size_bytes and known.mtime_ns == info.mtime_ns:
        return known
    digest = sha256_file(path, progress=progress)
    existing = session.scalar(select(ModelFile).where(ModelFile.path == path, ModelFile.sha256 == digest))
    if existing is not None:
        existing.size_bytes, existing.mtime_ns = info.size_bytes, info.mtime_ns
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
    )
    return add_unique(session, mf, path=path, sha256=digest)


def _build_flags() -> str | None:
    """The CMake flags scripts/setup.sh built llama-cpp-python with (it leaves them in the venv)."""
    path = Path(sys.prefix) / "share" / "edgeprof" / "llama-build.json"
    try:
        return path.read_text().strip()
    except OSError:
        return None


def get_or_create_build(session: Session, hello: dict[str, Any]) -> Build:
    import hashlib

    version = str(hello.get("llama_cpp_python", "unknown"))
    system_info = str(hello.get("system_info", ""))
    gpu_offload = bool(hello.get("gpu_offload", False))
    flags = _build_flags()
    fp = hashlib.sha256(json.dumps([version, system_info, gpu_offload, flags]).encode()).hexdigest()
    build = session.scalar(select(Build).where(Build.fingerprint == fp))
    if build is None:
        build = Build(
            fingerprint=fp,
            llama_cpp_python_version=version,
            backend=backend_of(system_info, gpu_offload),
            gpu_offload=gpu_offload,
            system_info=system_info,
            build_flags=flags,
            first_seen=utcnow(),
        )
        build = add_unique(session, build, fingerprint=fp)
    return build


def model_group(spec: RunSpec, info: GGUFInfo | None) -> str:
    """Which quants are 'the same model': an explicit group, else GGUF name + arch + parameter count."""
    if spec.model.group:
        return spec.model.group
    if info is None:
        return spec.model.label
    return f"{info.name or info.arch or 'model'}|{info.arch}|{info.n_params}"


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """systemd stops a service with SIGTERM: treat it as Ctrl-C, so the current run is stored interrupted.

    Only the first SIGTERM raises: a second one (systemd repeats, an impatient user) must not break the
    handler that is marking the run and the sweep interrupted.
    """

    def handler(_signum: int, _frame: Any) -> None:
        if _SIGTERM_SEEN[0]:
            return
        _SIGTERM_SEEN[0] = True
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    outermost = not _SIGTERM_DEPTH[0]
    if outermost:
        _SIGTERM_SEEN[0] = False
    _SIGTERM_DEPTH[0] += 1
    try:
        yield
    finally:
        _SIGTERM_DEPTH[0] -= 1
        signal.signal(signal.SIGTERM, previous)


# Shared by nested sigterm_as_interrupt() scopes (run_plan's, and the config loop's inside it).
_SIGTERM_SEEN = [False]
_SIGTERM_DEPTH = [0]


def spec_label(spec: RunSpec) -> str:
    p = spec.params
    return (
        f"{spec.model.label} ctx={p.n_ctx} ngl={p.n_gpu_layers} t={p.n_threads} b={p.n_batch} "
        f"fa={p.flash_attn}{f' depth={p.depth}' if p.depth else ''} wl={spec.workload.name}"
        + (f" {p.runner} c={p.concurrency}" if p.runner != "llama-cpp" else "")  # issue 14
        + (f" rate={p.request_rate:g}/s" if p.request_rate is not None else "")
    )


def _store_child(session: Session, run: Run, child: ChildResult, *, is_main: bool) -> None:
    for event in child.measurements:
        kind = str(event["kind"])
        m = Measurement(
            run_id=run.id,
            kind=kind,
            rep=int(event["rep"]),
            n_prompt=event.get("n_prompt"),
            prefill_ms=event.get("prefill_ms"),
            pp_tps=event.get("pp_tps"),
            ttft_ms=event.get("ttft_ms"),
            n_gen=event.get("n_gen"),
            decode_ms=event.get("decode_ms"),
            tg_tps=event.get("tg_tps"),
            e2e_ms=event.get("e2e_ms"),
            tpot_ms=event.get("tpot_ms"),
            tokens_out=event.get("tokens_out"),
            output_tokens_json=json.dumps(event.get("output_tokens")),
            output_hash=event.get("output_hash"),
            output_text=event.get("output_text"),
            finish_reason=event.get("finish_reason"),
            t_start_mono=event.get("t_request"),
            t_end_mono=event.get("t_end"),
            first_eos_index=event.get("first_eos_index"),
            depth=event.get("depth"),
            depth_fill_ms=event.get("depth_fill_ms"),
            kv_used_cells=event.get("kv_used_cells"),
            prompt_sha256=event.get("prompt_sha256"),
            prompt_n_tokens=event.get("prompt_n_tokens"),
            parse_special=event.get("parse_special"),
        )
        if kind == "cold":
            m.load_ms = child.loaded.get("load_ms") if child.loaded else None
            t_first = event.get("t_first_token")
            m.cold_start_ms = (t_first - child.t_spawn) * 1000.0 if t_first is not None else None
        session.add(m)
    for ph in child.phases:
        session.add(
            Phase(
                run_id=run.id,
                name=str(ph["name"]),
                kind=ph.get("kind"),
                rep=ph.get("rep"),
                t_start_mono=float(ph["t_start"]),
                t_end_mono=float(ph["t_end"]),
            )
        )
    if child.hello is not None and run.build_id is None:
        run.build_id = get_or_create_build(session, child.hello).id
    if is_main and child.loaded is not None:
        run.effective_json = json.dumps(child.loaded.get("effective"), sort_keys=True)
        effective = child.loaded.get("effective") or {}
        run.kv_cache_mib = effective.get("kv_cache_mib")  # as llama.cpp reported it (issue 10)
    if child.peak_rss_mb is not None:
        run.peak_rss_mb = max(run.peak_rss_mb or 0.0, child.peak_rss_mb)


def execute_spec(
    session: Session,
    run: Run,
    spec: RunSpec,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    env: dict[str, str] | None = None,
    heartbeat: Callable[[], None] | None = None,
    between_reps: Callable[[dict[str, Any]], float] | None = None,
) -> Run:
    """Run a spec's children (first: cold + warm-up + steady; then extra cold starts) and store them."""
    if spec.params.runner != "llama-cpp":  # issue 14: another runner executes and stores this spec
        from edgeprof.runners import registry

        run_other: Callable[..., Run] = registry.executor(spec.params.runner)
        return run_other(
            session, run, spec, on_event=on_event, env=env, heartbeat=heartbeat, between_reps=between_reps
        )
    run.t_start_mono = time.monotonic()
    statuses: list[tuple[str, str | None, int | None, str | None, str]] = []
    for cold_rep in range(spec.repeat.cold):
        if spec.cold_cache == "drop":
            run.page_cache = "dropped" if drop_page_cache(spec.model.path) else "drop_failed"
        else:
            run.page_cache = "kept"
        job = spec.job(cold_only=cold_rep > 0, cold_rep=cold_rep)
        try:
            child = run_child(
                job,
                spec.timeout_s,
                on_event=on_event,
                env=env,
                heartbeat=heartbeat,
                between_reps=between_reps,
            )
        except RunInterrupted as stop:
            _store_child(session, run, stop.result, is_main=cold_rep == 0)
            run.status, run.reason = "interrupted", stop.result.reason
            run.ended_at, run.t_end_mono = utcnow(), time.monotonic()
            run.log_tail = stop.result.log_tail[-2000:] or None
            session.commit()
            raise
        _store_child(session, run, child, is_main=cold_rep == 0)
        statuses.append((child.status, child.reason, child.exit_code, child.signal_name, child.log_tail))
        # Stored for good before the next cold start: its heartbeats write the lease from another
        # connection, which an open write transaction here would make wait out SQLite's busy timeout.
        session.commit()
        if child.status != "ok":
            break  # a config that failed once is not hammered again; the failure is what we report
    status, reason, exit_code, sig, log_tail = next(
        (s for s in statuses if s[0] != "ok"),
        statuses[0] if statuses else ("error", "no child ran", None, None, ""),
    )
    run.status, run.reason, run.exit_code, run.signal_name = status, reason, exit_code, sig
    run.log_tail = log_tail[-2000:] if status != "ok" and log_tail else None
    run.ended_at, run.t_end_mono = utcnow(), time.monotonic()
    session.commit()
    return run


def find_resumable_sweep(session: Session, plan: Plan, device: Device) -> Sweep | None:
    return session.scalars(
        select(Sweep)
        .where(Sweep.plan_hash == plan.hash, Sweep.device_id == device.id)
        .order_by(Sweep.id.desc())
    ).first()


class SweepAborted(RuntimeError):
    """The sweep could not go on (database full, damaged or unwritable); one line for the user."""


@dataclass
class _Held:
    """What the lease-holding wrapper around a sweep needs to know from inside it."""

    wait: bool = False
    on_wait: Callable[[str], None] | None = None
    lease: Lease | None = None
    sweep_id: int | None = None
    n_specs: int = 0

    def beat_with(self, heartbeat: Callable[[], None] | None) -> Callable[[], None]:
        def beat() -> None:
            if self.lease is not None:
                self.lease.beat()
            if heartbeat is not None:
                heartbeat()

        return beat


def run_plan(
    engine: Engine,
    plan: Plan,
    *,
    wait: bool = False,
    on_wait: Callable[[str], None] | None = None,
    **options: Any,
) -> SweepOutcome:
    """Measure every spec of ``plan`` not already finished in its sweep, holding the sweep's lease.

    Raises LeaseHeld when another live process runs this plan on this device (``wait``: wait for it), and
    SweepAborted when storage fails mid-sweep. Whatever ends the sweep - a stop signal while telemetry
    stops, a full disk - it is never left ``running``: it is marked ``interrupted`` here, or, when even that
    write fails, its dead owner is reconciled by the next ``run``/``status``.
    """
    held = _Held(wait=wait, on_wait=on_wait)
    with sigterm_as_interrupt():
        try:
            return _run_plan_held(engine, plan, held=held, **options)
        except KeyboardInterrupt:
            if held.sweep_id is None:
                raise
            # A stop outside the config loop (telemetry stopping, the final commit): the loop's own handler
            # did not see it.
            _mark_aborted(engine, held.sweep_id, "stopped by the user")
            return SweepOutcome(sweep_id=held.sweep_id, n_specs=held.n_specs, n_skipped=0, interrupted=True)
        except (SQLAlchemyError, OSError) as exc:
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            where = f"sweep {held.sweep_id}" if held.sweep_id is not None else "the sweep"
            marked = held.sweep_id is not None and _mark_aborted(engine, held.sweep_id, first)
            raise SweepAborted(
                f"{where} stopped: {first}"
                + ("; it is marked interrupted" if marked else "")
                + "; everything committed before is kept (free space or repair the database, then run "
                "the plan again to resume)"
            ) from None
        finally:
            if held.lease is not None:
                held.lease.release()


def _mark_aborted(engine: Engine, sweep_id: int, why: str) -> bool:
    """Best effort, in a fresh session: the failing one may hold a broken transaction."""
    try:
        with Session(engine) as session:
            sweep = session.get(Sweep, sweep_id)
            if sweep is not None and sweep.status == "running":
                mark_interrupted(session, sweep, why)
            session.commit()
        return True
    except Exception:  # noqa: BLE001 - the lease's dead owner is reconciled later instead
        return False


def _run_plan_held(
    engine: Engine,
    plan: Plan,
    *,
    held: _Held,
    new_sweep: bool = False,
    retry_failed: bool = False,
    out: TextIO | None = None,
    hooks: SweepHooks | None = None,
    telemetry: Callable[[int], Any] | None = None,
    env: dict[str, str] | None = None,
    device_root: Path | str = "/",
    state_reader: Callable[[], dict[str, Any] | None] | None = None,
    heartbeat: Callable[[], None] | None = None,
    should_start: Callable[[], str | None] | None = None,
    power_switcher: Callable[[str], str | None] | None = None,
    bandwidth_probe: Callable[[], Any] | None = None,
    system_check: bool = True,
) -> SweepOutcome:
    """Measure every spec of ``plan`` not already finished in its sweep; returns counts per status.

    ``bandwidth_probe`` (issue 9; the CLI and the agent pass edgeprof.gguf.bandwidth.probe_bandwidth) measures
    the memory bandwidth once per sweep; without it the sweep's bw_probe_gbps stays NULL."""
    from edgeprof.storage.db import new_session

    out = out or sys.stdout
    with new_session(engine) as session:
        device = get_or_create_device(session, collect_device_facts(device_root))
        # Commit before taking the lease: no write transaction may stay open across its own connection.
        session.commit()
        held.lease = acquire_lease(
            engine, lease_key(plan.hash, device.id), wait=held.wait, on_wait=held.on_wait
        )
        # Holding the lease, nobody else writes this plan's sweeps: whatever they left running is dead.
        reconcile_plan(session, plan.hash, device.id)
        session.commit()
        heartbeat = held.beat_with(heartbeat)
        sha_of: dict[str, str] = {}
        mf_of: dict[str, int] = {}
        for model in plan.models:
            info = plan.model_info.get(model.path) or read_gguf_info(model.path)
            mf = get_or_create_model_file(session, info, progress=heartbeat)
            sha_of[model.path], mf_of[model.path] = mf.sha256, mf.id
            # Hashing the next model beats the lease from its own connection: on SQLite an open write
            # transaction here would make every beat wait out the busy timeout, and fail.
            session.commit()
        specs = expand(plan, sha_of)
        sweep = None if new_sweep else find_resumable_sweep(session, plan, device)
        read_state = state_reader or (lambda: jetson_state(device_root))
        start_state = read_state()
        if sweep is None:
            sweep = Sweep(
                name=plan.name,
                plan_path=plan.source,
                plan_text=plan.text,
                plan_hash=plan.hash,
                device_id=device.id,
                edgeprof_version=__version__,
                started_at=utcnow(),
                status="running",
                n_specs=len(specs),
                device_state_json=json.dumps(start_state) if start_state else None,
            )
            session.add(sweep)
        else:
            sweep.status, sweep.ended_at = "running", None
        session.flush()
        held.lease.attach(session, sweep.id)  # one commit with the sweep: no running sweep without an owner
        session.commit()
        held.sweep_id, held.n_specs = sweep.id, len(specs)

        finished = FINISHED_STATUSES if not retry_failed else ("ok",)
        done_ids = set(
            session.scalars(
                select(Run.spec_id).where(Run.sweep_id == sweep.id, Run.status.in_(finished))
            ).all()
        )
        todo = [s for s in specs if s.spec_id not in done_ids]
        outcome = SweepOutcome(sweep_id=sweep.id, n_specs=len(specs), n_skipped=len(specs) - len(todo))
        progress = Progress(len(specs), out)
        if todo and system_check:
            # issue 15: say up front what will make this sweep's numbers noisy (as pyperf's system check)
            for warning in system_warnings(device_root, jetson=start_state):
                progress.line(f"warning: {warning}")
        # issue 9: predicted memory before each config (agent/sweep/fit.py), bandwidth once per sweep
        fitter = FitChecker(device_root, plan.reserve_mb)
        if todo:
            record_sweep_bandwidth(
                sweep, json.loads(device.facts_json), start_state, bandwidth_probe, progress.line
            )
            session.commit()
        if outcome.n_skipped:
            progress.line(
                f"sweep {sweep.id}: {outcome.n_skipped} of {len(specs)} configs already measured, skipped"
            )
        seq_base = len(sweep.runs)
        index = outcome.n_skipped
        last_state = start_state
        tele = None
        if telemetry is not None and todo:
            # Built once the sweep exists: samples and collector states are stored against it.
            tele = telemetry(sweep.id)
            hooks = tele
            if hasattr(tele, "on_phase"):
                tele.on_phase = progress.phase
            if hasattr(tele, "heartbeat"):
                # A cooldown or idle baseline can outlast the lease's staleness limit (max_wait_s is the
                # user's): the telemetry's waits beat the lease too, or another host takes the sweep over.
                tele.heartbeat = held.beat_with(tele.heartbeat)
            tele.start()
        try:
            with sigterm_as_interrupt():
                for spec in todo:
                    stop_reason = should_start() if should_start is not None else None
                    if stop_reason:
                        outcome.paused = stop_reason
                        progress.line(f"sweep {sweep.id} paused before config {index + 1}: {stop_reason}")
                        break
                    index += 1
                    label = spec_label(spec)
                    run = Run(
                        sweep_id=sweep.id,
                        spec_id=spec.spec_id,
                        seq=seq_base + index,
                        model_file_id=mf_of[spec.model.path],
                        model_label=spec.model.label,
                        model_group=model_group(spec, plan.model_info.get(spec.model.path)),
                        model_path=spec.model.path,
                        workload_name=spec.workload.name,
                        workload_hash=spec.workload.hash,
                        workload_json=json.dumps(spec.workload.to_json()),
                        params_json=json.dumps(spec.params.to_json(), sort_keys=True),
                        repeat_json=json.dumps(spec.repeat.to_json()),
                        n_ctx=spec.params.n_ctx,
                        n_gpu_layers=spec.params.n_gpu_layers,
                        n_threads=spec.params.n_threads,
                        n_batch=spec.params.n_batch,
                        n_ubatch=spec.params.n_ubatch,
                        flash_attn=spec.params.flash_attn,
                        type_k=spec.params.type_k,
                        type_v=spec.params.type_v,
                        use_mmap=spec.params.use_mmap,
                        depth=spec.params.depth,
                        swa_full=spec.params.swa_full,
                        kv_unified=spec.params.kv_unified,
                        offload_kqv=spec.params.offload_kqv,
                        op_offload=spec.params.op_offload,
                        poll=spec.params.poll,
                        n_seq_max=spec.params.n_seq_max,
                        ignore_eos=spec.workload.ignore_eos,
                        runner=spec.params.runner,
                        concurrency=spec.params.concurrency,
                        request_rate=spec.params.request_rate,
                        status="running",
                        started_at=utcnow(),
                    )
                    switch_error = None
                    wanted = spec.params.power_mode
                    if (
                        wanted is not None
                        and (comparable_state(last_state) or {}).get("power_mode") != wanted
                    ):
                        progress.line(f"switching power mode to {wanted} (plan axis)")
                        switch_error = (power_switcher or (lambda m: switch_power_mode(m, device_root)))(
                            wanted
                        )
                        last_state = read_state()  # a change we asked for is not a surprise
                        got = (comparable_state(last_state) or {}).get("power_mode")
                        if switch_error is None and got != wanted:
                            switch_error = f"nvpmodel reports {got!r} after switching to {wanted!r}"
                    # Re-read before each config: someone may change the power mode during an overnight sweep.
                    state = read_state()
                    if state is not None:
                        run.device_state_json = json.dumps(state)
                        run.device_state_changed = comparable_state(state) != comparable_state(last_state)
                        if run.device_state_changed:
                            progress.line(f"note: device state changed: {comparable_state(state)}")
                        last_state = state
                    session.add(run)
                    session.commit()
                    if switch_error is not None:
                        run.status, run.reason = "error", f"power mode switch failed: {switch_error}"
                        run.ended_at = utcnow()
                        session.commit()
                        outcome.counts["error"] = outcome.counts.get("error", 0) + 1
                        progress.finish(
                            index, f"run {run.id} {label}", f"ERROR: {run.reason}", 0.0, len(specs) - index
                        )
                        continue
                    fit = fitter.assess(run, spec)
                    session.commit()
                    if fit is not None and fit.fits is False:  # not started: it would be OOM-killed
                        run.status, run.reason = SKIPPED_MEMORY, f"predicted not to fit: {fit.message()}"
                        run.ended_at = utcnow()
                        session.commit()
                        outcome.counts[SKIPPED_MEMORY] = outcome.counts.get(SKIPPED_MEMORY, 0) + 1
                        progress.finish(
                            index, f"run {run.id} {label}", f"SKIPPED: {run.reason}", 0.0, len(specs) - index
                        )
                        continue
                    progress.start(index, label)
                    t0 = time.monotonic()
                    if hooks is not None:
                        _guarded(session, progress, "before the run", hooks.before_run, session, run, spec)

                    def relay(event: dict[str, Any], _run: Run = run) -> None:
                        progress.event(event)
                        if hooks is not None:
                            hooks.on_child_event(_run, event)

                    pace = getattr(hooks, "between_reps", None)

                    def cool(event: dict[str, Any], _run: Run = run, _pace: Any = pace) -> float:
                        return float(_pace(session, _run, event)) if _pace is not None else 0.0

                    if spec.workload.quality is not None:  # issue 9: KLD/PPL vs the reference
                        from edgeprof.executors.quality import execute_quality_spec

                        execute_quality_spec(
                            session,
                            run,
                            spec,
                            plan,
                            on_event=relay,
                            env=env,
                            heartbeat=heartbeat,
                            say=progress.line,
                        )
                    else:
                        execute_spec(
                            session,
                            run,
                            spec,
                            on_event=relay,
                            env=env,
                            heartbeat=heartbeat,
                            between_reps=cool if pace is not None else None,
                        )
                    _guarded(session, progress, "computing bandwidth", fitter.annotate_bandwidth, run, spec)
                    fitter.calibrate(run, spec)
                    session.commit()
                    if hooks is not None:
                        _guarded(session, progress, "analysing the run", hooks.after_run, session, run, spec)
                    outcome.counts[run.status] = outcome.counts.get(run.status, 0) + 1
                    progress.finish(
                        index,
                        f"run {run.id} {label}",
                        _describe(session, run),
                        time.monotonic() - t0,
                        len(specs) - index,
                    )
        except KeyboardInterrupt:
            outcome.interrupted = True
            outcome.counts["interrupted"] = outcome.counts.get("interrupted", 0) + 1
            session.rollback()
            for stuck in session.scalars(
                select(Run).where(Run.sweep_id == sweep.id, Run.status == "running")
            ):
                stuck.status, stuck.reason = "interrupted", stuck.reason or "stopped by the user"
                stuck.ended_at = utcnow()
            sweep.status, sweep.ended_at = "interrupted", utcnow()
            session.commit()
            progress.line(f"sweep {sweep.id} interrupted; everything measured so far is stored")
            return outcome
        finally:
            progress.close()
            if tele is not None:
                tele.stop()
        sweep.status, sweep.ended_at = ("paused" if outcome.paused else "completed"), utcnow()
        session.commit()
    return outcome


def _guarded(session: Session, progress: Progress, what: str, step: Callable[..., None], *args: Any) -> None:
    """Telemetry steps around a run: a bug there costs that step, never the stored run or the sweep."""
    try:
        step(*args)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - reported on the progress stream, the sweep goes on
        session.rollback()
        progress.line(f"warning: telemetry failed {what}: {type(exc).__name__}: {exc}")


def _describe(session: Session, run: Run) -> str:
    if run.status != "ok":
        return f"{run.status.upper()}: {run.reason}"
    if '"kind": "quality"' in (run.workload_json or ""):  # issue 9
        from edgeprof.executors.quality import describe

        return describe(session, run) or "ok"
    if (run.runner or "llama-cpp") != "llama-cpp":  # issue 14
        from edgeprof.executors.serving import describe_level

        return describe_level(session, run)
    steady = [m for m in run.measurements if m.kind == "steady"]
    from edgeprof.stats import median

    tg = median([m.tg_tps for m in steady if m.tg_tps is not None])
    pp = median([m.pp_tps for m in steady if m.pp_tps is not None])
    parts = ["ok"]
    if tg is not None:
        parts.append(f"tg {tg:.1f} t/s")
    if pp is not None:
        parts.append(f"pp {pp:.1f} t/s")
    return "  ".join(parts)


def env_without_fault() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("EDGEPROF_TEST_FAULT", None)
    return env
