"""Schema migrations: an ordered list of frozen DDL steps and a ``schema_version`` table.

Each step is written once and never edited after it ships: a DB created by any earlier edgeprof is brought
to the head by applying the steps it lacks, in order, each in its own transaction. (Alembic would do the same
job; a dozen lines of our own keep the dependency list to what a Jetson image already needs.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, text


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: Sequence[str]


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

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "core: device, build, model_file, sweep, run, measurement", _V1_CORE),
    Migration(2, "telemetry: phase intervals, samples, verdicts", _V2_TELEMETRY),
    Migration(3, "analysis: collector status, phase aggregates, energy, cooldown", _V3_ANALYSIS),
    Migration(4, "Jetson state (power mode, jetson_clocks, fan) per sweep and per run", _V4_DEVICE_STATE),
    Migration(5, "agent heartbeat and state", _V5_AGENT),
    Migration(6, "memory peaks per run: Jetson shared (NvMap), dGPU, system RAM", _V6_MEMORY_PEAKS),
)

HEAD_VERSION = MIGRATIONS[-1].version


class SchemaTooNewError(RuntimeError):
    pass


def _ensure_version_table(conn: Connection) -> None:
    conn.execute(
        text(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            "version INTEGER NOT NULL, description TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
    )


def current_version(conn: Connection) -> int:
    _ensure_version_table(conn)
    value = conn.execute(text("SELECT MAX(version) FROM schema_version")).scalar()
    return int(value) if value is not None else 0


def upgrade(engine: Engine, target: int | None = None) -> list[int]:
    """Apply the missing migrations up to ``target`` (default: head); returns the versions applied."""
    target = HEAD_VERSION if target is None else target
    applied: list[int] = []
    with engine.begin() as conn:
        version = current_version(conn)
    if version > HEAD_VERSION:
        raise SchemaTooNewError(
            f"database schema version {version} is newer than this edgeprof understands ({HEAD_VERSION}); "
            "upgrade edgeprof"
        )
    for migration in MIGRATIONS:
        if migration.version <= version or migration.version > target:
            continue
        with engine.begin() as conn:
            for statement in migration.statements:
                conn.execute(text(statement))
            conn.execute(
                text(
                    "INSERT INTO schema_version (version, description, applied_at) "
                    "VALUES (:v, :d, datetime('now'))"
                ),
                {"v": migration.version, "d": migration.description},
            )
        applied.append(migration.version)
    return applied
