"""The column registry: one list of every report field and table column, read by every printer.

As llama-bench's field list drives its csv, json, md and sql printers, ``COLUMNS`` drives the terminal
table, Markdown, CSV, JSON and the HTML tables. Each entry says its name, header, unit, how its cell reads,
which rows have it (``inprocess`` speed rows, ``quality`` rows, ``serving`` levels, or ``versus``: a serving
level at concurrency 1 beside its in-process config) and which formats show it. A new field or column is
one entry here (and the code that computes its value).

Two kinds of entries share the list, because the JSON contract and the tables order their columns
differently and both orders are fixed:
- *fields* (``csv``, ``json``): one raw value of a row, with its JSON type. Their order is the JSON
  report's schema, in docs/report-schema.md: a list of objects with exactly these keys, ``null`` where a
  value was not measured. Fields are only ever appended, with a new ``REPORT_SCHEMA_VERSION``.
- *columns* (``table``, ``md``, ``html``): one cell of a table, read from one or more fields. Their order
  is the tables' order; each table shows the columns of its kind of row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from edgeprof.report.accuracy import TASK_FIELDS, fmt_accuracy
from edgeprof.report.cells import (
    OUTPUT_CHARS,
    fmt_agreement,
    fmt_bandwidth,
    fmt_both,
    fmt_goodput,
    fmt_memory,
    fmt_ngl,
    fmt_output,
    fmt_output_html,
    fmt_pair,
    fmt_ppl,
    fmt_prompt_cache,
    fmt_quality,
    fmt_served,
    fmt_spread,
    fmt_status,
    fmt_tokens_out,
    fmt_ttft,
    fmt_value,
    fmt_watts,
)
from edgeprof.runners.registry import is_serving
from edgeprof.safetext import safe_text

Row = Mapping[str, Any]
RowKind = Literal["inprocess", "quality", "serving", "versus"]
Format = Literal["table", "md", "csv", "json", "html"]
# How the HTML draws a cell: as text, right-aligned as a number, as a verdict badge, or as the status badge
# followed by the failure's reason.
Style = Literal["text", "num", "badge", "status"]

# Schema versions of the JSON report, each appending fields at the end: v3 quality against the reference;
# v4 how energy was measured and whether other work competed for the CPU; v5 context depth, tokens out and
# EOS, the prompt as tokenized and llama.cpp's parameters in effect; v6 predicted memory, achieved
# bandwidth and the recommendation; v7 the runner and the serving levels' figures; v8 the device and build
# of each row, for a fleet's central database; v9 the flash attention llama.cpp chose for "auto"; v10 the
# recommendation's evidence; v11 a soak's figures; v12 the model file's tensor-type mix; v13 a serving
# level's failures by reason, its prompt cache and its good requests of all sent; v14 how a sequential
# decision ended and the reps set aside for the device's state, task accuracy and its paired difference
# against the reference.
REPORT_SCHEMA_VERSION = 14


@dataclass(frozen=True)
class Column:
    name: str  # the JSON/CSV key of a field; the ``--columns`` key of a column
    header: str
    unit: str
    rows: frozenset[RowKind]
    formats: frozenset[Format]
    fmt: Callable[[Row], str] | None = None  # a column's cell text; None: a field, printed as its raw value
    type: str = ""  # a field's JSON type, e.g. "number|null"
    style: Style = "text"
    field: str = ""  # the field a badge or status cell shows
    html_header: str | None = None  # where the HTML page words a header its own way
    html_fmt: Callable[[Row], str] | None = None  # where the HTML page words a cell its own way
    # When the terminal table is wider than the screen, columns are left out in rising rank (the least
    # telling first), each one named; None: never, without it a row does not say what it is or how fast it
    # ran (it is kept in HTML too when all its cells are empty).
    width_rank: int | None = 0
    # A parameter of the config (threads, ngl, batch …): where it differs between the rows shown, it is
    # what tells them apart, so it is never left out to fit a width (measures are).
    param: bool = False
    # Shown only where it differs between the rows (a setting that is almost always the plan's default).
    vary_only: bool = False

    @property
    def essential(self) -> bool:
        return self.width_rank is None

    def text(self, row: Row) -> str:
        assert self.fmt is not None, f"{self.name} is a field, not a column"
        return self.fmt(row)

    def html_text(self, row: Row) -> str:
        return (self.html_fmt or self.text)(row)


ALL: frozenset[RowKind] = frozenset({"inprocess", "quality", "serving"})
LOCAL: frozenset[RowKind] = frozenset({"inprocess", "quality"})  # the in-process runner's rows
SPEED: frozenset[RowKind] = frozenset({"inprocess"})  # from its steady speed reps
SERVING: frozenset[RowKind] = frozenset({"serving"})
VERSUS: frozenset[RowKind] = frozenset({"versus"})
DATA: frozenset[Format] = frozenset({"csv", "json"})
SHOWN: frozenset[Format] = frozenset({"table", "md", "html"})
TEXT: frozenset[Format] = frozenset({"table", "md"})
HTML: frozenset[Format] = frozenset({"html"})
MD_HTML: frozenset[Format] = frozenset({"md", "html"})

# Which rows each table shows: quality rows sit in the configs table beside the speed rows.
TABLES: dict[str, frozenset[RowKind]] = {
    "configs": LOCAL,
    "serving": SERVING,
    "versus": VERSUS,
}


def field(name: str, type_: str, unit: str = "", rows: frozenset[RowKind] = ALL) -> Column:
    return Column(name, name, unit, rows, DATA, type=type_)


def column(
    name: str,
    header: str,
    fmt: Callable[[Row], str],
    *,
    unit: str = "",
    rows: frozenset[RowKind] = LOCAL,
    formats: frozenset[Format] = SHOWN,
    **kw: Any,
) -> Column:
    return Column(name, header, unit, rows, formats, fmt=fmt, **kw)


def value_of(name: str, digits: int = 1) -> Callable[[Row], str]:
    """A cell of one field's value: '—' for not measured, floats to ``digits`` places."""
    return lambda row: fmt_value(row.get(name), digits)


def is_serving_runner(runner: str | None) -> bool:
    """Whether a runner measures a server under load (its rows are serving levels, another scenario that is
    never averaged with in-process rows), from the runner catalogue; a runner this installation does not
    know is not the in-process one, so it counts as serving."""
    return is_serving(runner)


def fmt_percentiles(row: Row, prefix: str, *names: str) -> str:
    """'p50/p90/p99' of one serving distribution (``prefix_p50`` ...), '—' when the first is not measured."""
    if row[f"{prefix}_{names[0]}"] is None:
        return fmt_value(None)
    return "/".join(fmt_value(row[f"{prefix}_{name}"]) for name in names)


def fmt_mix(row: Row) -> str:
    """The file's tensor-type mix, its warning and a requantization flagged ('!')."""
    mix = row.get("tensor_mix")
    if mix is None:
        return fmt_value(None)
    flags = [f"! {row['tensor_mix_warning']}"] if row.get("tensor_mix_warning") else []
    if row.get("requantized_from"):
        flags.append(f"! requantized from {row['requantized_from']}")
    return safe_text("; ".join([str(mix), *flags]))


def row_kind(row: Row) -> RowKind:
    """Which kind of row a report row is: a serving level, a quality run's own row, or a speed row."""
    if is_serving_runner(row.get("runner")):
        return "serving"
    if row.get("quality_run_id") is not None and row.get("quality_run_id") == row.get("run_id"):
        return "quality"
    if row.get("task_run_id") is not None and row.get("task_run_id") == row.get("run_id"):
        return "quality"  # a task run's own row: scores, no speed, as a quality run's
    return "inprocess"


COLUMNS: tuple[Column, ...] = (
    # -- fields: the JSON and CSV contract, in schema order -------------------------------------------------
    field("sweep_id", "integer"),
    field("run_id", "integer"),
    field("spec_id", "string"),
    field("model_label", "string"),
    field("model_group", "string"),
    field("model_sha256", "string|null"),
    field("quant", "string|null"),
    field("bits_per_weight", "number|null", "bit"),
    field("workload", "string"),
    field("n_prompt", "integer|null", "tokens", SPEED),
    field("n_predict", "integer", "tokens"),
    field("ctx", "integer", "tokens"),
    field("ngl", "integer", "layers"),
    field("threads", "integer"),
    field("n_batch", "integer", "tokens"),
    field("n_ubatch", "integer", "tokens"),
    field("flash_attn", "string"),
    field("type_k", "string"),
    field("type_v", "string"),
    field("mmap", "boolean"),
    field("status", "string"),
    field("reason", "string|null"),
    field("attempts", "integer"),
    field("cold_load_ms", "number|null", "ms", SPEED),
    field("cold_start_ms", "number|null", "ms", SPEED),
    field("cold_ttft_ms", "number|null", "ms", SPEED),
    field("pp_tps_median", "number|null", "t/s", SPEED),
    field("pp_tps_min", "number|null", "t/s", SPEED),
    field("pp_tps_max", "number|null", "t/s", SPEED),
    field("pp_tps_n", "integer", "reps"),
    field("tg_tps_median", "number|null", "t/s", SPEED),
    field("tg_tps_min", "number|null", "t/s", SPEED),
    field("tg_tps_max", "number|null", "t/s", SPEED),
    field("tg_tps_n", "integer", "reps"),
    field("ttft_ms_p50", "number|null", "ms", SPEED),
    field("ttft_ms_p95", "number|null", "ms", SPEED),
    field("ttft_n", "integer", "reps"),
    field("peak_rss_mb", "number|null", "MiB"),
    field("reference_label", "string|null", rows=LOCAL),
    field("agree_prefix_tokens", "integer|null", "tokens", SPEED),
    field("agree_share", "number|null", "", SPEED),
    field("agree_n_tokens", "integer|null", "tokens", SPEED),
    field("tg_ratio_vs_ref", "number|null", "", SPEED),
    field("pp_ratio_vs_ref", "number|null", "", SPEED),
    # telemetry (null where the device has no such sensor: never 0)
    field("start_temp_c", "number|null", "°C"),
    field("temp_max_c", "number|null", "°C", SPEED),
    field("power_source", "string|null"),
    field("decode_power_mw_median", "number|null", "mW", SPEED),
    field("decode_j_per_token_median", "number|null", "J/token", SPEED),
    field("decode_j_per_token_net_median", "number|null", "J/token", SPEED),
    # Jetson state (null elsewhere): a change mid-sweep makes a row incomparable with the others
    field("peak_shared_mb", "number|null", "MiB"),
    field("peak_gpu_mem_mb", "number|null", "MiB"),
    field("power_mode", "string|null"),
    field("clocks_locked", "boolean|null"),
    field("device_state_changed", "boolean|null"),
    # verdicts (agent/verdicts/throttle.py, store.py): null when the run was recorded without telemetry
    field("throttle_verdict", "string|null", rows=LOCAL),
    field("stability_verdict", "string|null", rows=LOCAL | SERVING),
    # v3: KL divergence / same top / perplexity vs the reference (agent/report/quality.py); every speed row
    # of a model label carries its quality run's figures, so speed and quality read on one line
    field("kld_mean", "number|null", rows=LOCAL),
    field("kld_se", "number|null", rows=LOCAL),
    field("kld_median", "number|null", rows=LOCAL),
    field("kld_p90", "number|null", rows=LOCAL),
    field("kld_p95", "number|null", rows=LOCAL),
    field("kld_p99", "number|null", rows=LOCAL),
    field("kld_max", "number|null", rows=LOCAL),
    field("same_top_pct", "number|null", "%", LOCAL),
    field("dp_top_mean", "number|null", rows=LOCAL),
    field("dp_top_p99", "number|null", rows=LOCAL),
    field("ppl", "number|null", rows=LOCAL),
    field("ppl_se", "number|null", rows=LOCAL),
    field("ppl_ref", "number|null", rows=LOCAL),
    field("ppl_ref_se", "number|null", rows=LOCAL),
    field("delta_ppl", "number|null", rows=LOCAL),
    field("delta_ppl_se", "number|null", rows=LOCAL),
    field("ln_ppl_ratio", "number|null", rows=LOCAL),
    field("ln_ppl_ratio_se", "number|null", rows=LOCAL),
    field("quality_n_tokens", "integer|null", "tokens", LOCAL),
    field("quality_ctx", "integer|null", "tokens", LOCAL),
    field("quality_chunks", "integer|null", rows=LOCAL),
    field("quality_text_sha256", "string|null", rows=LOCAL),
    field("quality_reference_label", "string|null", rows=LOCAL),
    field("quality_run_id", "integer|null", rows=LOCAL),
    # v4: how the energy figures were measured (agent/telemetry/energy.py precedence; null without energy)
    # and whether other processes competed for the CPU during the steady reps (agent/verdicts/interference.py)
    field("energy_basis", "string|null"),
    field("energy_whole_board", "boolean|null"),
    field("interference_verdict", "string|null", rows=LOCAL | SERVING),
    # v5: depth, tokens out and EOS, prompt as tokenized, parameters in effect (agent/report/workload.py)
    field("depth", "integer|null", "tokens"),
    field("tokens_out_median", "number|null", "tokens", SPEED | SERVING),
    field("tokens_out_min", "integer|null", "tokens", SPEED | SERVING),
    field("eos_count", "integer", "reps"),
    field("finish_reasons", "string|null", rows=SPEED),
    field("ignore_eos", "boolean|null"),
    field("prompt_n_tokens", "integer|null", "tokens", SPEED | SERVING),
    field("prompt_sha256", "string|null", rows=SPEED),
    field("parse_special", "boolean|null", rows=SPEED),
    field("kv_used_cells", "integer|null", "cells", SPEED),
    field("kv_cache_mib", "number|null", "MiB", LOCAL),
    field("n_ctx_effective", "integer|null", "tokens", LOCAL),
    field("swa_full", "boolean|null"),
    field("kv_unified", "boolean|null"),
    field("offload_kqv", "boolean|null"),
    field("op_offload", "boolean|null"),
    field("poll", "integer|null", "%"),
    field("n_seq_max", "integer|null"),
    # v6: memory predicted before the run, bandwidth, the recommendation (agent/report/fit.py)
    field("mem_predicted_mb", "number|null", "MiB", LOCAL | SERVING),
    field("mem_available_mb", "number|null", "MiB", LOCAL | SERVING),
    field("bw_gbps", "number|null", "GB/s", SPEED),
    field("bw_pct", "number|null", "%", SPEED),
    field("bw_probe_gbps", "number|null", "GB/s", LOCAL),
    field("bw_datasheet_gbps", "number|null", "GB/s", LOCAL),
    field("bw_datasheet_pct", "number|null", "%", SPEED),
    field("recommendation", "string|null", rows=SPEED),
    # v7: the runner, the serving load, and the serving figures (agent/report/serving.py); null on in-process
    # rows, which are another scenario
    field("runner", "string"),
    field("concurrency", "integer|null", "clients", SERVING),
    field("request_rate", "number|null", "req/s", SERVING),
    field("serving_requests", "integer|null", "requests", SERVING),
    field("serving_ok", "integer|null", "requests", SERVING),
    field("serving_error_rate", "number|null", "", SERVING),
    field("serving_timeouts", "integer|null", "requests", SERVING),
    field("serving_rejected", "integer|null", "requests", SERVING),
    field("serving_max_deferred", "number|null", "requests", SERVING),
    field("serving_ready_ms", "number|null", "ms", SERVING),
    field("serving_cold_start_ms", "number|null", "ms", SERVING),
    field("serving_slot_n_ctx", "integer|null", "tokens", SERVING),
    field("serving_ttft_ms_p50", "number|null", "ms", SERVING),
    field("serving_ttft_ms_p90", "number|null", "ms", SERVING),
    field("serving_ttft_ms_p99", "number|null", "ms", SERVING),
    field("serving_tpot_ms_p50", "number|null", "ms", SERVING),
    field("serving_tpot_ms_p99", "number|null", "ms", SERVING),
    field("serving_tpot_e2e_ms_p50", "number|null", "ms", SERVING),
    field("serving_itl_ms_p50", "number|null", "ms", SERVING),
    field("serving_itl_ms_p99", "number|null", "ms", SERVING),
    field("serving_e2el_ms_p50", "number|null", "ms", SERVING),
    field("serving_e2el_ms_p99", "number|null", "ms", SERVING),
    field("serving_request_throughput_rps", "number|null", "req/s", SERVING),
    field("serving_output_tps", "number|null", "t/s", SERVING),
    field("serving_total_tps", "number|null", "t/s", SERVING),
    field("serving_goodput_rps", "number|null", "req/s", SERVING),
    field("serving_server_ms_per_token_p50", "number|null", "ms", SERVING),
    field("serving_client_minus_server_ttft_ms_p50", "number|null", "ms", SERVING),
    field("serving_output_j_per_token", "number|null", "J/token", SERVING),
    # v8: where the row was measured: device (hostname, board, L4T, uid), build, sweep uid
    # (agent/report/fleet.py), so a report out of a central database with many devices stays unambiguous
    field("device_hostname", "string|null"),
    field("device_board_model", "string|null"),
    field("device_l4t_release", "string|null"),
    field("device_uid", "string|null"),
    field("build_llama_cpp_python", "string|null"),
    field("build_backend", "string|null"),
    field("sweep_uid", "string|null"),
    # v9: "on"/"off" as llama.cpp resolved flash_attn (null: older runs, or llama.cpp said nothing)
    field("flash_attn_effective", "string|null", rows=LOCAL),
    # v10: the recommendation's evidence (agent/report/recommend.py): its condition's decision, why a row did
    # not compete or decide, the row's speed against the recommended variant with the rank interval the
    # decision used, and the reference check
    field("recommendation_decision", "string|null", rows=SPEED),
    field("recommendation_excluded", "string|null", rows=SPEED),
    field("tg_ratio_vs_best", "number|null", rows=SPEED),
    field("tg_ratio_vs_best_ci_low", "number|null", rows=SPEED),
    field("tg_ratio_vs_best_ci_high", "number|null", rows=SPEED),
    field("quality_warning", "string|null", rows=LOCAL),
    # v11: a soak's figures (agent/report/soak.py, from the soak verdict of agent/verdicts/soak.py): burst =
    # median tg of the first 3 windows, sustained = of the last third, stability = worst / best window, the
    # first throttle signal (seconds from the soak's start, and what it was), thermal steady state, and the
    # energy per decoded token over the same burst and sustained windows
    field("soak_windows_n", "integer|null", rows=LOCAL),
    field("soak_verdict", "string|null", rows=LOCAL),
    field("soak_burst_tps", "number|null", "t/s", LOCAL),
    field("soak_sustained_tps", "number|null", "t/s", LOCAL),
    field("soak_sustained_ratio", "number|null", rows=LOCAL),
    field("soak_stability_ratio", "number|null", rows=LOCAL),
    field("soak_first_throttle_s", "number|null", "s", LOCAL),
    field("soak_first_throttle_what", "string|null", rows=LOCAL),
    field("soak_steady_state_s", "number|null", "s", LOCAL),
    field("soak_steady_temp_c", "number|null", "°C", LOCAL),
    field("soak_end_slope_c_per_min", "number|null", "°C/min", LOCAL),
    field("soak_burst_j_per_token", "number|null", "J/token", LOCAL),
    field("soak_sustained_j_per_token", "number|null", "J/token", LOCAL),
    # v12: what the model file's tensors are (agent/gguf/quantizer.py): each type's share of the weights, a
    # warning where most weight matrices are not of the named type, and what a requantized file was made from
    field("tensor_mix", "string|null", rows=LOCAL),
    field("tensor_mix_warning", "string|null", rows=LOCAL),
    field("requantized_from", "string|null", rows=LOCAL),
    # v13: a serving level's failed requests counted by reason ("7 × stream ended without a finish_reason"),
    # the prompt tokens the server's cache served over the level (its own count) of those sent, and whether
    # the plan asked for that cache ("on"), or not ("off"), or the cache served prompt tokens unasked
    # ("unasked": TTFT measured the cache, not the model)
    field("serving_errors_by_reason", "string|null", rows=SERVING),
    field("serving_cached_prompt_tokens", "integer|null", "tokens", SERVING),
    field("serving_cached_prompt_tokens_of", "integer|null", "tokens", SERVING),
    field("serving_prompt_cache", "string|null", rows=SERVING),
    field("serving_good", "integer|null", "requests", SERVING),  # the requests meeting every SLO, of all sent
    # v14: the sequential decision (agent/sweep/interleave.py, agent/report/recommend.py): the block pairs its
    # interval rests on, where this row stands against the leader ("decided", "tie", "open"), why the group
    # stopped ("settled", "budget: …"), the tie's resolution in %, and the reps set aside because the device
    # ran throttled or in another state as they started
    field("decision_block_pairs", "integer|null", rows=SPEED),
    field("decision_state", "string|null", rows=SPEED),
    field("decision_stopped", "string|null", rows=SPEED),
    field("decision_tie_pct", "number|null", "%", SPEED),
    field("reps_set_aside", "integer|null", "reps", SPEED),
    # v14: task accuracy (agent/report/accuracy/): the model's task run, accuracy with its Wilson interval and
    # a random pick's, the paired difference against the reference on the same tasks, correct answers per kJ
    *(field(name, type_, unit, LOCAL) for name, type_, unit in TASK_FIELDS),
    # -- columns: the tables, in their order; each table shows the columns of its rows (TABLES) ------------
    column("model", "model", lambda r: str(r["model_label"]), rows=ALL | VERSUS, width_rank=None),
    column("quant", "quant", value_of("quant"), rows=ALL, width_rank=None),
    column("ctx", "ctx", value_of("ctx"), unit="tokens", rows=ALL | VERSUS, style="num",
           width_rank=None),
    column("depth", "depth", value_of("depth"), unit="tokens", style="num", width_rank=7, param=True),
    column("ngl", "ngl", lambda r: fmt_ngl(r["ngl"]), rows=ALL | VERSUS, style="num", width_rank=8,
           param=True),
    column("thr", "thr", lambda r: str(r["threads"]), style="num", width_rank=9, param=True),
    # llama.cpp's other settings and the device's power mode: columns only where they differ between rows
    column("batch", "batch/ubatch", lambda r: fmt_both(r, "n_batch", "n_ubatch", 0), rows=ALL, style="num",
           param=True, vary_only=True),
    column("fa", "fa", value_of("flash_attn"), rows=ALL, param=True, vary_only=True),
    column("kv", "KV k/v", lambda r: f"{fmt_value(r.get('type_k'))}/{fmt_value(r.get('type_v'))}", rows=ALL,
           param=True, vary_only=True),
    column("pmode", "power mode", value_of("power_mode"), rows=ALL, param=True, vary_only=True),
    column("runner", "runner", value_of("runner"), rows=SERVING, param=True, vary_only=True),
    column("workload", "workload", lambda r: str(r["workload"]), rows=ALL | VERSUS, width_rank=15,
           param=True),
    column("c", "c", value_of("concurrency"), unit="clients", rows=SERVING, style="num", param=True),
    column("rate", "rate", value_of("request_rate", 2), unit="req/s", rows=SERVING, style="num", param=True),
    column("tokens", "tok out/n_pred", fmt_tokens_out, unit="tokens", style="num", width_rank=5),
    column("status", "status", fmt_status, rows=ALL, style="status", field="status", width_rank=None),
    column("ok_n", "ok/n", fmt_served, unit="requests", rows=SERVING, style="num", width_rank=None),
    column("ready", "ready ms", value_of("serving_ready_ms", 0), unit="ms", rows=SERVING, style="num",
           width_rank=5),
    column("serving_cold", "cold ms", value_of("serving_cold_start_ms", 0), unit="ms", rows=SERVING,
           style="num", width_rank=6),
    column("load", "load ms", value_of("cold_load_ms"), unit="ms", style="num", width_rank=4),
    column("cold", "cold ms", value_of("cold_start_ms"), unit="ms", formats=TEXT, width_rank=13),
    column("pp", "pp t/s med [min–max]", lambda r: fmt_spread(r, "pp_tps"), unit="t/s", style="num",
           width_rank=14),
    column("tg", "tg t/s med [min–max]", lambda r: fmt_spread(r, "tg_tps"), unit="t/s", style="num",
           width_rank=None),
    column("ttft", "TTFT p50/p95 ms", fmt_ttft, unit="ms", style="num", width_rank=16),
    column("rss", "RSS MiB", value_of("peak_rss_mb"), unit="MiB", style="num", width_rank=6),
    column("mem", "mem pred/peak MiB", fmt_memory, unit="MiB", rows=LOCAL | SERVING, style="num",
           width_rank=12),
    column("bw", "BW GB/s (%)", fmt_bandwidth, unit="GB/s", style="num", width_rank=3),
    column("shared", "shared/GPU MiB", lambda r: fmt_both(r, "peak_shared_mb", "peak_gpu_mem_mb"), unit="MiB",
           formats=HTML, style="num"),
    column("agree", "agree vs ref", lambda r: fmt_agreement(r, " prefix"), html_fmt=fmt_agreement,
           width_rank=1),
    column("kld", "KLD / same-top", fmt_quality, width_rank=22),
    column("mix", "tensor types", fmt_mix),  # the first left out where the screen is narrow
    # perplexity beside KLD: both from the model's quality run, '@ctx N' where it scored at another ctx
    column("ppl", "PPL / ΔPPL", fmt_ppl, width_rank=15),
    # task accuracy beside them: % [95 % CI] and the paired difference in points vs the reference
    column("acc", "task acc % [CI] Δ", fmt_accuracy, width_rank=23),
    column("tg_ref", "tg×ref", value_of("tg_ratio_vs_ref", 2), style="num", width_rank=20),
    column("pp_ref", "pp×ref", value_of("pp_ratio_vs_ref", 2), formats=TEXT, width_rank=2),
    column("temp", "start/max °C", lambda r: fmt_both(r, "start_temp_c", "temp_max_c"), unit="°C",
           style="num", width_rank=17),
    column("power", "W dec", fmt_watts, unit="W", style="num", html_header="W decode", width_rank=18),
    column("j_tok", "J/tok net", value_of("decode_j_per_token_net_median", 4), unit="J/token", style="num",
           width_rank=19),
    column("throttle", "throttle", value_of("throttle_verdict"), style="badge", field="throttle_verdict",
           width_rank=11),
    column("stability", "stability", value_of("stability_verdict"), style="badge", field="stability_verdict",
           width_rank=21),
    column("interference", "interference", value_of("interference_verdict"), style="badge",
           field="interference_verdict", width_rank=10),
    # the start of what the config generated (Markdown and HTML; the terminal with ``report --show-output``),
    # every control character made visible, marked where it only repeats the prompt; the page keeps it the
    # longest when it leaves columns out to fit a screen (its text wraps, and it is there to be read)
    column("output", f"output (first {OUTPUT_CHARS} chars)", fmt_output, rows=SPEED, formats=MD_HTML,
           html_fmt=fmt_output_html, width_rank=23),
    # the serving levels' latency and throughput (client-side, nearest rank)
    column("s_ttft", "TTFT p50/p90/p99 ms",
           lambda r: fmt_percentiles(r, "serving_ttft_ms", "p50", "p90", "p99"), unit="ms", rows=SERVING,
           style="num", width_rank=None),
    column("s_tpot", "TPOT p50/p99 ms", lambda r: fmt_pair(r, "serving_tpot_ms_p50", "serving_tpot_ms_p99"),
           unit="ms", rows=SERVING, style="num", width_rank=14),
    column("s_itl", "ITL p50/p99 ms", lambda r: fmt_pair(r, "serving_itl_ms_p50", "serving_itl_ms_p99"),
           unit="ms", rows=SERVING, style="num", width_rank=3),
    column("s_e2el", "E2EL p50/p99 ms", lambda r: fmt_pair(r, "serving_e2el_ms_p50", "serving_e2el_ms_p99"),
           unit="ms", rows=SERVING, style="num", width_rank=9),
    # E2EL / n, TTFT included: GuideLLM's "TPOT" (docs/measurements.md, serving rows)
    column("s_e2e_tok", "E2EL/tok p50 ms", value_of("serving_tpot_e2e_ms_p50", 2), unit="ms", rows=SERVING,
           style="num", width_rank=1),
    column("s_rps", "req/s", value_of("serving_request_throughput_rps", 2), unit="req/s", rows=SERVING,
           style="num", width_rank=10),
    column("s_out", "out tok/s", value_of("serving_output_tps"), unit="t/s", rows=SERVING, style="num",
           width_rank=None),
    column("s_goodput", "goodput/s (good/sent)", fmt_goodput, unit="req/s", rows=SERVING,
           style="num", width_rank=15),
    column("s_deferred", "deferred", value_of("serving_max_deferred", 0), unit="requests", rows=SERVING,
           style="num", width_rank=2),
    column("s_slot", "slot ctx", value_of("serving_slot_n_ctx"), unit="tokens", rows=SERVING, style="num",
           width_rank=4),
    # a level's failed requests by reason (the terminal and Markdown list them below the table)
    column("s_errors", "failed requests", value_of("serving_errors_by_reason"), rows=SERVING, formats=HTML,
           width_rank=17),
    # the prompt tokens the server's cache served, of those sent, marked where the plan did not ask for it
    column("s_cache", "cached prompt tok", fmt_prompt_cache, unit="tokens", rows=SERVING, style="num",
           width_rank=16),
    # per level: its requests' TPOT spread, other CPU work in its window (agent/verdicts/serving.py)
    column("s_stability", "stability", value_of("stability_verdict"), rows=SERVING, style="badge",
           field="stability_verdict", width_rank=7),
    column("s_interference", "interference", value_of("interference_verdict"), rows=SERVING, style="badge",
           field="interference_verdict", width_rank=8),
    # in-process (CLI) vs HTTP API for the same model / ctx / ngl / workload (agent/report/serving.py)
    column("v_decode", "in-process decode ms/tok", value_of("inprocess_decode_ms_per_token", 2), unit="ms",
           rows=VERSUS, style="num"),
    column("v_tpot", "API TPOT p50 ms (c=1)", value_of("serving_tpot_ms_p50", 2), unit="ms", rows=VERSUS,
           style="num"),
    column("v_server", "API server ms/tok", value_of("serving_server_ms_per_token_p50", 2), unit="ms",
           rows=VERSUS, style="num"),
    column("v_ttft", "in-process TTFT p50 ms", value_of("inprocess_ttft_ms_p50"), unit="ms", rows=VERSUS,
           style="num"),
    column("v_api_ttft", "API TTFT p50 ms (c=1)", value_of("serving_ttft_ms_p50"), unit="ms", rows=VERSUS,
           style="num"),
)  # fmt: skip


def fields() -> tuple[Column, ...]:
    """The JSON report's fields, in schema order."""
    return tuple(c for c in COLUMNS if "json" in c.formats)


def shown(fmt: Format, table: str = "configs", rows: Sequence[Row] | None = None) -> tuple[Column, ...]:
    """The columns ``fmt`` shows in ``table`` (``configs``, ``serving`` or ``versus``), in table order; with
    ``rows``, the columns shown only where they vary (``vary_only``) left out where they do not."""
    kinds = TABLES[table]
    out = tuple(c for c in COLUMNS if fmt in c.formats and c.fmt is not None and c.rows & kinds)
    if rows is None:
        return out
    return tuple(c for c in out if not c.vary_only or varies(c, rows))


def varies(column: Column, rows: Sequence[Row]) -> bool:
    """Whether ``column``'s cell differs between ``rows``."""
    return len({column.text(r) for r in rows}) > 1


def telling_params(columns: Sequence[Column], rows: Sequence[Row]) -> set[str]:
    """The keys of the parameter columns that differ between ``rows``: what tells them apart, never left
    out to fit a width."""
    return {c.name for c in columns if c.param and varies(c, rows)}


def cells(columns: Sequence[Column], row: Row) -> list[str]:
    """A row's cells as the terminal and Markdown tables print them: control characters of a stored label
    or name escaped (``edgeprof.safetext``), so no cell can act on a terminal or break its table's line."""
    return [safe_text(c.text(row)) for c in columns]


# (field, JSON type) — the JSON report's contract.
REPORT_FIELDS: tuple[tuple[str, str], ...] = tuple((c.name, c.type) for c in fields())
FIELD_NAMES = tuple(name for name, _ in REPORT_FIELDS)
# ``report --columns`` keys: the terminal table's columns, in its order.
COLUMN_KEYS = tuple(c.name for c in shown("table"))
ESSENTIAL_KEYS = tuple(c.name for c in shown("table") if c.essential)


def drop_order(fmt: Format, table: str = "configs") -> tuple[str, ...]:
    """The keys of ``fmt``'s columns in ``table`` that may be left out to fit a width, least telling first
    (the essential ones never are): the terminal fits its characters by it, the HTML page a laptop screen."""
    optional = (c for c in shown(fmt, table) if not c.essential)
    return tuple(c.name for c in sorted(optional, key=lambda c: c.width_rank or 0))


# Left out first when the table is wider than the terminal (least telling first); each one is named.
FIT_DROP_ORDER = drop_order("table")


class ColumnError(ValueError):
    pass


def parse_columns(spec: str) -> tuple[str, ...]:
    """``--columns model,quant,tg`` -> keys, refusing an unknown one (with the list of valid ones)."""
    keys = tuple(k.strip() for k in spec.split(",") if k.strip())
    unknown = [k for k in keys if k not in COLUMN_KEYS]
    if unknown or not keys:
        raise ColumnError(
            f"unknown column(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(COLUMN_KEYS)}"
        )
    return keys
