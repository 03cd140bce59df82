"""The Prometheus metric set, read from the database: what the agent is doing (the same figures as
``edgeprof status``) and, per finished config, its latest speed, TTFT, temperature, energy and verdicts (the
same values as ``edgeprof report --format json``, from the report's own rows).

``MetricsCollector`` is a custom collector: every scrape opens its own short read session, so a scrape sees
what the sweep has written so far (SQLite in WAL mode: a reader never blocks the writer), and a failed read
becomes ``edgeprof_metrics_read_ok 0`` in the scrape, never an exception in the agent.

Values that were not measured are left out of the scrape, never written as 0: a dashboard must not draw a
config without an energy sensor as one that costs no energy.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from edgeprof.daemon.metric_counts import Family, build_info_family, count_families, endpoint_of
from edgeprof.daemon.status import gather_status
from edgeprof.fleet import sweep_scope
from edgeprof.run_states import FINISHED_STATUSES, utcnow
from edgeprof.runners.registry import DEFAULT_RUNNER
from edgeprof.storage.models import Device, ModelFile, Run, Sweep

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

log = logging.getLogger("edgeprof.metrics")

# Every per-config family carries these labels, in this order (the report row's field of each): every
# parameter a plan varies, so that two configs are never one series (two thread counts, two batch sizes).
# ``variant`` is empty unless two configs differ only in a knob no label names (mmap, poll, KV offload):
# then it holds each one's spec id. A series stays the same from one nightly sweep of a plan to the next.
CONFIG_LABELS = (
    "device", "model", "quant", "ctx", "ngl", "threads", "n_batch", "n_ubatch", "flash_attn", "type_k",
    "type_v", "depth", "workload", "runner", "variant",
)  # fmt: skip
ROW_FIELD_OF_LABEL = {
    "device": "device_hostname",
    "model": "model_label",
    "quant": "quant",
    "ctx": "ctx",
    "ngl": "ngl",
    "threads": "threads",
    "n_batch": "n_batch",
    "n_ubatch": "n_ubatch",
    "flash_attn": "flash_attn",
    "type_k": "type_k",
    "type_v": "type_v",
    "depth": "depth",
    "workload": "workload",
    "runner": "runner",
    "variant": "_variant",
}

# What the agent writes as its state (agent/daemon/agent.py), and what ``status`` shows for a silent one.
AGENT_STATES = (
    "starting", "ready", "idle", "running", "paused", "waiting", "error", "stopped", "died", "not responding",
)  # fmt: skip


@dataclass(frozen=True)
class ValueMetric:
    """A per-config gauge: its name, help, the report field it shows and the factor to its unit."""

    name: str
    help: str
    field: str
    scale: float = 1.0


CONFIG_VALUES = (
    ValueMetric(
        "edgeprof_tg_tokens_per_second", "Token generation speed, median of the steady reps.", "tg_tps_median"
    ),
    ValueMetric("edgeprof_pp_tokens_per_second", "Prompt speed, median of the steady reps.", "pp_tps_median"),
    ValueMetric(
        "edgeprof_ttft_seconds", "Time to first token, median (p50) of the steady reps.", "ttft_ms_p50", 1e-3
    ),
    ValueMetric(
        "edgeprof_temperature_max_celsius",
        "Highest temperature any sensor read during the steady reps.",
        "temp_max_c",
    ),
    ValueMetric(
        "edgeprof_energy_joules_per_token",
        "Decode energy per generated token, median of the steady reps.",
        "decode_j_per_token_median",
    ),
)


# -- the agent and its current sweep -------------------------------------------------------------------
def state_set(family: Family, labels: Sequence[str], states: Iterable[str], current: str) -> None:
    """One sample per known state, 1 for the current one (a state that is not in the list is added)."""
    known = list(states)
    if current not in known:
        known.append(current)
    for state in known:
        family.add([*labels, state], state == current)


def seconds_since(iso: str | None, now: dt.datetime) -> float | None:
    if not iso:
        return None
    return max(0.0, (now - dt.datetime.fromisoformat(iso)).total_seconds())


def agent_families(status: Mapping[str, Any], now: dt.datetime) -> list[Family]:
    """The agent's state, its current (else latest) sweep, config index, ETA and the last error's age, from
    ``gather_status`` (what ``edgeprof status`` prints)."""
    state = Family("edgeprof_agent_state", "The agent's current state (1) among its states.", ("state",))
    up = Family("edgeprof_agent_up", "1 while the agent's heartbeat is fresh, else 0.")
    beat = Family("edgeprof_agent_heartbeat_age_seconds", "Seconds since the agent's last heartbeat.")
    agent = status.get("agent")
    if agent is not None:
        state_set(state, (), AGENT_STATES, str(agent["state"]))
        up.add((), bool(agent["alive"]))
        beat.add((), agent["heartbeat_age_s"])
    info = Family("edgeprof_sweep_info", "The current (else latest) sweep.", ("sweep_id", "name", "status"))
    index = Family("edgeprof_sweep_config_index", "Which config of the sweep runs now (1-based; done + 1).")
    total = Family("edgeprof_sweep_configs", "Configs in the current sweep's plan.")
    done = Family("edgeprof_sweep_configs_done", "Configs of the current sweep that have finished.")
    eta = Family("edgeprof_sweep_eta_seconds", "Estimated seconds until the running sweep ends.")
    sweep = status.get("sweep")
    if sweep is not None:
        info.add((sweep["id"], sweep["name"], sweep["status"]), 1)
        index.add((), sweep["config_index"])
        total.add((), sweep["configs_total"])
        done.add((), sweep["configs_done"])
        eta.add((), sweep["eta_s"])
    error = Family("edgeprof_last_error_age_seconds", "Seconds since the last run that did not end ok.")
    last = status.get("last_error")
    error.add((), seconds_since(last["at"], now) if last else None)
    return [state, up, beat, info, index, total, done, eta, error]


# -- the finished configs ------------------------------------------------------------------------------
def config_labels(row: Mapping[str, Any]) -> tuple[str, ...]:
    values = {**row, "depth": row.get("depth") or 0}  # a run from before the depth axis ran at depth 0
    return tuple("" if values.get(f) is None else str(values[f]) for f in ROW_FIELD_OF_LABEL.values())


def _judged_families(
    rows: Sequence[Mapping[str, Any]],
    labels_of: Callable[[Mapping[str, Any]], tuple[str, ...]],
    label_names: tuple[str, ...],
    metrics: Sequence[ValueMetric],
    status_name: str,
    verdict_prefix: str,
    subject: str,
    verdict_kinds: Iterable[str],
) -> tuple[list[Family], Family, list[Family]]:
    """(gauges, status, verdicts) of rows: each metric a gauge, the status and each verdict (its values
    worst first, as the report ranks them) a state set, one sample set per row's labels."""
    from edgeprof.verdicts import SEVERITY

    values = [Family(m.name, m.help, label_names) for m in metrics]
    status = Family(
        status_name, f"How the {subject}'s latest run ended (1) among the run statuses.",
        (*label_names, "status"),
    )  # fmt: skip
    verdicts = {
        kind: Family(
            f"{verdict_prefix}{kind}_verdict",
            f"The {subject}'s {kind} verdict (1) among its values.",
            (*label_names, "verdict"),
        )
        for kind in verdict_kinds
    }
    for row in rows:
        labels = labels_of(row)
        for metric, family in zip(metrics, values, strict=True):
            value = row.get(metric.field)
            family.add(labels, value * metric.scale if value is not None else None)
        state_set(status, labels, FINISHED_STATUSES, str(row["status"]))
        for kind, family in verdicts.items():
            if row.get(f"{kind}_verdict") is not None:
                state_set(family, labels, SEVERITY[kind], str(row[f"{kind}_verdict"]))
    return values, status, list(verdicts.values())


def config_families(rows: Sequence[Mapping[str, Any]]) -> list[Family]:
    """Per config (one report row each, the latest finished run of its labels): its figures as gauges and
    its status and verdicts as state sets."""
    from edgeprof.verdicts import SEVERITY

    values, status, verdicts = _judged_families(
        rows, config_labels, CONFIG_LABELS, CONFIG_VALUES, "edgeprof_config_status", "edgeprof_", "config",
        SEVERITY,
    )  # fmt: skip
    ended = Family(
        "edgeprof_config_last_run_timestamp_seconds",
        "When the config's latest run ended (Unix time).",
        CONFIG_LABELS,
    )
    for row in rows:
        ended.add(config_labels(row), row.get("_ended_at_s"))
    return [*values, status, ended, *verdicts]


# endpoint: llama-server's native /completion, or the openai runner's chat or completions
SERVING_LABELS = (*CONFIG_LABELS, "endpoint", "concurrency", "request_rate")

SERVING_VALUES = (
    ValueMetric(
        "edgeprof_serving_ttft_seconds",
        "A serving level's time to first token, p50 over its measured requests (client side).",
        "serving_ttft_ms_p50",
        1e-3,
    ),
    ValueMetric(
        "edgeprof_serving_ttft_p99_seconds",
        "A serving level's time to first token, p99 (nearest rank) over its measured requests.",
        "serving_ttft_ms_p99",
        1e-3,
    ),
    ValueMetric(
        "edgeprof_serving_tpot_seconds",
        "A serving level's time per output token after the first, p50: (E2EL - TTFT)/(n - 1).",
        "serving_tpot_ms_p50",
        1e-3,
    ),
    ValueMetric(
        "edgeprof_serving_output_tokens_per_second",
        "Output tokens all clients of a serving level received per second of the level.",
        "serving_output_tps",
    ),
    ValueMetric(
        "edgeprof_serving_goodput_requests_per_second",
        "Requests per second of a serving level that met the plan's SLOs (absent without SLOs).",
        "serving_goodput_rps",
    ),
    ValueMetric(
        "edgeprof_serving_error_ratio",
        "Share of a serving level's measured requests that failed, timed out or were rejected.",
        "serving_error_rate",
    ),
)

# The verdicts a serving level is judged by (its throttle verdict covers the server's load, not the level).
SERVING_VERDICTS = ("stability", "interference")


def serving_load(row: Mapping[str, Any]) -> tuple[str, ...]:
    """A serving level's endpoint, concurrency and request rate, as labels ("" for an in-process config)."""
    rate = row.get("request_rate")
    load = str(row.get("concurrency") or "")
    return (str(row.get("_endpoint") or ""), load, "" if rate is None else f"{rate:g}")


def serving_labels(row: Mapping[str, Any]) -> tuple[str, ...]:
    return (*config_labels(row), *serving_load(row))


def serving_families(rows: Sequence[Mapping[str, Any]]) -> list[Family]:
    """Per serving level (its latest finished run): its latency and throughput figures as gauges, its
    status and verdicts as state sets, labelled by the config and the level's load."""
    values, status, verdicts = _judged_families(
        rows, serving_labels, SERVING_LABELS, SERVING_VALUES, "edgeprof_serving_status", "edgeprof_serving_",
        "serving level", SERVING_VERDICTS,
    )  # fmt: skip
    return [*values, status, *verdicts]


def latest_finished_runs(session: Session, device: str | None = None) -> dict[int, tuple[float | None, str]]:
    """run id -> (its end in Unix time, its endpoint) of the latest finished run of each config or serving
    level: a device's model file, workload, every llama.cpp parameter, runner, endpoint and load; what a
    dashboard shows for that config or level now."""
    knobs = (
        Run.model_label, ModelFile.quant_type, Run.n_ctx, Run.n_gpu_layers, Run.n_threads, Run.n_batch,
        Run.n_ubatch, Run.flash_attn, Run.type_k, Run.type_v, Run.depth, Run.workload_name, Run.use_mmap,
        Run.poll, Run.offload_kqv, Run.op_offload, Run.swa_full, Run.kv_unified, Run.n_seq_max,
        Run.concurrency, Run.request_rate,
    )  # fmt: skip
    query = (
        select(Run.id, Run.runner, Run.ended_at, Run.effective_json, Device.hostname, *knobs)
        .join(Sweep, Run.sweep_id == Sweep.id)
        .join(Device, Sweep.device_id == Device.id)
        .outerjoin(ModelFile, Run.model_file_id == ModelFile.id)
        .where(Run.status.in_(FINISHED_STATUSES), *sweep_scope(device))
        .order_by(Run.id)
    )
    latest: dict[tuple[Any, ...], tuple[int, float | None, str]] = {}
    for run_id, runner, ended_at, effective_json, *key in session.execute(query):
        end = ended_at.replace(tzinfo=dt.timezone.utc).timestamp() if ended_at is not None else None
        runner = runner or DEFAULT_RUNNER
        endpoint = endpoint_of(runner, effective_json)
        ident = (*key, runner, endpoint)
        latest[ident] = (run_id, end, endpoint)  # ordered by id: the latest one stays
    return {run_id: (end, endpoint) for run_id, end, endpoint in latest.values()}


def with_variants(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``_variant`` of each row: its spec id where another row has the same labels (they differ in a knob
    no label names), else empty."""
    by_labels: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in rows:
        row["_variant"] = ""
        by_labels.setdefault((*config_labels(row), *serving_load(row)), []).append(row)
    for same in by_labels.values():
        if len(same) > 1:
            for row in same:
                row["_variant"] = str(row.get("spec_id") or "")
    return rows


def config_rows(session: Session, device: str | None = None) -> list[dict[str, Any]]:
    """The report rows (``build_rows``, serving levels included) of each config's and serving level's latest
    finished run, with ``_ended_at_s`` and ``_endpoint``: one ``build_rows`` per sweep that holds such a run
    (nightly sweeps of one plan: only the newest)."""
    from edgeprof.report import build_rows

    latest = latest_finished_runs(session, device)
    sweeps = sorted(set(session.scalars(select(Run.sweep_id).where(Run.id.in_(latest))))) if latest else []
    rows: list[dict[str, Any]] = []
    for sweep_id in sweeps:
        for row in build_rows(session, sweep_id, include_serving=True):
            # a spec redone after an interruption: its newest attempt speaks in the report, and here once
            # it has finished (until then, the config is absent from this sweep's rows)
            if row["run_id"] in latest:
                end, endpoint = latest[row["run_id"]]
                rows.append({**row, "_ended_at_s": end, "_endpoint": endpoint})
    return with_variants(rows)


# -- the collector -------------------------------------------------------------------------------------
def read_families(session: Session, device: str | None = None) -> list[Family]:
    """Everything one scrape shows, from one read session."""
    from edgeprof.report import is_serving_runner

    status = gather_status(session, device=device)
    rows = config_rows(session, device)
    serving = [r for r in rows if is_serving_runner(r.get("runner"))]
    return [
        build_info_family(),
        *agent_families(status, utcnow()),
        *config_families([r for r in rows if not is_serving_runner(r.get("runner"))]),
        *serving_families(serving),
        *count_families(session, device),
    ]


def to_prometheus(families: Iterable[Family]) -> Iterator[Metric]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    for fam in families:
        kind = CounterMetricFamily if fam.kind == "counter" else GaugeMetricFamily
        metric = kind(fam.name, fam.help, labels=list(fam.labels))
        for labels, value in fam.samples:
            metric.add_metric(list(labels), value)
        yield metric


class MetricsCollector:
    """A prometheus_client collector over an edgeprof database: each ``collect`` (one per scrape or
    textfile write) reads the database afresh in its own session; a failure is logged and shows as
    ``edgeprof_metrics_read_ok 0``, never raised into the caller (the agent's HTTP thread)."""

    def __init__(self, engine: Engine, device: str | None = None) -> None:
        self.engine = engine
        self.device = device

    def describe(self) -> list[Metric]:
        return []  # nothing read at registration: the families are known only once the database is read

    def collect(self) -> Iterator[Metric]:
        ok = Family("edgeprof_metrics_read_ok", "1 when this scrape could read the database, else 0.")
        families: list[Family] = []
        try:
            with Session(self.engine) as session:
                families = read_families(session, self.device)
        except Exception:  # a scrape must never fail the agent; the gauge says it failed
            log.exception("metrics: reading the database failed")
            families = []
        ok.add((), bool(families))
        yield from to_prometheus([ok, *families])
