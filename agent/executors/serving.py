"""The serving runner's agent side: the KV budget check before a config, running it
(``runners.llama_server``), and storing what came back — the build, one ``serving_level`` row with the
per-level figures (``serving_stats``), one ``serving_request`` row per request, the phases telemetry
aggregates over. A serving level is a scenario of its own (an HTTP API under load), never mixed with the
in-process figures."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.device import backend_of
from edgeprof.executors.base import EnergyOver, RunContext, config_label, end_run
from edgeprof.executors.serving_stats import counter_deltas, summarize_level
from edgeprof.executors.store import add_phases, file_identity
from edgeprof.plan import RunSpec
from edgeprof.plan.serving import server_slots
from edgeprof.run_states import SKIPPED_MEMORY, utcnow
from edgeprof.runners.llama_server import ServingResult, find_server, probe_server, run_serving
from edgeprof.runners.loadgen import RequestRecord
from edgeprof.storage.models import Build, ModelFile, Run, ServingLevel, ServingRequest


def serving_job(spec: RunSpec, vocab_size: int | None) -> dict[str, Any]:
    """The runner's job: the spec, its server's slots, and a fresh nonce that starts every prompt of this
    config run (``runners.llama_server.prompt_key``): unique per sweep, level and request, so a server
    that outlives a level or a sweep has no earlier prompt to serve from its cache."""
    job = spec.job()
    serving = dict(job.get("serving") or {})
    conc = int(spec.params.concurrency or 1)
    serving["slots"] = server_slots("llama-server", conc)
    if serving.get("warmup_requests") is None:
        serving["warmup_requests"] = conc
    serving["nonce"] = secrets.token_hex(4)
    job["serving"] = serving
    job["timeout_s"] = spec.timeout_s
    job["vocab_size"] = vocab_size
    return job


def kv_budget(spec: RunSpec, gpu_offload: bool, root: str = "/") -> dict[str, Any]:
    """Predicted memory of the server config (weights + slots × per-slot ctx × KV bytes per token + compute
    buffers, agent/memory_model) against MemAvailable; ``fits`` is None when either side is unknown."""
    from edgeprof import gguf as mm

    slots = server_slots("llama-server", spec.params.concurrency)
    n_ctx = spec.params.n_ctx
    out: dict[str, Any] = {"slots": slots, "slot_ctx": n_ctx, "n_ctx_total": n_ctx * slots}
    try:
        shape = mm.read_model_shape(spec.model.path)
    except Exception as exc:  # noqa: BLE001 - a model the predictor cannot read is run unpredicted
        out["error"] = f"cannot predict: {type(exc).__name__}: {exc}"[:300]
        out["fits"] = None
        return out
    wl = spec.workload
    from edgeprof.plan import estimate_prompt_tokens

    pred = mm.predict_memory(
        shape,
        n_ctx=spec.params.n_ctx * slots,
        n_gpu_layers=spec.params.n_gpu_layers,
        n_batch=spec.params.n_batch,
        n_ubatch=spec.params.n_ubatch,
        type_k=spec.params.type_k,
        type_v=spec.params.type_v,
        flash_attn=spec.params.flash_attn,
        use_mmap=spec.params.use_mmap,
        prompt_tokens=estimate_prompt_tokens(wl),
        n_predict=wl.n_predict,
        gpu_offload=gpu_offload,
        unified=mm.is_unified_memory(root),
        n_seq_max=slots,  # one sequence per slot, each with its own ctx (non-unified KV)
    )
    kv_per_token = mm.kv_bytes_per_cell(shape, spec.params.type_k, spec.params.type_v)
    fit = mm.check_fit(pred, mm.mem_available_mb(root))
    out.update(
        prediction=pred.to_json(),
        kv_bytes_per_token=kv_per_token,
        kv_mb=round(pred.kv_cpu_mb + pred.kv_gpu_mb, 2),
        predicted_mb=round(pred.total_mb, 2),
        available_mb=round(fit.available_mb, 2) if fit.available_mb is not None else None,
        fits=fit.fits,
        message=fit.message(),
    )
    return out


def get_or_create_server_build(session: Session, build: dict[str, Any], system_info: str | None) -> Build:
    setup = build.get("setup") or {}
    version = str(setup.get("llama_cpp_python_sdist") or "unknown")
    runtime_version = str(build.get("version_text") or "")[:1000]
    offload = bool(build.get("gpu_offload"))
    flags = json.dumps({k: v for k, v in build.items() if k != "version_text"}, sort_keys=True)
    fp = hashlib.sha256(
        json.dumps(["llama-server", version, runtime_version, system_info, offload, flags]).encode()
    ).hexdigest()
    row = session.scalar(select(Build).where(Build.fingerprint == fp))
    if row is None:
        devices = " ".join(build.get("devices") or [])
        row = Build(
            fingerprint=fp,
            llama_cpp_python_version=version,
            backend=backend_of(devices + " " + (system_info or ""), offload),
            gpu_offload=offload,
            system_info=system_info or "",
            build_flags=flags,
            first_seen=utcnow(),
            runtime="llama-server",
            runtime_version=runtime_version,
        )
        session.add(row)
        session.flush()
    return row


def _max_metric(samples: list[dict[str, float]], name: str) -> float | None:
    values = [s[name] for s in samples if name in s]
    return max(values) if values else None


def request_row(run: Run, r: RequestRecord) -> ServingRequest:
    """One request as the client timed it, beside the server's own figures for it."""
    return ServingRequest(
        run_id=run.id,
        kind=r.kind,
        idx=r.idx,
        client=r.client,
        status=r.status,
        error=r.error,
        http_status=r.http_status,
        t_send_mono=r.t_send,
        t_first_mono=r.t_first,
        t_end_mono=r.t_end,
        ttft_ms=r.ttft_ms,
        tpot_ms=r.tpot_ms,
        e2el_ms=r.e2el_ms,
        itl_json=json.dumps([round(g, 3) for g in r.itl_ms]),
        n_chunks=len(r.chunk_times),
        output_tokens=r.output_tokens,
        prompt_tokens=r.prompt_tokens,
        server_prompt_ms=r.server_prompt_ms,
        server_predicted_ms=r.server_predicted_ms,
        server_cache_n=r.server_cache_n,
        finish_reason=(r.finish_reason or None) and str(r.finish_reason)[:16],
        client_overhead_ms=r.client_overhead_ms,
    )


def level_row(run: Run, spec: RunSpec, res: ServingResult, budget: dict[str, Any]) -> ServingLevel:
    """The level's context: the server process, its readiness and cold start, its slots, its counters."""
    cold = next((r for r in res.records if r.kind == "cold"), None)
    props = res.props or {}
    gen = props.get("default_generation_settings") if isinstance(props, dict) else None
    slot_n_ctx = gen.get("n_ctx") if isinstance(gen, dict) else None
    kept = ("total_slots", "default_generation_settings", "build_info")
    return ServingLevel(
        run_id=run.id,
        concurrency=int(spec.params.concurrency or 1),
        request_rate=spec.params.request_rate,
        server_pid=res.pid,
        server_command=" ".join(res.command) or None,
        ready_ms=(res.t_ready - res.t_spawn) * 1000.0 if res.t_ready is not None else None,
        cold_start_ms=(
            (cold.t_first - res.t_spawn) * 1000.0 if cold is not None and cold.t_first is not None else None
        ),
        n_slots=props.get("total_slots") if isinstance(props, dict) else None,
        slot_n_ctx=int(slot_n_ctx) if isinstance(slot_n_ctx, int) else None,
        max_deferred=_max_metric(res.metrics_samples, "llamacpp:requests_deferred"),
        kv_budget_json=json.dumps(budget, sort_keys=True),
        metrics_before_json=json.dumps(res.metrics_before) if res.metrics_before is not None else None,
        metrics_after_json=json.dumps(res.metrics_after) if res.metrics_after is not None else None,
        props_json=json.dumps({k: props[k] for k in kept if k in props}, sort_keys=True, default=str)
        if props
        else None,
        t_start_mono=res.level_t_start,
        t_end_mono=res.level_t_end,
    )


def level_stats(spec: RunSpec, res: ServingResult) -> dict[str, Any] | None:
    """The measured level's figures (None when it never started), with the server's counters over it."""
    if res.level_t_start is None:
        return None
    slo = dict(spec.serving.slo) if spec.serving is not None else {}
    cache_asked = bool(spec.serving.cache_prompt) if spec.serving is not None else False
    duration = res.level_t_end - res.level_t_start if res.level_t_end is not None else 0.0
    stats = summarize_level(res.records, duration, slo, cache_asked)
    if res.metrics_before is not None and res.metrics_after is not None:
        stats["metrics_deltas"] = counter_deltas(res.metrics_before, res.metrics_after)
    stats["max_requests_processing"] = _max_metric(res.metrics_samples, "llamacpp:requests_processing")
    return stats


def put_stats(level: ServingLevel, stats: dict[str, Any]) -> None:
    """The figures a report sorts and filters by, as columns beside the full ``stats_json``."""
    level.stats_json = json.dumps(stats, sort_keys=True)
    for col in ("n_requests", "n_ok", "n_errors", "n_timeouts", "n_rejected"):
        setattr(level, col, stats[col])
    for col in ("duration_s", "request_throughput_rps", "output_tps", "total_tps", "goodput_rps"):
        setattr(level, col, stats[col])
    for metric in ("ttft", "tpot", "itl", "e2el"):
        dist = stats[f"{metric}_ms"]
        setattr(level, f"{metric}_p50_ms", dist["p50"])
        setattr(level, f"{metric}_p99_ms", dist["p99"])


def store_result(
    session: Session, run: Run, spec: RunSpec, res: ServingResult, budget: dict[str, Any]
) -> None:
    """Every number of one serving config, with its context; NULL where it was not measured."""
    add_phases(session, run, res.phases)
    for r in res.records:
        session.add(request_row(run, r))
    level = level_row(run, spec, res, budget)
    stats = level_stats(spec, res)
    if stats is not None:
        put_stats(level, stats)
    session.add(level)
    if res.build is not None and run.build_id is None:
        run.build_id = get_or_create_server_build(session, res.build, res.system_info).id
    run.effective_json = json.dumps(
        {"server": {"slots": level.n_slots, "slot_n_ctx": level.slot_n_ctx, "command": res.command}},
        sort_keys=True,
    )
    if res.peak_rss_mb is not None:
        run.peak_rss_mb = res.peak_rss_mb


def note_prompt_nonce(run: Run, job: dict[str, Any]) -> None:
    """The nonce that started this run's prompts, beside the settings in effect (a request's prompt can be
    rebuilt from it and the request's index)."""
    effective = json.loads(run.effective_json) if run.effective_json else {}
    effective["prompt_nonce"] = job["serving"].get("nonce")
    run.effective_json = json.dumps(effective, sort_keys=True, default=str)


class ServingExecutor:
    runner = "llama-server"
    workload_kind = "generation"

    def execute(self, session: Session, run: Run, spec: RunSpec, ctx: RunContext) -> Run:
        """One serving config, from the KV budget check to its stored rows; never raises for a failed
        server (a stop by the user is stored ``interrupted``, then raised)."""
        run.t_start_mono = time.monotonic()
        mf = session.get(ModelFile, run.model_file_id) if run.model_file_id is not None else None
        path, _where = find_server(ctx.env)
        offload = bool(probe_server(path).get("gpu_offload")) if path is not None else False
        budget = kv_budget(spec, offload)
        if budget.get("fits") is False:
            return self.refuse(session, run, spec, budget)
        job = self.job_for(spec, mf.vocab_size if mf is not None else None)
        job["model_identity"] = file_identity(mf)  # the server loads the file that was hashed
        # No write transaction open while the server runs: the sampler's sink and the lease's heartbeats
        # write from other connections, and would wait out SQLite's busy timeout (the sampler blocked in
        # its flush takes no readings: a level without telemetry).
        session.commit()
        res = run_serving(job, spec.timeout_s, on_event=ctx.on_event, env=ctx.env, heartbeat=ctx.heartbeat)
        store_result(session, run, spec, res, budget)
        note_prompt_nonce(run, job)
        self.store_more(session, run, spec, res)
        run.status, run.reason = res.status, res.reason
        run.exit_code, run.signal_name = res.exit_code, res.signal_name
        run.log_tail = res.log_tail[-2000:] if res.status != "ok" and res.log_tail else None
        end_run(session, run)
        if res.status == "interrupted":
            raise KeyboardInterrupt
        return run

    def job_for(self, spec: RunSpec, vocab_size: int | None) -> dict[str, Any]:
        """What the serving runner is handed (a workload kind with its own load overrides it)."""
        return serving_job(spec, vocab_size)

    def store_more(self, session: Session, run: Run, spec: RunSpec, res: ServingResult) -> None:
        """Rows a workload kind keeps beside the level's, stored however the level ended (none here)."""

    def refuse(self, session: Session, run: Run, spec: RunSpec, budget: dict[str, Any]) -> Run:
        """As for the in-process runner: a config predicted not to fit is not started (it would be
        OOM-killed); its level row keeps the budget that said so."""
        run.status = SKIPPED_MEMORY
        run.reason = (
            f"predicted not to fit: {budget['slots']} slots x ctx {budget['slot_ctx']} "
            f"{budget.get('message')}; the server was not started"
        )
        session.add(
            ServingLevel(
                run_id=run.id,
                concurrency=int(spec.params.concurrency or 1),
                request_rate=spec.params.request_rate,
                kv_budget_json=json.dumps(budget, sort_keys=True),
            )
        )
        return end_run(session, run)

    def label(self, spec: RunSpec) -> str:
        p = spec.params
        rate = f" rate={p.request_rate:g}/s" if p.request_rate is not None else ""
        return f"{config_label(spec)} {p.runner} c={p.concurrency}{rate}"

    def describe(self, session: Session, run: Run) -> str:
        """The level's successes, median TTFT and TPOT, and output throughput."""
        level = session.scalar(select(ServingLevel).where(ServingLevel.run_id == run.id))
        if level is None or level.n_requests is None:
            return "ok"
        parts = [f"ok {level.n_ok}/{level.n_requests}"]
        if level.ttft_p50_ms is not None:
            parts.append(f"TTFT p50 {level.ttft_p50_ms:.1f} ms")
        if level.tpot_p50_ms is not None:
            parts.append(f"TPOT p50 {level.tpot_p50_ms:.2f} ms")
        if level.output_tps is not None:
            parts.append(f"{level.output_tps:.1f} out tok/s")
        return "  ".join(parts)

    def attach_energy(self, session: Session, run: Run, energy: EnergyOver) -> None:
        """J per output token over the measured level (gross: the device's whole draw while the level ran,
        idle included, over the tokens the server produced in it)."""
        level = session.scalar(select(ServingLevel).where(ServingLevel.run_id == run.id))
        if level is None or level.t_start_mono is None or level.t_end_mono is None:
            return
        tokens = session.scalars(
            select(ServingRequest.output_tokens).where(
                ServingRequest.run_id == run.id,
                ServingRequest.kind == "measured",
                ServingRequest.status == "ok",
            )
        ).all()
        n_out = sum(t for t in tokens if t is not None)
        joules = energy(level.t_start_mono, level.t_end_mono)
        level.output_j_per_token = joules / n_out if joules is not None and n_out else None
