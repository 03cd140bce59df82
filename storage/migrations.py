"""Schema migrations: an ordered list of frozen DDL steps and a ``schema_version`` table.

Each step is written once and never edited after it ships: a DB created by any earlier edgeprof is brought
to the head by applying the steps it lacks (set-based: a DB may lack a version between two it has), in version
order, each in ONE transaction on every backend, so a kill or a power loss mid-migration leaves the previous
version intact. (Alembic would do the same job; our own keeps the dependency list to what a Jetson image
already needs, and lets several people append steps at once.)

The DDL is written once, in the SQLite dialect the first versions shipped with, plus portable SQL (INTEGER,
BIGINT, DOUBLE PRECISION, TEXT, VARCHAR(n), BOOLEAN, TIMESTAMP). ``render`` turns it into what each backend
needs, so the same frozen step builds the same schema on SQLite and PostgreSQL; on SQLite it changes nothing
a shipped version wrote (an existing DB file looks exactly as it did).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.pool import NullPool

from edgeprof.storage.fleet_tables import create_fleet_tables
from edgeprof.storage.guard import APPLICATION_ID, edgeprof_history
from edgeprof.storage.identity import content_uid
from edgeprof.storage.settings import SQLITE_BUSY_TIMEOUT_MS


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: Sequence[str]
    # A data step run after the DDL, in the same transaction (e.g. backfilling a new identity column).
    python: Callable[[Connection], None] | None = field(default=None, compare=False)


_V1_CORE = (
    """
CREATE TABLE build (
    id INTEGER NOT NULL,
    fingerprint VARCHAR(64) NOT NULL,
    llama_cpp_python_version VARCHAR(32) NOT NULL,
    backend VARCHAR(32) NOT NULL,
    gpu_offload BOOLEAN NOT NULL,
    system_info TEXT NOT NULL,
    build_flags TEXT,
    first_seen DATETIME NOT NULL,
    PRIMARY KEY (id),
    UNIQUE (fingerprint)
)
    """,
    """
CREATE TABLE device (
    id INTEGER NOT NULL,
    fingerprint VARCHAR(64) NOT NULL,
    hostname VARCHAR(255) NOT NULL,
    machine_id VARCHAR(64),
    arch VARCHAR(32) NOT NULL,
    cpu_model VARCHAR(255),
    cpu_count INTEGER,
    ram_total_mb FLOAT,
    board_model VARCHAR(255),
    l4t_release VARCHAR(64),
    gpu VARCHAR(255),
    kernel VARCHAR(255),
    os_release VARCHAR(255),
    facts_json TEXT NOT NULL,
    first_seen DATETIME NOT NULL,
    PRIMARY KEY (id),
    UNIQUE (fingerprint)
)
    """,
    """
CREATE TABLE model_file (
    id INTEGER NOT NULL,
    path TEXT NOT NULL,
    sha256 VARCHAR(64) NOT NULL,
    size_bytes INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    arch VARCHAR(64),
    name VARCHAR(255),
    n_params INTEGER,
    quant_type VARCHAR(32),
    file_type INTEGER,
    n_layers INTEGER,
    context_length INTEGER,
    vocab_size INTEGER,
    PRIMARY KEY (id),
    CONSTRAINT uq_model_file_path_sha UNIQUE (path, sha256)
)
    """,
    """
CREATE INDEX ix_model_file_sha256 ON model_file (sha256)
    """,
    """
CREATE TABLE sweep (
    id INTEGER NOT NULL,
    name VARCHAR(255) NOT NULL,
    plan_path TEXT,
    plan_text TEXT NOT NULL,
    plan_hash VARCHAR(64) NOT NULL,
    device_id INTEGER NOT NULL,
    edgeprof_version VARCHAR(32) NOT NULL,
    started_at DATETIME NOT NULL,
    ended_at DATETIME,
    status VARCHAR(16) NOT NULL,
    n_specs INTEGER NOT NULL,
    PRIMARY KEY (id),
    FOREIGN KEY(device_id) REFERENCES device (id)
)
    """,
    """
CREATE INDEX ix_sweep_plan_hash ON sweep (plan_hash)
    """,
    """
CREATE TABLE run (
    id INTEGER NOT NULL,
    sweep_id INTEGER NOT NULL,
    spec_id VARCHAR(64) NOT NULL,
    seq INTEGER NOT NULL,
    model_file_id INTEGER,
    build_id INTEGER,
    model_label VARCHAR(255) NOT NULL,
    model_group VARCHAR(255) NOT NULL,
    model_path TEXT NOT NULL,
    workload_name VARCHAR(255) NOT NULL,
    workload_hash VARCHAR(64) NOT NULL,
    workload_json TEXT NOT NULL,
    params_json TEXT NOT NULL,
    effective_json TEXT,
    repeat_json TEXT NOT NULL,
    n_ctx INTEGER NOT NULL,
    n_gpu_layers INTEGER NOT NULL,
    n_threads INTEGER NOT NULL,
    n_batch INTEGER NOT NULL,
    n_ubatch INTEGER NOT NULL,
    flash_attn VARCHAR(8) NOT NULL,
    type_k VARCHAR(16) NOT NULL,
    type_v VARCHAR(16) NOT NULL,
    use_mmap BOOLEAN NOT NULL,
    status VARCHAR(16) NOT NULL,
    reason TEXT,
    exit_code INTEGER,
    signal_name VARCHAR(16),
    started_at DATETIME NOT NULL,
    ended_at DATETIME,
    t_start_mono FLOAT,
    t_end_mono FLOAT,
    peak_rss_mb FLOAT,
    page_cache VARCHAR(16),
    log_tail TEXT,
    PRIMARY KEY (id),
    FOREIGN KEY(sweep_id) REFERENCES sweep (id),
    FOREIGN KEY(model_file_id) REFERENCES model_file (id),
    FOREIGN KEY(build_id) REFERENCES build (id)
)
    """,
    """
CREATE INDEX ix_run_status ON run (status)
    """,
    """
CREATE INDEX ix_run_sweep_spec ON run (sweep_id, spec_id)
    """,
    """
CREATE TABLE measurement (
    id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    kind VARCHAR(8) NOT NULL,
    rep INTEGER NOT NULL,
    load_ms FLOAT,
    cold_start_ms FLOAT,
    n_prompt INTEGER,
    prefill_ms FLOAT,
    pp_tps FLOAT,
    ttft_ms FLOAT,
    n_gen INTEGER,
    decode_ms FLOAT,
    tg_tps FLOAT,
    e2e_ms FLOAT,
    tpot_ms FLOAT,
    tokens_out INTEGER,
    output_tokens_json TEXT,
    output_hash VARCHAR(64),
    output_text TEXT,
    finish_reason VARCHAR(16),
    t_start_mono FLOAT,
    t_end_mono FLOAT,
    PRIMARY KEY (id),
    FOREIGN KEY(run_id) REFERENCES run (id)
)
    """,
    """
CREATE INDEX ix_measurement_run_id ON measurement (run_id)
    """,
)

_V2_TELEMETRY = (
    """
CREATE TABLE phase (
    id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    name VARCHAR(32) NOT NULL,
    kind VARCHAR(8),
    rep INTEGER,
    t_start_mono FLOAT NOT NULL,
    t_end_mono FLOAT NOT NULL,
    PRIMARY KEY (id),
    FOREIGN KEY(run_id) REFERENCES run (id)
)
    """,
    """
CREATE INDEX ix_phase_run_id ON phase (run_id)
    """,
    """
CREATE TABLE sample (
    id INTEGER NOT NULL,
    sweep_id INTEGER,
    run_id INTEGER,
    t_mono FLOAT NOT NULL,
    t_wall FLOAT NOT NULL,
    source VARCHAR(32) NOT NULL,
    metric VARCHAR(96) NOT NULL,
    value FLOAT,
    PRIMARY KEY (id),
    FOREIGN KEY(sweep_id) REFERENCES sweep (id),
    FOREIGN KEY(run_id) REFERENCES run (id)
)
    """,
    """
CREATE INDEX ix_sample_run_id ON sample (run_id)
    """,
    """
CREATE INDEX ix_sample_sweep_t ON sample (sweep_id, t_mono)
    """,
    """
CREATE TABLE verdict (
    id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    kind VARCHAR(32) NOT NULL,
    value VARCHAR(32) NOT NULL,
    evidence_json TEXT NOT NULL,
    PRIMARY KEY (id),
    FOREIGN KEY(run_id) REFERENCES run (id)
)
    """,
    """
CREATE INDEX ix_verdict_run_id ON verdict (run_id)
    """,
)

_V3_ANALYSIS = (
    "ALTER TABLE sweep ADD COLUMN sampler_json TEXT",
    "ALTER TABLE run ADD COLUMN start_temp_c FLOAT",
    "ALTER TABLE run ADD COLUMN cooldown_wait_s FLOAT",
    "ALTER TABLE run ADD COLUMN cooldown_reason VARCHAR(32)",
    "ALTER TABLE run ADD COLUMN idle_power_mw FLOAT",
    "ALTER TABLE run ADD COLUMN power_source VARCHAR(96)",
    "ALTER TABLE measurement ADD COLUMN prefill_energy_j FLOAT",
    "ALTER TABLE measurement ADD COLUMN decode_energy_j FLOAT",
    "ALTER TABLE measurement ADD COLUMN prefill_j_per_token FLOAT",
    "ALTER TABLE measurement ADD COLUMN decode_j_per_token FLOAT",
    "ALTER TABLE measurement ADD COLUMN prefill_j_per_token_net FLOAT",
    "ALTER TABLE measurement ADD COLUMN decode_j_per_token_net FLOAT",
    "ALTER TABLE measurement ADD COLUMN decode_power_mw FLOAT",
    "ALTER TABLE measurement ADD COLUMN temp_max_c FLOAT",
    """
    CREATE TABLE collector_status (
        id INTEGER NOT NULL,
        sweep_id INTEGER NOT NULL,
        name VARCHAR(32) NOT NULL,
        ok BOOLEAN NOT NULL,
        reason TEXT NOT NULL,
        metrics_json TEXT NOT NULL,
        disabled_reason TEXT,
        last_error TEXT,
        PRIMARY KEY (id),
        FOREIGN KEY(sweep_id) REFERENCES sweep (id)
    )
    """,
    "CREATE INDEX ix_collector_status_sweep_id ON collector_status (sweep_id)",
    """
    CREATE TABLE phase_stat (
        id INTEGER NOT NULL,
        run_id INTEGER NOT NULL,
        phase VARCHAR(32) NOT NULL,
        kind VARCHAR(8),
        rep INTEGER,
        metric VARCHAR(96) NOT NULL,
        stat VARCHAR(8) NOT NULL,
        value FLOAT,
        PRIMARY KEY (id),
        FOREIGN KEY(run_id) REFERENCES run (id)
    )
    """,
    "CREATE INDEX ix_phase_stat_run_id ON phase_stat (run_id)",
)

_V4_DEVICE_STATE = (
    "ALTER TABLE sweep ADD COLUMN device_state_json TEXT",
    "ALTER TABLE run ADD COLUMN device_state_json TEXT",
    "ALTER TABLE run ADD COLUMN device_state_changed BOOLEAN",
)

_V5_AGENT = (
    """
    CREATE TABLE agent_state (
        id INTEGER NOT NULL,
        pid INTEGER NOT NULL,
        hostname VARCHAR(255) NOT NULL,
        started_at DATETIME NOT NULL,
        heartbeat_at DATETIME NOT NULL,
        state VARCHAR(32) NOT NULL,
        message TEXT,
        sweep_id INTEGER,
        plan_path TEXT,
        stopped_at DATETIME,
        PRIMARY KEY (id)
    )
    """,
)

_V6_MEMORY_PEAKS = (
    "ALTER TABLE run ADD COLUMN peak_shared_mb FLOAT",
    "ALTER TABLE run ADD COLUMN peak_gpu_mem_mb FLOAT",
    "ALTER TABLE run ADD COLUMN peak_ram_used_mb FLOAT",
)

# A global identity on every table whose rows leave the device (push/export/import), so rows from
# many devices merge into one central DB without colliding. Local-only tables (agent_state, sweep_lease)
# have none. NOT NULL with '' as the ALTER's default (SQLite needs one), backfilled by the data step below,
# then unique. 64-bit on PostgreSQL comes from render().
_V7_UID_TABLES = (
    "device",
    "build",
    "model_file",
    "sweep",
    "run",
    "measurement",
    "phase",
    "sample",
    "verdict",
    "collector_status",
    "phase_stat",
)
_V7_GLOBAL_IDENTITY = tuple(
    f"ALTER TABLE {table} ADD COLUMN uid VARCHAR(36) NOT NULL DEFAULT ''" for table in _V7_UID_TABLES
)
_V7_INDEXES = (
    *(f"CREATE UNIQUE INDEX ix_{table}_uid ON {table} (uid)" for table in _V7_UID_TABLES),
    # What `sweeps`, `report --device` and `compare` filter by on a central DB with thousands of sweeps.
    "CREATE INDEX ix_sweep_device_id ON sweep (device_id)",
    "CREATE INDEX ix_sweep_started_at ON sweep (started_at)",
    "CREATE INDEX ix_device_hostname ON device (hostname)",
)


def _backfill_v7(conn: Connection) -> None:
    # Content identity where the row has one (the same device/build/model file gets the same uid on every
    # device's DB, so they merge into one row centrally); a random UUID for everything else.
    for table in _V7_UID_TABLES:
        if table == "device" or table == "build":
            rows = conn.execute(text(f"SELECT id, fingerprint FROM {table}")).all()
            params = [{"i": r[0], "u": content_uid(table, r[1])} for r in rows]
        elif table == "model_file":
            rows = conn.execute(text("SELECT id, path, sha256 FROM model_file")).all()
            params = [{"i": r[0], "u": content_uid("model_file", r[1], r[2])} for r in rows]
        else:
            ids = conn.execute(text(f"SELECT id FROM {table}")).scalars()
            params = [{"i": i, "u": str(uuid.uuid4())} for i in ids]
        if params:
            conn.execute(text(f"UPDATE {table} SET uid = :u WHERE id = :i"), params)
    for statement in _V7_INDEXES:
        conn.execute(text(render(statement, conn.dialect.name)))


# The sweep lease: one writer per sweep, so two processes never measure the same configs at once.
# Portable DDL (SQLite and PostgreSQL).
_V10_SWEEP_LEASE = (
    """
    CREATE TABLE sweep_lease (
        lease_key VARCHAR(255) NOT NULL,
        sweep_id INTEGER,
        token VARCHAR(36) NOT NULL,
        host VARCHAR(255) NOT NULL,
        pid INTEGER NOT NULL,
        proc_start VARCHAR(96),
        acquired_at TIMESTAMP NOT NULL,
        heartbeat_at TIMESTAMP NOT NULL,
        released_at TIMESTAMP,
        PRIMARY KEY (lease_key)
    )
    """,
    "CREATE INDEX ix_sweep_lease_sweep_id ON sweep_lease (sweep_id)",
)

# Telemetry as compressed blocks of ticks (storage/samples.py): a row per reading made a night ~1 GB.
# BLOB is SQLite's spelling; render() turns it into BYTEA on PostgreSQL.
_V11_SAMPLE_BLOCKS = (
    """
    CREATE TABLE sample_block (
        id INTEGER NOT NULL,
        sweep_id INTEGER,
        run_id INTEGER,
        source VARCHAR(32) NOT NULL,
        t_start_mono DOUBLE PRECISION NOT NULL,
        t_end_mono DOUBLE PRECISION NOT NULL,
        n_ticks INTEGER NOT NULL,
        n_values BIGINT NOT NULL,
        resolution_ms INTEGER,
        codec INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (id),
        FOREIGN KEY(sweep_id) REFERENCES sweep (id),
        FOREIGN KEY(run_id) REFERENCES run (id)
    )
    """,
    "CREATE INDEX ix_sample_block_run_id ON sample_block (run_id)",
    "CREATE INDEX ix_sample_block_sweep_t ON sample_block (sweep_id, t_start_mono)",
)


def _convert_v11(conn: Connection) -> None:
    # The data step: every legacy one-row-per-reading sample becomes part of a block (codec 1), in the
    # migration's transaction, so a kill leaves the old rows in place and the step is redone. Imported here,
    # not at the top: the codec needs numpy, which every reader (`status`, `--help` paths) would pay for.
    from edgeprof.storage.samples import convert_legacy

    convert_legacy(conn)


# The serving path (llama-server runner): runner per run and build, one level row per serving run,
# one row per request. Portable DDL (SQLite and PostgreSQL).
_V12_SERVING = (
    "ALTER TABLE run ADD COLUMN runner VARCHAR(32)",
    "ALTER TABLE run ADD COLUMN concurrency INTEGER",
    "ALTER TABLE run ADD COLUMN request_rate DOUBLE PRECISION",
    "ALTER TABLE build ADD COLUMN runtime VARCHAR(32)",
    "ALTER TABLE build ADD COLUMN runtime_version TEXT",
    """
    CREATE TABLE serving_level (
        id INTEGER NOT NULL,
        run_id INTEGER NOT NULL,
        concurrency INTEGER NOT NULL,
        request_rate DOUBLE PRECISION,
        server_pid INTEGER,
        server_command TEXT,
        ready_ms DOUBLE PRECISION,
        cold_start_ms DOUBLE PRECISION,
        n_slots INTEGER,
        slot_n_ctx INTEGER,
        n_requests INTEGER,
        n_ok INTEGER,
        n_errors INTEGER,
        n_timeouts INTEGER,
        n_rejected INTEGER,
        max_deferred DOUBLE PRECISION,
        duration_s DOUBLE PRECISION,
        request_throughput_rps DOUBLE PRECISION,
        output_tps DOUBLE PRECISION,
        total_tps DOUBLE PRECISION,
        goodput_rps DOUBLE PRECISION,
        ttft_p50_ms DOUBLE PRECISION,
        ttft_p99_ms DOUBLE PRECISION,
        tpot_p50_ms DOUBLE PRECISION,
        tpot_p99_ms DOUBLE PRECISION,
        itl_p50_ms DOUBLE PRECISION,
        itl_p99_ms DOUBLE PRECISION,
        e2el_p50_ms DOUBLE PRECISION,
        e2el_p99_ms DOUBLE PRECISION,
        output_j_per_token DOUBLE PRECISION,
        stats_json TEXT,
        kv_budget_json TEXT,
        metrics_before_json TEXT,
        metrics_after_json TEXT,
        props_json TEXT,
        t_start_mono DOUBLE PRECISION,
        t_end_mono DOUBLE PRECISION,
        PRIMARY KEY (id),
        FOREIGN KEY(run_id) REFERENCES run (id)
    )
    """,
    "CREATE INDEX ix_serving_level_run_id ON serving_level (run_id)",
    """
    CREATE TABLE serving_request (
        id INTEGER NOT NULL,
        run_id INTEGER NOT NULL,
        kind VARCHAR(8) NOT NULL,
        idx INTEGER NOT NULL,
        client INTEGER NOT NULL,
        status VARCHAR(16) NOT NULL,
        error TEXT,
        http_status INTEGER,
        t_send_mono DOUBLE PRECISION NOT NULL,
        t_first_mono DOUBLE PRECISION,
        t_end_mono DOUBLE PRECISION,
        ttft_ms DOUBLE PRECISION,
        tpot_ms DOUBLE PRECISION,
        e2el_ms DOUBLE PRECISION,
        itl_json TEXT,
        n_chunks INTEGER,
        output_tokens INTEGER,
        prompt_tokens INTEGER,
        server_prompt_ms DOUBLE PRECISION,
        server_predicted_ms DOUBLE PRECISION,
        server_cache_n INTEGER,
        finish_reason VARCHAR(16),
        client_overhead_ms DOUBLE PRECISION,
        PRIMARY KEY (id),
        FOREIGN KEY(run_id) REFERENCES run (id)
    )
    """,
    "CREATE INDEX ix_serving_request_run_id ON serving_request (run_id)",
)

# Will it fit, and the bandwidth limit: memory predicted before a config runs (and what the device had),
# the bytes a decode step reads, achieved bandwidth per decode rep, and the sweep's bandwidth probe /
# datasheet figure.
# Which metrics a run's energy came from (agent/telemetry/energy.py precedence), whether they cover
# the whole board, and the full list where it outgrows run.power_source.
_V13_ENERGY_SOURCE = (
    "ALTER TABLE run ADD COLUMN energy_basis VARCHAR(32)",
    "ALTER TABLE run ADD COLUMN energy_whole_board BOOLEAN",
    "ALTER TABLE run ADD COLUMN energy_sources TEXT",
)

_V14_MEMORY_BANDWIDTH = (
    "ALTER TABLE run ADD COLUMN mem_predicted_mb DOUBLE PRECISION",
    "ALTER TABLE run ADD COLUMN mem_available_mb DOUBLE PRECISION",
    "ALTER TABLE run ADD COLUMN mem_prediction_json TEXT",
    "ALTER TABLE run ADD COLUMN weights_read_bytes_per_token BIGINT",
    "ALTER TABLE run ADD COLUMN kv_read_bytes_per_position DOUBLE PRECISION",
    "ALTER TABLE measurement ADD COLUMN bw_gbps DOUBLE PRECISION",
    "ALTER TABLE sweep ADD COLUMN bw_probe_gbps DOUBLE PRECISION",
    "ALTER TABLE sweep ADD COLUMN bw_probe_json TEXT",
    "ALTER TABLE sweep ADD COLUMN bw_datasheet_gbps DOUBLE PRECISION",
    "ALTER TABLE sweep ADD COLUMN bw_datasheet_source TEXT",
)

# The model's weights without the file's metadata: bits per weight from the tensor sizes, so a large
# vocabulary or metadata block cannot reorder two variants (NULL for files recorded before: read as the file
# size).
_V15_TENSOR_BYTES = ("ALTER TABLE model_file ADD COLUMN tensor_bytes BIGINT",)

# The device's state as each block of a run's steady reps started, and how its group's decision ended
_V21_REP_STATE_DECISION = (
    "ALTER TABLE run ADD COLUMN block_states_json TEXT",
    "ALTER TABLE run ADD COLUMN decision_json TEXT",
)

_V8_QUALITY = (
    """
    CREATE TABLE quality_result (
        id INTEGER NOT NULL,
        run_id INTEGER NOT NULL,
        reference_label VARCHAR(255) NOT NULL,
        reference_sha256 VARCHAR(64) NOT NULL,
        is_reference BOOLEAN NOT NULL,
        text_sha256 VARCHAR(64) NOT NULL,
        text_source TEXT NOT NULL,
        ctx INTEGER NOT NULL,
        n_chunks INTEGER NOT NULL,
        n_tokens INTEGER NOT NULL,
        kld_mean DOUBLE PRECISION NOT NULL,
        kld_se DOUBLE PRECISION,
        kld_median DOUBLE PRECISION NOT NULL,
        kld_p90 DOUBLE PRECISION NOT NULL,
        kld_p95 DOUBLE PRECISION NOT NULL,
        kld_p99 DOUBLE PRECISION NOT NULL,
        kld_max DOUBLE PRECISION NOT NULL,
        same_top_pct DOUBLE PRECISION NOT NULL,
        dp_top_mean DOUBLE PRECISION NOT NULL,
        dp_top_p99 DOUBLE PRECISION NOT NULL,
        ppl DOUBLE PRECISION NOT NULL,
        ppl_se DOUBLE PRECISION,
        ppl_ref DOUBLE PRECISION NOT NULL,
        ppl_ref_se DOUBLE PRECISION,
        delta_ppl DOUBLE PRECISION NOT NULL,
        delta_ppl_se DOUBLE PRECISION,
        ln_ppl_ratio DOUBLE PRECISION NOT NULL,
        ln_ppl_ratio_se DOUBLE PRECISION,
        cache_path TEXT,
        cache_bytes BIGINT,
        cache_reused BOOLEAN,
        PRIMARY KEY (id),
        FOREIGN KEY(run_id) REFERENCES run (id)
    )
    """,
    "CREATE INDEX ix_quality_result_run_id ON quality_result (run_id)",
)

# Workloads as users run them: llama.cpp parity knobs and context depth per run; per request the
# first EOS, the depth and its fill, KV occupancy, and the prompt as tokenized (hash, size, specials parsed).
_V9_WORKLOADS = (
    "ALTER TABLE run ADD COLUMN depth INTEGER",
    "ALTER TABLE run ADD COLUMN swa_full BOOLEAN",
    "ALTER TABLE run ADD COLUMN kv_unified BOOLEAN",
    "ALTER TABLE run ADD COLUMN offload_kqv BOOLEAN",
    "ALTER TABLE run ADD COLUMN op_offload BOOLEAN",
    "ALTER TABLE run ADD COLUMN poll INTEGER",
    "ALTER TABLE run ADD COLUMN n_seq_max INTEGER",
    "ALTER TABLE run ADD COLUMN ignore_eos BOOLEAN",
    "ALTER TABLE run ADD COLUMN kv_cache_mib DOUBLE PRECISION",
    "ALTER TABLE measurement ADD COLUMN first_eos_index INTEGER",
    "ALTER TABLE measurement ADD COLUMN depth INTEGER",
    "ALTER TABLE measurement ADD COLUMN depth_fill_ms DOUBLE PRECISION",
    "ALTER TABLE measurement ADD COLUMN kv_used_cells INTEGER",
    "ALTER TABLE measurement ADD COLUMN prompt_sha256 VARCHAR(64)",
    "ALTER TABLE measurement ADD COLUMN prompt_n_tokens INTEGER",
    "ALTER TABLE measurement ADD COLUMN parse_special BOOLEAN",
)

# Sustained load: one row per window of a soak run (speeds from llama.cpp's counters; the telemetry columns
# are filled after the run's samples are stored).
_V16_SOAK_WINDOWS = (
    """
    CREATE TABLE soak_window (
        id INTEGER NOT NULL,
        run_id INTEGER NOT NULL,
        idx INTEGER NOT NULL,
        t_start_mono DOUBLE PRECISION NOT NULL,
        t_end_mono DOUBLE PRECISION NOT NULL,
        tokens INTEGER NOT NULL,
        decode_s DOUBLE PRECISION NOT NULL,
        tg_tps DOUBLE PRECISION,
        pp_tps DOUBLE PRECISION,
        temp_max_c DOUBLE PRECISION,
        temps_json TEXT,
        cpu_mhz DOUBLE PRECISION,
        cpu_cap_mhz DOUBLE PRECISION,
        gpu_mhz DOUBLE PRECISION,
        gpu_cap_mhz DOUBLE PRECISION,
        emc_mhz DOUBLE PRECISION,
        power_mw DOUBLE PRECISION,
        energy_j DOUBLE PRECISION,
        j_per_token DOUBLE PRECISION,
        throttle_json TEXT,
        other_cores DOUBLE PRECISION,
        PRIMARY KEY (id),
        CONSTRAINT uq_soak_window_run_idx UNIQUE (run_id, idx),
        FOREIGN KEY(run_id) REFERENCES run (id)
    )
    """,
    "CREATE INDEX ix_soak_window_run_id ON soak_window (run_id)",
)

# A fleet DB that SQL and Grafana can chart. The soak windows get a global identity like the tables of
# migration 7 (pushed with their run and matched by uid, since their telemetry figures are filled in after the
# row is written); ``run_series`` holds each run's telemetry as one row per (metric, UTC second), derived
# from the compressed blocks in the central DB (storage/series.py), its metrics named once in
# ``series_metric``; three views (``series``, ``run_context``, ``run_verdict``) give a dashboard the rows
# with their names, every run its context and its verdicts, so no dashboard repeats the joins. The latest
# verdict of a kind wins (a re-analysed run may have been pushed twice).
_V18_VERDICT = (
    "(SELECT v.value FROM verdict v WHERE v.run_id = r.id AND v.kind = '{kind}' ORDER BY v.id DESC LIMIT 1)"
)
_V18_STEADY = "(SELECT {agg}(m.{col}) FROM measurement m WHERE m.run_id = r.id AND m.kind = 'steady')"
_V18_FLEET_SERIES = (
    "ALTER TABLE soak_window ADD COLUMN uid VARCHAR(36) NOT NULL DEFAULT ''",
    """
    CREATE TABLE series_metric (
        id INTEGER NOT NULL,
        source VARCHAR(32) NOT NULL,
        metric VARCHAR(96) NOT NULL,
        role VARCHAR(32) NOT NULL,
        unit VARCHAR(16) NOT NULL,
        PRIMARY KEY (id),
        CONSTRAINT uq_series_metric UNIQUE (source, metric, role, unit)
    )
    """,
    """
    CREATE TABLE run_series (
        id INTEGER NOT NULL,
        run_id INTEGER NOT NULL,
        metric_id INTEGER NOT NULL,
        t DATETIME NOT NULL,
        value DOUBLE PRECISION NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (id),
        FOREIGN KEY(run_id) REFERENCES run (id),
        FOREIGN KEY(metric_id) REFERENCES series_metric (id)
    )
    """,
    # By run only: a unique key over (run, metric, t) would double the index; a run's rows are only ever
    # replaced whole, so the fill keeps them unique.
    "CREATE INDEX ix_run_series_run_id ON run_series (run_id)",
    """
    CREATE VIEW series AS
    SELECT s.run_id, r.uid AS run_uid, m.source, m.metric, NULLIF(m.role, '') AS role,
        NULLIF(m.unit, '') AS unit, s.t, s.value, s.n
    FROM run_series s
    JOIN series_metric m ON m.id = s.metric_id
    JOIN run r ON r.id = s.run_id
    """,
    f"""
    CREATE VIEW run_context AS
    SELECT
        r.id AS run_id, r.uid AS run_uid, r.spec_id, r.status, r.reason,
        s.id AS sweep_id, s.uid AS sweep_uid, s.name AS sweep_name,
        d.hostname AS device, d.board_model, d.uid AS device_uid,
        r.model_label AS model, mf.name AS model_name, mf.quant_type AS quant, mf.n_params,
        r.n_ctx AS ctx, r.n_gpu_layers AS ngl, r.n_threads AS threads, r.n_batch, r.n_ubatch,
        r.flash_attn, r.type_k, r.type_v, r.depth, r.workload_name AS workload,
        COALESCE(r.runner, 'llama-cpp') AS runner, r.concurrency, r.request_rate,
        COALESCE(b.runtime, 'llama-cpp-python') AS runtime,
        COALESCE(b.runtime_version, b.llama_cpp_python_version) AS build_version,
        b.backend AS build_backend, b.uid AS build_uid,
        r.started_at, r.ended_at,
        {_V18_STEADY.format(agg="AVG", col="tg_tps")} AS tg_tps,
        {_V18_STEADY.format(agg="AVG", col="pp_tps")} AS pp_tps,
        {_V18_STEADY.format(agg="AVG", col="ttft_ms")} AS ttft_ms,
        {_V18_STEADY.format(agg="AVG", col="decode_j_per_token")} AS decode_j_per_token,
        {_V18_STEADY.format(agg="MAX", col="temp_max_c")} AS temp_max_c,
        {_V18_VERDICT.format(kind="throttle")} AS throttle,
        {_V18_VERDICT.format(kind="stability")} AS stability,
        {_V18_VERDICT.format(kind="interference")} AS interference,
        {_V18_VERDICT.format(kind="soak")} AS soak
    FROM run r
    JOIN sweep s ON s.id = r.sweep_id
    JOIN device d ON d.id = s.device_id
    LEFT JOIN model_file mf ON mf.id = r.model_file_id
    LEFT JOIN build b ON b.id = r.build_id
    """,
    """
    CREATE VIEW run_verdict AS
    SELECT c.*, v.kind AS verdict_kind, v.value AS verdict, v.evidence_json
    FROM verdict v
    JOIN run_context c ON c.run_id = v.run_id
    """,
)


def _backfill_v18(conn: Connection) -> None:
    # As migration 7 did for the other pushed tables, then unique. Windows written before get the content
    # identity of (their run's uid, index): a window that an older edgeprof already pushed (matched by content
    # then) gets the same uid in the device's DB and in the central one, so later pushes still meet it there.
    rows = conn.execute(
        text("SELECT w.id, r.uid, w.idx FROM soak_window w JOIN run r ON r.id = w.run_id")
    ).all()
    params = [{"i": i, "u": content_uid("soak_window", run_uid, idx)} for i, run_uid, idx in rows]
    if params:
        conn.execute(text("UPDATE soak_window SET uid = :u WHERE id = :i"), params)
    conn.execute(text("CREATE UNIQUE INDEX ix_soak_window_uid ON soak_window (uid)"))


# Branch i43verdicts: an imported log's verdict, judged once at import and stored with the version of the
# judgement that made it (agent/verdicts/log_store.py), so reading a sweep never judges its log again.
_V19_LOG_VERDICT = (
    """
    CREATE TABLE log_verdict (
        id INTEGER NOT NULL,
        sweep_id INTEGER NOT NULL,
        rule_version INTEGER NOT NULL,
        interval_ms DOUBLE PRECISION,
        judged_at DATETIME NOT NULL,
        result_json TEXT NOT NULL,
        PRIMARY KEY (id),
        UNIQUE (sweep_id),
        FOREIGN KEY(sweep_id) REFERENCES sweep (id)
    )
    """,
)


# Task accuracy per run (HellaSwag, Winogrande, multiple choice) and each scored task, for the pairing
# with the reference.
_V22_TASKS = (
    """
    CREATE TABLE task_result (
        id INTEGER NOT NULL,
        run_id INTEGER NOT NULL,
        task VARCHAR(32) NOT NULL,
        file_path TEXT NOT NULL,
        file_sha256 VARCHAR(64) NOT NULL,
        seed INTEGER NOT NULL,
        tasks_asked INTEGER,
        n_available INTEGER NOT NULL,
        ctx INTEGER NOT NULL,
        reference_label VARCHAR(255) NOT NULL,
        reference_sha256 VARCHAR(64) NOT NULL,
        is_reference BOOLEAN NOT NULL,
        n_tasks INTEGER NOT NULL,
        n_correct INTEGER NOT NULL,
        accuracy_pct DOUBLE PRECISION NOT NULL,
        accuracy_low_pct DOUBLE PRECISION NOT NULL,
        accuracy_high_pct DOUBLE PRECISION NOT NULL,
        chance_pct DOUBLE PRECISION NOT NULL,
        n_resumed INTEGER NOT NULL,
        n_tokens INTEGER,
        min_margin DOUBLE PRECISION,
        energy_j DOUBLE PRECISION,
        n_correct_measured INTEGER,
        correct_per_kj DOUBLE PRECISION,
        PRIMARY KEY (id),
        FOREIGN KEY(run_id) REFERENCES run (id)
    )
    """,
    "CREATE INDEX ix_task_result_run_id ON task_result (run_id)",
    """
    CREATE TABLE task_item (
        id INTEGER NOT NULL,
        run_id INTEGER NOT NULL,
        position INTEGER NOT NULL,
        task_index INTEGER NOT NULL,
        pred INTEGER NOT NULL,
        correct BOOLEAN NOT NULL,
        margin DOUBLE PRECISION,
        scores_json TEXT,
        PRIMARY KEY (id),
        FOREIGN KEY(run_id) REFERENCES run (id)
    )
    """,
    "CREATE INDEX ix_task_item_run_id ON task_item (run_id)",
)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "core: device, build, model_file, sweep, run, measurement", _V1_CORE),
    Migration(2, "telemetry: phase intervals, samples, verdicts", _V2_TELEMETRY),
    Migration(3, "analysis: collector status, phase aggregates, energy, cooldown", _V3_ANALYSIS),
    Migration(4, "Jetson state (power mode, jetson_clocks, fan) per sweep and per run", _V4_DEVICE_STATE),
    Migration(5, "agent heartbeat and state", _V5_AGENT),
    Migration(6, "memory peaks per run: Jetson shared (NvMap), dGPU, system RAM", _V6_MEMORY_PEAKS),
    Migration(
        7, "global identity (uid) on every pushed table; fleet indexes", _V7_GLOBAL_IDENTITY, _backfill_v7
    ),
    Migration(8, "quality: KL divergence and perplexity per run vs the reference", _V8_QUALITY),
    Migration(9, "workloads: parity knobs, depth, first EOS, KV occupancy, prompt", _V9_WORKLOADS),
    Migration(10, "sweep lease: one writer per sweep (owner, heartbeat)", _V10_SWEEP_LEASE),
    Migration(
        11, "compact telemetry: sample blocks, old sample rows re-encoded", _V11_SAMPLE_BLOCKS, _convert_v11
    ),
    Migration(12, "serving path: runner per run and build, serving levels and requests", _V12_SERVING),
    Migration(13, "energy source per run: basis, whole-board coverage, metrics summed", _V13_ENERGY_SOURCE),
    Migration(14, "memory prediction, bytes per token, bandwidth, bandwidth probe", _V14_MEMORY_BANDWIDTH),
    Migration(15, "model file: tensor data bytes (bits per weight from the tensors)", _V15_TENSOR_BYTES),
    Migration(16, "soak windows: tokens and speeds per window of a sustained-load run", _V16_SOAK_WINDOWS),
    Migration(
        18,
        "fleet dashboards: per-second run series, run context and verdict views, soak window uid",
        _V18_FLEET_SERIES,
        _backfill_v18,
    ),
    Migration(19, "imported logs: their verdict stored with the judgement's version", _V19_LOG_VERDICT),
    # the fleet's job queue, central PostgreSQL only (storage/fleet_tables.py)
    Migration(
        20, "fleet job queue: boards, jobs, matches, health (PostgreSQL only)", (), create_fleet_tables
    ),
    Migration(
        21, "device state per block of steady reps; the group's sequential decision", _V21_REP_STATE_DECISION
    ),
    Migration(22, "task accuracy: per-run result and per-task items", _V22_TASKS),
)

HEAD_VERSION = max(m.version for m in MIGRATIONS)
_BY_VERSION = {m.version: m for m in MIGRATIONS}
if len(_BY_VERSION) != len(MIGRATIONS):
    raise RuntimeError("two migrations share a version number")

# Any constant: every edgeprof that migrates a PostgreSQL DB takes this transaction-scoped lock first, so two
# devices starting at once against a fresh central DB apply each step exactly once.
_PG_MIGRATION_LOCK = 727_013

UPGRADE_HINT = "run `edgeprof db upgrade`"


class SchemaTooNewError(RuntimeError):
    pass


class SchemaOutdatedError(RuntimeError):
    """The DB lacks steps this edgeprof needs; read-only commands refuse it rather than migrate it."""


# --- per-backend rendering of the frozen DDL -------------------------------------------------------------

# The primary-key column of a CREATE TABLE: on SQLite it must be spelled INTEGER (a rowid alias, which is
# what numbers new rows); on PostgreSQL it needs an identity to number them, 64-bit (samples exceed 2^31).
_PK_ID = re.compile(r"(?m)^(\s*)id\s+(?:INTEGER|BIGINT)\b")


def render(statement: str, dialect: str) -> str:
    """The frozen ``statement`` as the ``dialect`` ("sqlite", "postgresql") must see it."""
    keyed_by_id = statement.lstrip().upper().startswith("CREATE TABLE") and bool(
        re.search(r"(?m)PRIMARY KEY\s*\(\s*id\s*\)|^\s*id\s+(?:INTEGER|BIGINT)\b[^,]*PRIMARY KEY", statement)
    )
    if dialect == "sqlite":
        return _PK_ID.sub(r"\1id INTEGER", statement) if keyed_by_id else statement
    if dialect != "postgresql":
        return statement
    if keyed_by_id:
        statement = _PK_ID.sub(r"\1id BIGINT GENERATED BY DEFAULT AS IDENTITY", statement)
    # SQLite's INTEGER is 64-bit; PostgreSQL's is not (model_file.mtime_ns, size_bytes overflow it).
    statement = re.sub(r"\bINTEGER\b", "BIGINT", statement)
    statement = re.sub(r"\bDATETIME\b", "TIMESTAMP", statement)
    # SQLite's FLOAT is an 8-byte REAL: say so explicitly on PostgreSQL.
    statement = re.sub(r"\bFLOAT\b", "DOUBLE PRECISION", statement)
    # SQLite ignores VARCHAR lengths; enforcing them only on PostgreSQL would make a value that SQLite keeps
    # (a long hostname, a model label) fail a whole sweep there. Same behaviour on both: unbounded text.
    statement = re.sub(r"\bVARCHAR\s*\(\s*\d+\s*\)", "TEXT", statement)
    statement = re.sub(r"\bBLOB\b", "BYTEA", statement)
    statement = re.sub(r"(?i)datetime\('now'\)", "CURRENT_TIMESTAMP", statement)
    statement = re.sub(r"(?i)(BOOLEAN(?:\s+NOT NULL)?\s+DEFAULT\s+)0\b", r"\1FALSE", statement)
    statement = re.sub(r"(?i)(BOOLEAN(?:\s+NOT NULL)?\s+DEFAULT\s+)1\b", r"\1TRUE", statement)
    return statement


# --- reading the version ----------------------------------------------------------------------------------


def _has_version_table(conn: Connection) -> bool:
    from sqlalchemy import inspect

    return bool(inspect(conn).has_table("schema_version"))


def applied_versions(conn: Connection) -> set[int]:
    """The versions recorded in the DB (empty for a DB without a ``schema_version`` table); never writes."""
    if not _has_version_table(conn):
        return set()
    return {int(v) for (v,) in conn.execute(text("SELECT version FROM schema_version"))}


def current_version(conn: Connection) -> int:
    """The highest version applied (0 for an empty DB); never writes."""
    versions = applied_versions(conn)
    return max(versions) if versions else 0


def _refuse_unknown(versions: set[int]) -> None:
    unknown = sorted(v for v in versions if v not in _BY_VERSION)
    if unknown:
        raise SchemaTooNewError(
            f"database schema has version(s) {', '.join(map(str, unknown))} that this edgeprof does not know "
            f"(a newer edgeprof wrote it; this one knows up to {HEAD_VERSION}): upgrade edgeprof"
        )


def missing_versions(conn: Connection) -> list[int]:
    """Versions of this edgeprof that the DB lacks, in order; raises if the DB has versions we do not know."""
    versions = applied_versions(conn)
    _refuse_unknown(versions)
    return sorted(v for v in _BY_VERSION if v not in versions)


def check_current(conn: Connection) -> None:
    """For read-only commands: raise unless the DB has every step of this edgeprof (and nothing newer)."""
    refuse_foreign(conn)
    versions = applied_versions(conn)
    _refuse_unknown(versions)
    missing = sorted(v for v in _BY_VERSION if v not in versions)
    if not versions:
        from sqlalchemy import inspect

        if inspect(conn).get_table_names():
            raise SchemaOutdatedError("not an edgeprof database (it has tables but no schema_version)")
        raise SchemaOutdatedError(f"database has no edgeprof schema yet; {UPGRADE_HINT}")
    if missing:
        raise SchemaOutdatedError(
            f"database schema is at version {max(versions)}, lacking {', '.join(map(str, missing))} of "
            f"this edgeprof's {HEAD_VERSION}; {UPGRADE_HINT}"
        )


# --- applying ---------------------------------------------------------------------------------------------


def _sqlite_migration_engine(engine: Engine) -> Engine:
    """An engine whose transactions are real SQLite transactions, DDL included.

    Python's sqlite3 driver commits on its own before DDL and begins only before DML, so ``engine.begin()``
    alone does not make a migration atomic (a kill between two ALTERs left a half-migrated DB). This is
    SQLAlchemy's documented pysqlite recipe: the driver's transaction handling off (isolation_level=None) and
    our own BEGIN; IMMEDIATE takes the write lock at once, so two upgraders queue instead of deadlocking.
    """
    migrator = create_engine(
        engine.url, poolclass=NullPool, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
    )

    def on_connect(dbapi_connection: object, _record: object) -> None:
        dbapi_connection.isolation_level = None  # type: ignore[attr-defined]
        cursor = dbapi_connection.cursor()  # type: ignore[attr-defined]
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.close()

    def on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    event.listen(migrator, "connect", on_connect)
    event.listen(migrator, "begin", on_begin)
    return migrator


def _lock(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK})


def _ensure_version_table(conn: Connection) -> None:
    conn.execute(
        text(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            "version INTEGER NOT NULL, description TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
    )


# PostgreSQL has no application_id: edgeprof's database is known there by this table's row.
META_TABLE = "edgeprof_meta"


class ForeignDatabaseError(SchemaOutdatedError):
    """A database server's database that is not edgeprof's; nothing was changed in it."""


def refuse_foreign(conn: Connection) -> None:
    """On a server database: ForeignDatabaseError unless it is empty, holds edgeprof's ``edgeprof_meta``
    row, or (written before the row existed) edgeprof's own schema history. Reads only. SQLite files are
    checked before any connection is made (storage/guard.py)."""
    if conn.dialect.name == "sqlite":
        return
    from sqlalchemy import inspect

    tables = set(inspect(conn).get_table_names())
    if not tables:
        return
    if META_TABLE in tables:
        row = conn.execute(text(f"SELECT value FROM {META_TABLE} WHERE key = 'application'")).scalar()
        if row == "edgeprof":
            return
    elif "schema_version" in tables:
        rows = [(r[0], r[1]) for r in conn.execute(text("SELECT version, description FROM schema_version"))]
        if edgeprof_history(rows, tables):
            return
    shown = ", ".join(sorted(tables)[:5]) + (", …" if len(tables) > 5 else "")
    raise ForeignDatabaseError(
        f"a database but not an edgeprof one (tables: {shown}); nothing was changed (give another --db)"
    )


def _mark(conn: Connection) -> None:
    """edgeprof's mark, in the first transaction of every upgrade: a new database gets it with its first
    table, an edgeprof database written before the mark existed gets it now. SQLite: the header's
    application_id; PostgreSQL: the ``edgeprof_meta`` row."""
    if conn.dialect.name != "sqlite":
        create = f"CREATE TABLE IF NOT EXISTS {META_TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        conn.execute(text(create))
        conn.execute(
            text(
                f"INSERT INTO {META_TABLE} (key, value) VALUES ('application', 'edgeprof') "
                "ON CONFLICT (key) DO NOTHING"
            )
        )
        return
    if conn.exec_driver_sql("PRAGMA application_id").scalar() != APPLICATION_ID:
        conn.exec_driver_sql(f"PRAGMA application_id = {APPLICATION_ID}")


def apply_migration(conn: Connection, migration: Migration) -> None:
    """Run one step's DDL, data step and version row on ``conn`` (the caller owns the transaction)."""
    for statement in migration.statements:
        conn.execute(text(render(statement, conn.dialect.name)))
    if migration.python is not None:
        migration.python(conn)
    conn.execute(
        text("INSERT INTO schema_version (version, description, applied_at) VALUES (:v, :d, :t)"),
        {
            "v": migration.version,
            "d": migration.description,
            "t": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        },
    )


def upgrade(engine: Engine, target: int | None = None) -> list[int]:
    """Apply the missing migrations up to ``target`` (default: all), each in one transaction.

    Returns the versions applied. Safe against concurrent upgraders: each step re-reads the applied set
    under a lock (SQLite's write lock, PostgreSQL's advisory lock) before running.
    """
    target = HEAD_VERSION if target is None else target
    is_sqlite = engine.dialect.name == "sqlite"
    migrator = _sqlite_migration_engine(engine) if is_sqlite else engine
    applied: list[int] = []
    try:
        with migrator.begin() as conn:
            _lock(conn)
            refuse_foreign(conn)
            _ensure_version_table(conn)
            _mark(conn)
            todo = [v for v in missing_versions(conn) if v <= target]
        for version in todo:
            with migrator.begin() as conn:
                _lock(conn)
                if version in applied_versions(conn):
                    continue  # another process applied it while we waited for the lock
                apply_migration(conn, _BY_VERSION[version])
            applied.append(version)
    finally:
        if migrator is not engine:
            migrator.dispose()
    return applied
