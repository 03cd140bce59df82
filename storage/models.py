"""Typed SQLAlchemy 2 models: the head of the schema (DESIGN §4).

The tables are created and upgraded by ``edgeprof.storage.migrations`` (frozen DDL per version), never by
``metadata.create_all``: a DB written by an older edgeprof must be upgraded in place, and a test checks that
the migrated schema matches these models column for column.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    Double,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from edgeprof.storage.identity import content_default, random_uid


class Base(DeclarativeBase):
    pass


class Device(Base):
    __tablename__ = "device"

    id: Mapped[int] = mapped_column(primary_key=True)
    # Global identity: unique across devices, what push/export/import match rows by.
    uid: Mapped[str] = mapped_column(
        String(36), unique=True, index=True, default=content_default("device", "fingerprint")
    )
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    hostname: Mapped[str] = mapped_column(String(255))
    machine_id: Mapped[str | None] = mapped_column(String(64))
    arch: Mapped[str] = mapped_column(String(32))
    cpu_model: Mapped[str | None] = mapped_column(String(255))
    cpu_count: Mapped[int | None] = mapped_column(Integer)
    ram_total_mb: Mapped[float | None] = mapped_column(Float)
    board_model: Mapped[str | None] = mapped_column(String(255))
    l4t_release: Mapped[str | None] = mapped_column(String(64))
    gpu: Mapped[str | None] = mapped_column(String(255))
    kernel: Mapped[str | None] = mapped_column(String(255))
    os_release: Mapped[str | None] = mapped_column(String(255))
    facts_json: Mapped[str] = mapped_column(Text)
    first_seen: Mapped[datetime]


class Build(Base):
    __tablename__ = "build"

    id: Mapped[int] = mapped_column(primary_key=True)
    # Global identity: unique across devices, what push/export/import match rows by.
    uid: Mapped[str] = mapped_column(
        String(36), unique=True, index=True, default=content_default("build", "fingerprint")
    )
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    llama_cpp_python_version: Mapped[str] = mapped_column(String(32))
    backend: Mapped[str] = mapped_column(String(32))
    gpu_offload: Mapped[bool] = mapped_column(Boolean)
    system_info: Mapped[str] = mapped_column(Text)
    build_flags: Mapped[str | None] = mapped_column(Text)
    # Which runtime this build is (NULL before v12 = llama-cpp-python) and its own version text: a sweep may
    # run llama-server as well as the in-process runtime, and their numbers differ
    runtime: Mapped[str | None] = mapped_column(String(32))
    runtime_version: Mapped[str | None] = mapped_column(Text)
    first_seen: Mapped[datetime]


class ModelFile(Base):
    __tablename__ = "model_file"
    __table_args__ = (UniqueConstraint("path", "sha256", name="uq_model_file_path_sha"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    # Global identity: unique across devices, what push/export/import match rows by.
    uid: Mapped[str] = mapped_column(
        String(36), unique=True, index=True, default=content_default("model_file", "path", "sha256")
    )
    path: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    mtime_ns: Mapped[int] = mapped_column(BigInteger)
    arch: Mapped[str | None] = mapped_column(String(64))
    name: Mapped[str | None] = mapped_column(String(255))
    n_params: Mapped[int | None] = mapped_column(BigInteger)
    quant_type: Mapped[str | None] = mapped_column(String(32))
    file_type: Mapped[int | None] = mapped_column(Integer)
    n_layers: Mapped[int | None] = mapped_column(Integer)
    context_length: Mapped[int | None] = mapped_column(Integer)
    vocab_size: Mapped[int | None] = mapped_column(Integer)
    # sum of the tensors' data sizes (NULL: recorded before it was stored)
    tensor_bytes: Mapped[int | None] = mapped_column(BigInteger)


class Sweep(Base):
    __tablename__ = "sweep"

    id: Mapped[int] = mapped_column(primary_key=True)
    # Global identity: unique across devices, what push/export/import match rows by.
    uid: Mapped[str] = mapped_column(String(36), unique=True, index=True, default=random_uid)
    name: Mapped[str] = mapped_column(String(255))
    plan_path: Mapped[str | None] = mapped_column(Text)
    plan_text: Mapped[str] = mapped_column(Text)
    plan_hash: Mapped[str] = mapped_column(String(64), index=True)
    device_id: Mapped[int] = mapped_column(ForeignKey("device.id"))
    edgeprof_version: Mapped[str] = mapped_column(String(32))
    started_at: Mapped[datetime]
    ended_at: Mapped[datetime | None]
    status: Mapped[str] = mapped_column(String(16))
    n_specs: Mapped[int] = mapped_column(Integer)
    sampler_json: Mapped[str | None] = mapped_column(Text)
    device_state_json: Mapped[str | None] = mapped_column(Text)
    # Memory bandwidth measured once per sweep (method in the JSON) and the board's datasheet figure: decode
    # is bandwidth-bound, so the report says how close a config came to the limit
    bw_probe_gbps: Mapped[float | None] = mapped_column(Double)
    bw_probe_json: Mapped[str | None] = mapped_column(Text)
    bw_datasheet_gbps: Mapped[float | None] = mapped_column(Double)
    bw_datasheet_source: Mapped[str | None] = mapped_column(Text)

    device: Mapped[Device] = relationship()
    runs: Mapped[list[Run]] = relationship(back_populates="sweep", order_by="Run.id")


class Run(Base):
    """One execution of one run spec (model x params x workload x repeats) in its own child process(es)."""

    __tablename__ = "run"
    __table_args__ = (Index("ix_run_sweep_spec", "sweep_id", "spec_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    # Global identity: unique across devices, what push/export/import match rows by.
    uid: Mapped[str] = mapped_column(String(36), unique=True, index=True, default=random_uid)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweep.id"))
    spec_id: Mapped[str] = mapped_column(String(64))
    seq: Mapped[int] = mapped_column(Integer)
    model_file_id: Mapped[int | None] = mapped_column(ForeignKey("model_file.id"))
    build_id: Mapped[int | None] = mapped_column(ForeignKey("build.id"))
    model_label: Mapped[str] = mapped_column(String(255))
    model_group: Mapped[str] = mapped_column(String(255))
    model_path: Mapped[str] = mapped_column(Text)
    workload_name: Mapped[str] = mapped_column(String(255))
    workload_hash: Mapped[str] = mapped_column(String(64))
    workload_json: Mapped[str] = mapped_column(Text)
    params_json: Mapped[str] = mapped_column(Text)
    effective_json: Mapped[str | None] = mapped_column(Text)
    repeat_json: Mapped[str] = mapped_column(Text)
    n_ctx: Mapped[int] = mapped_column(Integer)
    n_gpu_layers: Mapped[int] = mapped_column(Integer)
    n_threads: Mapped[int] = mapped_column(Integer)
    n_batch: Mapped[int] = mapped_column(Integer)
    n_ubatch: Mapped[int] = mapped_column(Integer)
    flash_attn: Mapped[str] = mapped_column(String(8))
    type_k: Mapped[str] = mapped_column(String(16))
    type_v: Mapped[str] = mapped_column(String(16))
    use_mmap: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[str] = mapped_column(String(16), index=True)
    reason: Mapped[str | None] = mapped_column(Text)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    signal_name: Mapped[str | None] = mapped_column(String(16))
    started_at: Mapped[datetime]
    ended_at: Mapped[datetime | None]
    t_start_mono: Mapped[float | None] = mapped_column(Float)
    t_end_mono: Mapped[float | None] = mapped_column(Float)
    peak_rss_mb: Mapped[float | None] = mapped_column(Float)
    page_cache: Mapped[str | None] = mapped_column(String(16))
    log_tail: Mapped[str | None] = mapped_column(Text)
    start_temp_c: Mapped[float | None] = mapped_column(Float)
    cooldown_wait_s: Mapped[float | None] = mapped_column(Float)
    cooldown_reason: Mapped[str | None] = mapped_column(String(32))
    idle_power_mw: Mapped[float | None] = mapped_column(Float)
    power_source: Mapped[str | None] = mapped_column(String(96))
    # Migration 13: agent/telemetry/energy.py's precedence step, whole-board coverage, every metric summed
    energy_basis: Mapped[str | None] = mapped_column(String(32))
    energy_whole_board: Mapped[bool | None] = mapped_column(Boolean)
    energy_sources: Mapped[str | None] = mapped_column(Text)
    device_state_json: Mapped[str | None] = mapped_column(Text)
    device_state_changed: Mapped[bool | None] = mapped_column(Boolean)
    peak_shared_mb: Mapped[float | None] = mapped_column(Float)
    peak_gpu_mem_mb: Mapped[float | None] = mapped_column(Float)
    peak_ram_used_mb: Mapped[float | None] = mapped_column(Float)
    # The runner (NULL before v12 = llama-cpp) and the serving load of this config: serving configs are the
    # same model at several load levels
    runner: Mapped[str | None] = mapped_column(String(32))
    concurrency: Mapped[int | None] = mapped_column(Integer)
    request_rate: Mapped[float | None] = mapped_column(Double)
    # Predicted resident memory before the run (agent/gguf/memory.py), to refuse a config that would not fit,
    # MemAvailable at that
    # moment, the prediction's parts; bytes one decode step reads (weights, and KV per cached position)
    mem_predicted_mb: Mapped[float | None] = mapped_column(Double)
    mem_available_mb: Mapped[float | None] = mapped_column(Double)
    mem_prediction_json: Mapped[str | None] = mapped_column(Text)
    weights_read_bytes_per_token: Mapped[int | None] = mapped_column(BigInteger)
    kv_read_bytes_per_position: Mapped[float | None] = mapped_column(Double)
    # llama.cpp parity knobs in effect (llama-bench's values unless the plan moved them, so numbers compare),
    # the context depth of every request, whether EOS was ignored, and the KV cache size llama.cpp reported
    depth: Mapped[int | None] = mapped_column(Integer)
    swa_full: Mapped[bool | None] = mapped_column(Boolean)
    kv_unified: Mapped[bool | None] = mapped_column(Boolean)
    offload_kqv: Mapped[bool | None] = mapped_column(Boolean)
    op_offload: Mapped[bool | None] = mapped_column(Boolean)
    poll: Mapped[int | None] = mapped_column(Integer)
    n_seq_max: Mapped[int | None] = mapped_column(Integer)
    ignore_eos: Mapped[bool | None] = mapped_column(Boolean)
    kv_cache_mib: Mapped[float | None] = mapped_column(Double)

    sweep: Mapped[Sweep] = relationship(back_populates="runs")
    model_file: Mapped[ModelFile | None] = relationship()
    build: Mapped[Build | None] = relationship()
    measurements: Mapped[list[Measurement]] = relationship(
        back_populates="run", order_by="Measurement.id", cascade="all, delete-orphan"
    )
    phases: Mapped[list[Phase]] = relationship(order_by="Phase.id", cascade="all, delete-orphan")
    soak_windows: Mapped[list[SoakWindow]] = relationship(
        order_by="SoakWindow.idx", cascade="all, delete-orphan"
    )


class Measurement(Base):
    """One request: the cold one (fresh process), a discarded warm-up, or a steady repetition (DESIGN §3)."""

    __tablename__ = "measurement"

    id: Mapped[int] = mapped_column(primary_key=True)
    # Global identity: unique across devices, what push/export/import match rows by.
    uid: Mapped[str] = mapped_column(String(36), unique=True, index=True, default=random_uid)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id"), index=True)
    kind: Mapped[str] = mapped_column(String(8))
    rep: Mapped[int] = mapped_column(Integer)
    load_ms: Mapped[float | None] = mapped_column(Float)
    cold_start_ms: Mapped[float | None] = mapped_column(Float)
    n_prompt: Mapped[int | None] = mapped_column(Integer)
    prefill_ms: Mapped[float | None] = mapped_column(Float)
    pp_tps: Mapped[float | None] = mapped_column(Float)
    ttft_ms: Mapped[float | None] = mapped_column(Float)
    n_gen: Mapped[int | None] = mapped_column(Integer)
    decode_ms: Mapped[float | None] = mapped_column(Float)
    tg_tps: Mapped[float | None] = mapped_column(Float)
    e2e_ms: Mapped[float | None] = mapped_column(Float)
    tpot_ms: Mapped[float | None] = mapped_column(Float)
    tokens_out: Mapped[int | None] = mapped_column(Integer)
    output_tokens_json: Mapped[str | None] = mapped_column(Text)
    output_hash: Mapped[str | None] = mapped_column(String(64))
    output_text: Mapped[str | None] = mapped_column(Text)
    finish_reason: Mapped[str | None] = mapped_column(String(16))
    t_start_mono: Mapped[float | None] = mapped_column(Float)
    t_end_mono: Mapped[float | None] = mapped_column(Float)
    prefill_energy_j: Mapped[float | None] = mapped_column(Float)
    decode_energy_j: Mapped[float | None] = mapped_column(Float)
    prefill_j_per_token: Mapped[float | None] = mapped_column(Float)
    decode_j_per_token: Mapped[float | None] = mapped_column(Float)
    prefill_j_per_token_net: Mapped[float | None] = mapped_column(Float)
    decode_j_per_token_net: Mapped[float | None] = mapped_column(Float)
    decode_power_mw: Mapped[float | None] = mapped_column(Float)
    temp_max_c: Mapped[float | None] = mapped_column(Float)
    # Bytes read per decode token x tg_tps (agent/gguf/bandwidth.py), to set against the bandwidth limit;
    # NULL when not computable
    bw_gbps: Mapped[float | None] = mapped_column(Double)
    # Index of the first EOS in the output (even when ignored: a short answer is a faster one), the depth the
    # request ran at and
    # the untimed fill that reached it (NULL when restored from the saved state), KV cells in use after the
    # request, and the prompt as tokenized: hash of the (rendered) text, token count, specials parsed
    first_eos_index: Mapped[int | None] = mapped_column(Integer)
    depth: Mapped[int | None] = mapped_column(Integer)
    depth_fill_ms: Mapped[float | None] = mapped_column(Double)
    kv_used_cells: Mapped[int | None] = mapped_column(Integer)
    prompt_sha256: Mapped[str | None] = mapped_column(String(64))
    prompt_n_tokens: Mapped[int | None] = mapped_column(Integer)
    parse_special: Mapped[bool | None] = mapped_column(Boolean)

    run: Mapped[Run] = relationship(back_populates="measurements")


class Phase(Base):
    """A named interval of a run on the shared monotonic clock (load, prefill, decode, idle, cooldown…)."""

    __tablename__ = "phase"

    id: Mapped[int] = mapped_column(primary_key=True)
    # Global identity: unique across devices, what push/export/import match rows by.
    uid: Mapped[str] = mapped_column(String(36), unique=True, index=True, default=random_uid)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id"), index=True)
    name: Mapped[str] = mapped_column(String(32))
    kind: Mapped[str | None] = mapped_column(String(8))
    rep: Mapped[int | None] = mapped_column(Integer)
    t_start_mono: Mapped[float] = mapped_column(Float)
    t_end_mono: Mapped[float] = mapped_column(Float)


class Sample(Base):
    """One telemetry reading; ``value`` is NULL when the source could not be read (never 0)."""

    __tablename__ = "sample"
    __table_args__ = (Index("ix_sample_sweep_t", "sweep_id", "t_mono"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    # Global identity: unique across devices, what push/export/import match rows by.
    uid: Mapped[str] = mapped_column(String(36), unique=True, index=True, default=random_uid)
    sweep_id: Mapped[int | None] = mapped_column(ForeignKey("sweep.id"))
    run_id: Mapped[int | None] = mapped_column(ForeignKey("run.id"), index=True)
    t_mono: Mapped[float] = mapped_column(Float)
    t_wall: Mapped[float] = mapped_column(Float)
    source: Mapped[str] = mapped_column(String(32))
    metric: Mapped[str] = mapped_column(String(96))
    value: Mapped[float | None] = mapped_column(Float)


class SampleBlock(Base):
    """Consecutive ticks of one telemetry source in one run, compactly encoded (``edgeprof.storage.samples``).

    ``resolution_ms`` is NULL for raw samples and the bucket width for series downsampled by ``db compact``.
    """

    __tablename__ = "sample_block"
    __table_args__ = (Index("ix_sample_block_sweep_t", "sweep_id", "t_start_mono"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    sweep_id: Mapped[int | None] = mapped_column(ForeignKey("sweep.id"))
    run_id: Mapped[int | None] = mapped_column(ForeignKey("run.id"), index=True)
    source: Mapped[str] = mapped_column(String(32))
    t_start_mono: Mapped[float] = mapped_column(Double)
    t_end_mono: Mapped[float] = mapped_column(Double)
    n_ticks: Mapped[int] = mapped_column(Integer)
    n_values: Mapped[int] = mapped_column(BigInteger)
    resolution_ms: Mapped[int | None] = mapped_column(Integer)
    codec: Mapped[int] = mapped_column(Integer)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class Verdict(Base):
    __tablename__ = "verdict"

    id: Mapped[int] = mapped_column(primary_key=True)
    # Global identity: unique across devices, what push/export/import match rows by.
    uid: Mapped[str] = mapped_column(String(36), unique=True, index=True, default=random_uid)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id"), index=True)
    kind: Mapped[str] = mapped_column(String(32))
    value: Mapped[str] = mapped_column(String(32))
    evidence_json: Mapped[str] = mapped_column(Text)


class CollectorStatus(Base):
    """A telemetry source of a sweep: available or not and why, what it gives, whether it was disabled."""

    __tablename__ = "collector_status"

    id: Mapped[int] = mapped_column(primary_key=True)
    # Global identity: unique across devices, what push/export/import match rows by.
    uid: Mapped[str] = mapped_column(String(36), unique=True, index=True, default=random_uid)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweep.id"), index=True)
    name: Mapped[str] = mapped_column(String(32))
    ok: Mapped[bool] = mapped_column(Boolean)
    reason: Mapped[str] = mapped_column(Text)
    metrics_json: Mapped[str] = mapped_column(Text)
    disabled_reason: Mapped[str | None] = mapped_column(Text)
    last_error: Mapped[str | None] = mapped_column(Text)


class PhaseStat(Base):
    """An aggregate of one metric over one phase of a run (temperature max, frequency mean, power mean…)."""

    __tablename__ = "phase_stat"

    id: Mapped[int] = mapped_column(primary_key=True)
    # Global identity: unique across devices, what push/export/import match rows by.
    uid: Mapped[str] = mapped_column(String(36), unique=True, index=True, default=random_uid)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id"), index=True)
    phase: Mapped[str] = mapped_column(String(32))
    kind: Mapped[str | None] = mapped_column(String(8))
    rep: Mapped[int | None] = mapped_column(Integer)
    metric: Mapped[str] = mapped_column(String(96))
    stat: Mapped[str] = mapped_column(String(8))
    value: Mapped[float | None] = mapped_column(Float)


class AgentState(Base):
    """The agent's heartbeat and current activity, so ``edgeprof status`` can tell alive from dead."""

    __tablename__ = "agent_state"

    id: Mapped[int] = mapped_column(primary_key=True)
    pid: Mapped[int] = mapped_column(Integer)
    hostname: Mapped[str] = mapped_column(String(255))
    started_at: Mapped[datetime]
    heartbeat_at: Mapped[datetime]
    state: Mapped[str] = mapped_column(String(32))
    message: Mapped[str | None] = mapped_column(Text)
    sweep_id: Mapped[int | None] = mapped_column(Integer)
    plan_path: Mapped[str | None] = mapped_column(Text)
    stopped_at: Mapped[datetime | None]


class SweepLease(Base):
    """Who may write a sweep: one row per plan-on-device (``lease_key``), owner and heartbeat, so that two
    processes never write one sweep at once.

    A row, not a file lock, so that it works on any database (PostgreSQL for a fleet as well as SQLite); the
    owner is host + pid + process start time, so a reused pid or a live owner on another host is never
    mistaken for a dead one.
    """

    __tablename__ = "sweep_lease"

    lease_key: Mapped[str] = mapped_column(String(255), primary_key=True)
    sweep_id: Mapped[int | None] = mapped_column(Integer, index=True)
    token: Mapped[str] = mapped_column(String(36))
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    proc_start: Mapped[str | None] = mapped_column(String(96))
    acquired_at: Mapped[datetime]
    heartbeat_at: Mapped[datetime]
    released_at: Mapped[datetime | None]


class ServingLevel(Base):
    """One serving config's load level (llama-server runner): the server's lifecycle, the per-level
    figures of docs/measurements.md, serving rows (distributions in ``stats_json``, nearest rank with n),
    the KV budget and the /metrics counters before and after. One row per run."""

    __tablename__ = "serving_level"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id"), index=True)
    concurrency: Mapped[int] = mapped_column(Integer)
    request_rate: Mapped[float | None] = mapped_column(Double)
    server_pid: Mapped[int | None] = mapped_column(Integer)
    server_command: Mapped[str | None] = mapped_column(Text)
    ready_ms: Mapped[float | None] = mapped_column(Double)  # spawn -> /health 200
    cold_start_ms: Mapped[float | None] = mapped_column(Double)  # spawn -> first token of the first request
    n_slots: Mapped[int | None] = mapped_column(Integer)
    slot_n_ctx: Mapped[int | None] = mapped_column(Integer)  # per-slot context the server reports (/props)
    n_requests: Mapped[int | None] = mapped_column(Integer)
    n_ok: Mapped[int | None] = mapped_column(Integer)
    n_errors: Mapped[int | None] = mapped_column(Integer)
    n_timeouts: Mapped[int | None] = mapped_column(Integer)
    n_rejected: Mapped[int | None] = mapped_column(Integer)
    max_deferred: Mapped[float | None] = mapped_column(Double)  # llamacpp:requests_deferred, max while loaded
    duration_s: Mapped[float | None] = mapped_column(Double)
    request_throughput_rps: Mapped[float | None] = mapped_column(Double)
    output_tps: Mapped[float | None] = mapped_column(Double)
    total_tps: Mapped[float | None] = mapped_column(Double)
    goodput_rps: Mapped[float | None] = mapped_column(Double)
    ttft_p50_ms: Mapped[float | None] = mapped_column(Double)
    ttft_p99_ms: Mapped[float | None] = mapped_column(Double)
    tpot_p50_ms: Mapped[float | None] = mapped_column(Double)
    tpot_p99_ms: Mapped[float | None] = mapped_column(Double)
    itl_p50_ms: Mapped[float | None] = mapped_column(Double)
    itl_p99_ms: Mapped[float | None] = mapped_column(Double)
    e2el_p50_ms: Mapped[float | None] = mapped_column(Double)
    e2el_p99_ms: Mapped[float | None] = mapped_column(Double)
    output_j_per_token: Mapped[float | None] = mapped_column(Double)  # energy of the level / output tokens
    stats_json: Mapped[str | None] = mapped_column(Text)
    kv_budget_json: Mapped[str | None] = mapped_column(Text)
    metrics_before_json: Mapped[str | None] = mapped_column(Text)
    metrics_after_json: Mapped[str | None] = mapped_column(Text)
    props_json: Mapped[str | None] = mapped_column(Text)
    t_start_mono: Mapped[float | None] = mapped_column(Double)
    t_end_mono: Mapped[float | None] = mapped_column(Double)


class ServingRequest(Base):
    """One request of a serving run as the client timed it, beside the server's own timings."""

    __tablename__ = "serving_request"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id"), index=True)
    kind: Mapped[str] = mapped_column(String(8))  # cold | warmup | measured
    idx: Mapped[int] = mapped_column(Integer)
    client: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    http_status: Mapped[int | None] = mapped_column(Integer)
    t_send_mono: Mapped[float] = mapped_column(Double)
    t_first_mono: Mapped[float | None] = mapped_column(Double)
    t_end_mono: Mapped[float | None] = mapped_column(Double)
    ttft_ms: Mapped[float | None] = mapped_column(Double)
    tpot_ms: Mapped[float | None] = mapped_column(Double)
    e2el_ms: Mapped[float | None] = mapped_column(Double)
    itl_json: Mapped[str | None] = mapped_column(Text)
    n_chunks: Mapped[int | None] = mapped_column(Integer)
    output_tokens: Mapped[int | None] = mapped_column(Integer)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    server_prompt_ms: Mapped[float | None] = mapped_column(Double)
    server_predicted_ms: Mapped[float | None] = mapped_column(Double)
    server_cache_n: Mapped[int | None] = mapped_column(Integer)
    finish_reason: Mapped[str | None] = mapped_column(String(16))
    client_overhead_ms: Mapped[float | None] = mapped_column(Double)


class QualityResult(Base):
    """A variant's next-token distributions vs its reference's over a fixed text (a quality run).

    KLD(ref || variant) per scored token, summarized (mean ± standard error, median, nearest-rank p90/p95/p99,
    max); the share of tokens whose top token matches the reference's; |Δp| of the reference's top token;
    perplexity of both with standard errors. Written once per run and never recomputed on resume.
    """

    __tablename__ = "quality_result"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id"), index=True)
    reference_label: Mapped[str] = mapped_column(String(255))
    reference_sha256: Mapped[str] = mapped_column(String(64))
    is_reference: Mapped[bool] = mapped_column(Boolean)
    text_sha256: Mapped[str] = mapped_column(String(64))
    text_source: Mapped[str] = mapped_column(Text)
    ctx: Mapped[int] = mapped_column(Integer)
    n_chunks: Mapped[int] = mapped_column(Integer)
    n_tokens: Mapped[int] = mapped_column(Integer)
    kld_mean: Mapped[float] = mapped_column(Double)
    kld_se: Mapped[float | None] = mapped_column(Double)
    kld_median: Mapped[float] = mapped_column(Double)
    kld_p90: Mapped[float] = mapped_column(Double)
    kld_p95: Mapped[float] = mapped_column(Double)
    kld_p99: Mapped[float] = mapped_column(Double)
    kld_max: Mapped[float] = mapped_column(Double)
    same_top_pct: Mapped[float] = mapped_column(Double)
    dp_top_mean: Mapped[float] = mapped_column(Double)
    dp_top_p99: Mapped[float] = mapped_column(Double)
    ppl: Mapped[float] = mapped_column(Double)
    ppl_se: Mapped[float | None] = mapped_column(Double)
    ppl_ref: Mapped[float] = mapped_column(Double)
    ppl_ref_se: Mapped[float | None] = mapped_column(Double)
    delta_ppl: Mapped[float] = mapped_column(Double)
    delta_ppl_se: Mapped[float | None] = mapped_column(Double)
    ln_ppl_ratio: Mapped[float] = mapped_column(Double)
    ln_ppl_ratio_se: Mapped[float | None] = mapped_column(Double)
    cache_path: Mapped[str | None] = mapped_column(Text)
    cache_bytes: Mapped[int | None] = mapped_column(BigInteger)
    cache_reused: Mapped[bool | None] = mapped_column(Boolean)


class SoakWindow(Base):
    """One window of a soak run: a fixed interval of the shared monotonic clock (also a ``soak_window``
    phase with rep = idx), its decoded tokens and llama.cpp's decode and prefill speeds in it.

    The telemetry figures of the window (temperatures, clocks and their caps, power, energy, throttle flags,
    other cores' load) are filled in after the run's samples are stored; NULL where nothing measured them.
    """

    __tablename__ = "soak_window"
    __table_args__ = (UniqueConstraint("run_id", "idx", name="uq_soak_window_run_idx"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    uid: Mapped[str] = mapped_column(String(36), unique=True, index=True, default=random_uid)  # migration 18
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id"), index=True)
    idx: Mapped[int] = mapped_column(Integer)
    t_start_mono: Mapped[float] = mapped_column(Double)
    t_end_mono: Mapped[float] = mapped_column(Double)
    tokens: Mapped[int] = mapped_column(Integer)
    decode_s: Mapped[float] = mapped_column(Double)
    tg_tps: Mapped[float | None] = mapped_column(Double)
    pp_tps: Mapped[float | None] = mapped_column(Double)  # requests whose prefill ended in the window
    temp_max_c: Mapped[float | None] = mapped_column(Double)
    temps_json: Mapped[str | None] = mapped_column(Text)  # zone -> max °C in the window
    cpu_mhz: Mapped[float | None] = mapped_column(Double)
    cpu_cap_mhz: Mapped[float | None] = mapped_column(Double)
    gpu_mhz: Mapped[float | None] = mapped_column(Double)
    gpu_cap_mhz: Mapped[float | None] = mapped_column(Double)
    emc_mhz: Mapped[float | None] = mapped_column(Double)
    power_mw: Mapped[float | None] = mapped_column(Double)
    energy_j: Mapped[float | None] = mapped_column(Double)
    j_per_token: Mapped[float | None] = mapped_column(Double)
    throttle_json: Mapped[str | None] = mapped_column(Text)  # the throttle signals seen in the window
    other_cores: Mapped[float | None] = mapped_column(Double)  # the interference counters' load elsewhere


class SeriesMetric(Base):
    """A ``run_series`` metric (role and unit as declared, '' unknown): rows carry an id, not 4 strings."""

    __tablename__ = "series_metric"
    __table_args__ = (UniqueConstraint("source", "metric", "role", "unit", name="uq_series_metric"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    source: Mapped[str] = mapped_column(String(32))
    metric: Mapped[str] = mapped_column(String(96))
    role: Mapped[str] = mapped_column(String(32))
    unit: Mapped[str] = mapped_column(String(16))


class RunSeries(Base):
    """Per (run, metric, UTC second) the mean of its readings, for SQL (view ``series``; storage.series)."""

    __tablename__ = "run_series"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id"), index=True)  # rows are replaced per run
    metric_id: Mapped[int] = mapped_column(ForeignKey("series_metric.id"))
    t: Mapped[datetime]  # the second's start, naive UTC like every datetime column
    value: Mapped[float] = mapped_column(Double)
    n: Mapped[int] = mapped_column(Integer)  # readings averaged
