"""Reports: one row per config of a sweep (DESIGN §3 numbers), in table, Markdown, CSV or JSON.

The JSON form is a stable, documented schema (``REPORT_FIELDS``): a list of objects with exactly these keys,
``null`` where a value was not measured. Add fields only at the end of a new schema version.
"""

from __future__ import annotations

import csv
import io
import json
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.device import comparable_state
from edgeprof.report.fit import FIT_FIELDS, attach_fit, fmt_bandwidth, fmt_memory, recommendation_lines
from edgeprof.report.fleet import FLEET_FIELDS, attach_fleet
from edgeprof.report.quality import QUALITY_FIELDS, attach_quality, fmt_quality
from edgeprof.report.serving import (
    SERVING_FIELDS,
    inprocess_defaults,
    is_serving,
    render_serving,
    serving_rows,
)
from edgeprof.report.tables import drop_constant_columns, drop_empty_columns, fit_columns, render_grid
from edgeprof.report.workload import (
    PARAM_KEYS_EXTRA,
    WORKLOAD_FIELDS,
    fmt_tokens_out,
    output_until_eos,
    render_depth_lines,
    workload_fields,
)
from edgeprof.stats import Summary
from edgeprof.storage.models import Measurement, ModelFile, Run, Sweep

REPORT_SCHEMA_VERSION = 9  # v3 (issue 9): quality fields appended; v4 (issue 15): energy basis, interference
# v5 (issue 10): depth, tokens out / EOS, prompt as tokenized, llama.cpp parity parameters in effect
# v6 (issue 9 part B): predicted memory, achieved bandwidth and its share, the recommendation
# v7 (issue 14): the runner, and the serving levels' figures (agent/report/serving.py)
# v8 (issue 13): the device and build of each row (agent/report/fleet.py), for a fleet's central DB
# v9 (issue 10): the flash-attention llama.cpp chose when the plan said "auto" (llama-bench's default)

# (field, JSON type) — the JSON report's contract.
REPORT_FIELDS: tuple[tuple[str, str], ...] = (
    ("sweep_id", "integer"),
    ("run_id", "integer"),
    ("spec_id", "string"),
    ("model_label", "string"),
    ("model_group", "string"),
    ("model_sha256", "string|null"),
    ("quant", "string|null"),
    ("bits_per_weight", "number|null"),
    ("workload", "string"),
    ("n_prompt", "integer|null"),
    ("n_predict", "integer"),
    ("ctx", "integer"),
    ("ngl", "integer"),
    ("threads", "integer"),
    ("n_batch", "integer"),
    ("n_ubatch", "integer"),
    ("flash_attn", "string"),
    ("type_k", "string"),
    ("type_v", "string"),
    ("mmap", "boolean"),
    ("status", "string"),
    ("reason", "string|null"),
    ("attempts", "integer"),
    ("cold_load_ms", "number|null"),
    ("cold_start_ms", "number|null"),
    ("cold_ttft_ms", "number|null"),
    ("pp_tps_median", "number|null"),
    ("pp_tps_min", "number|null"),
    ("pp_tps_max", "number|null"),
    ("pp_tps_n", "integer"),
    ("tg_tps_median", "number|null"),
    ("tg_tps_min", "number|null"),
    ("tg_tps_max", "number|null"),
    ("tg_tps_n", "integer"),
    ("ttft_ms_p50", "number|null"),
    ("ttft_ms_p95", "number|null"),
    ("ttft_n", "integer"),
    ("peak_rss_mb", "number|null"),
    ("reference_label", "string|null"),
    ("agree_prefix_tokens", "integer|null"),
    ("agree_share", "number|null"),
    ("agree_n_tokens", "integer|null"),
    ("tg_ratio_vs_ref", "number|null"),
    ("pp_ratio_vs_ref", "number|null"),
    # telemetry (null where the device has no such sensor: never 0)
    ("start_temp_c", "number|null"),
    ("temp_max_c", "number|null"),
    ("power_source", "string|null"),
    ("decode_power_mw_median", "number|null"),
    ("decode_j_per_token_median", "number|null"),
    ("decode_j_per_token_net_median", "number|null"),
    # Jetson state (null elsewhere): a change mid-sweep makes a row incomparable with the others
    ("peak_shared_mb", "number|null"),
    ("peak_gpu_mem_mb", "number|null"),
    ("power_mode", "string|null"),
    ("clocks_locked", "boolean|null"),
    ("device_state_changed", "boolean|null"),
    # verdicts (agent/verdicts/judge.py): null when the run was recorded without telemetry
    ("throttle_verdict", "string|null"),
    ("stability_verdict", "string|null"),
    # v3, issue 9: KL divergence / same top / perplexity vs the reference (agent/report/quality.py)
    *QUALITY_FIELDS,
    # v4: how the energy figures were measured (agent/telemetry/energy.py precedence; null without energy)
    # and whether other processes competed for the CPU during the steady reps (agent/verdicts/interference.py)
    ("energy_basis", "string|null"),
    ("energy_whole_board", "boolean|null"),
    ("interference_verdict", "string|null"),
    # v5, issue 10: depth, tokens out and EOS, prompt as tokenized, parameters in effect
    # (agent/report/workload.py)
    *WORKLOAD_FIELDS,
    # v6, issue 9 part B: memory predicted before the run, bandwidth, recommendation (agent/report/fit.py)
    *FIT_FIELDS,
    # v7, issue 14: runner, concurrency, and the serving figures; null on in-process rows
    *SERVING_FIELDS,
    # v8, issue 13: where the row was measured: device (hostname, board, L4T, uid), build, sweep uid
    *FLEET_FIELDS,
    # v9, issue 10: "on"/"off" as llama.cpp resolved flash_attn (null: older runs, or llama.cpp said nothing)
    ("flash_attn_effective", "string|null"),
)
FIELD_NAMES = tuple(name for name, _ in REPORT_FIELDS)

_BASE_PARAM_KEYS = ("ctx", "ngl", "threads", "n_batch", "n_ubatch", "flash_attn", "type_k", "type_v", "mmap")
_PARAM_KEYS = (*_BASE_PARAM_KEYS, *PARAM_KEYS_EXTRA)


class ReportError(Exception):
    pass


def latest_sweep_id(session: Session) -> int | None:
    return session.scalar(select(Sweep.id).order_by(Sweep.id.desc()).limit(1))


def agreement(tokens: Sequence[int], reference: Sequence[int]) -> tuple[int, float, int]:
    """(identical tokens before the first divergence, share of identical positions, positions compared).

    Positions are compared over the longer of the two outputs, so a run that stopped early is not rewarded.
    """
    n = max(len(tokens), len(reference))
    if n == 0:
        return 0, 1.0, 0
    prefix = 0
    for a, b in zip(tokens, reference, strict=False):
        if a != b:
            break
        prefix += 1
    same = sum(1 for a, b in zip(tokens, reference, strict=False) if a == b)
    return prefix, same / n, n


def _tokens(run: Run) -> list[int] | None:
    """The output of the run's first steady request (greedy: every rep gives the same tokens)."""
    ordered = sorted(
        run.measurements, key=lambda m: ({"steady": 0, "warmup": 1, "cold": 2}.get(m.kind, 3), m.rep)
    )
    for m in ordered:
        if m.output_tokens_json:
            value = json.loads(m.output_tokens_json)
            if isinstance(value, list):
                # issue 10: never compare what was generated past an (ignored) EOS
                return output_until_eos([int(t) for t in value], m.first_eos_index)
    return None


def _row(run: Run, mf: ModelFile | None) -> dict[str, Any]:
    steady: list[Measurement] = [m for m in run.measurements if m.kind == "steady"]
    cold = next((m for m in run.measurements if m.kind == "cold" and m.rep == 0), None)
    pp = Summary.of(m.pp_tps for m in steady)
    tg = Summary.of(m.tg_tps for m in steady)
    ttft = Summary.of(m.ttft_ms for m in steady)
    workload = json.loads(run.workload_json)
    n_prompt = next((m.n_prompt for m in run.measurements if m.n_prompt is not None), None)
    bpw = mf.size_bytes * 8 / mf.n_params if mf is not None and mf.n_params else None
    temps = [m.temp_max_c for m in steady if m.temp_max_c is not None]
    state = comparable_state(json.loads(run.device_state_json)) if run.device_state_json else None
    state = state or {}
    return {
        "sweep_id": run.sweep_id,
        "run_id": run.id,
        "spec_id": run.spec_id,
        "model_label": run.model_label,
        "model_group": run.model_group,
        "model_sha256": mf.sha256 if mf else None,
        "quant": mf.quant_type if mf else None,
        "bits_per_weight": round(bpw, 3) if bpw is not None else None,
        "workload": run.workload_name,
        "n_prompt": n_prompt,
        "n_predict": int(workload.get("n_predict", 0)),
        "ctx": run.n_ctx,
        "ngl": run.n_gpu_layers,
        "threads": run.n_threads,
        "n_batch": run.n_batch,
        "n_ubatch": run.n_ubatch,
        "flash_attn": run.flash_attn,
        "type_k": run.type_k,
        "type_v": run.type_v,
        "mmap": bool(run.use_mmap),
        "status": run.status,
        "reason": run.reason,
        "attempts": 1,
        "cold_load_ms": cold.load_ms if cold else None,
        "cold_start_ms": cold.cold_start_ms if cold else None,
        "cold_ttft_ms": cold.ttft_ms if cold else None,
        "pp_tps_median": pp.median,
        "pp_tps_min": pp.min,
        "pp_tps_max": pp.max,
        "pp_tps_n": pp.n,
        "tg_tps_median": tg.median,
        "tg_tps_min": tg.min,
        "tg_tps_max": tg.max,
        "tg_tps_n": tg.n,
        "ttft_ms_p50": ttft.p50,
        "ttft_ms_p95": ttft.p95,
        "ttft_n": ttft.n,
        "peak_rss_mb": run.peak_rss_mb,
        "reference_label": None,
        "agree_prefix_tokens": None,
        "agree_share": None,
        "agree_n_tokens": None,
        "tg_ratio_vs_ref": None,
        "pp_ratio_vs_ref": None,
        "start_temp_c": run.start_temp_c,
        "temp_max_c": max(temps) if temps else None,
        "power_source": run.energy_sources or run.power_source,
        "energy_basis": run.energy_basis,
        "energy_whole_board": run.energy_whole_board,
        "decode_power_mw_median": Summary.of(m.decode_power_mw for m in steady).median,
        "decode_j_per_token_median": Summary.of(m.decode_j_per_token for m in steady).median,
        "decode_j_per_token_net_median": Summary.of(m.decode_j_per_token_net for m in steady).median,
        "peak_shared_mb": run.peak_shared_mb,
        "peak_gpu_mem_mb": run.peak_gpu_mem_mb,
        "power_mode": state.get("power_mode"),
        "clocks_locked": state.get("clocks_locked"),
        "device_state_changed": run.device_state_changed,
        **workload_fields(run, steady),
    }


def build_rows(
    session: Session, sweep_id: int | None = None, include_serving: bool = False
) -> list[dict[str, Any]]:
    """The report rows of a sweep (default: the latest), with quality and speed relative to the reference.
    ``include_serving``: the serving runner's rows too, after the in-process ones (issue 14)."""
    if sweep_id is None:
        sweep_id = latest_sweep_id(session)
        if sweep_id is None:
            raise ReportError(
                "no sweep in this database yet; run `edgeprof run PLAN.toml` or `edgeprof demo`"
            )
    sweep = session.get(Sweep, sweep_id)
    if sweep is None:
        raise ReportError(f"no sweep with id {sweep_id} in this database")
    runs = list(session.scalars(select(Run).where(Run.sweep_id == sweep_id).order_by(Run.id)))
    latest: dict[str, Run] = {}
    attempts: dict[str, int] = {}
    for run in runs:
        latest[run.spec_id] = run  # a spec redone after an interruption: the last attempt speaks
        attempts[run.spec_id] = attempts.get(run.spec_id, 0) + 1
    ordered = sorted(latest.values(), key=lambda r: r.seq)
    # issue 14: serving levels are another scenario; they never enter the references or ratios below
    serving_runs = [r for r in ordered if is_serving(r)]
    ordered = [r for r in ordered if not is_serving(r)]
    rows: list[dict[str, Any]] = []
    tokens_of: dict[int, list[int] | None] = {}
    for run in ordered:
        row = _row(run, run.model_file)
        row["attempts"] = attempts[run.spec_id]
        effective = json.loads(run.effective_json) if run.effective_json else {}
        row["_gpu_offload_supported"] = effective.get("gpu_offload_supported")  # for notes, not the schema
        row["flash_attn_effective"] = effective.get("flash_attn_effective")
        rows.append(row)
        tokens_of[run.id] = _tokens(run)

    # Reference per (model group, workload): the highest-precision variant (most bits per weight) measured.
    # Only a variant that produced output can be a reference: an F16 that ran out of memory is not one.
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        key = (row["model_group"], row["workload"])
        if row["bits_per_weight"] is None or row["status"] != "ok":
            continue
        cur = best.get(key)
        if cur is None or row["bits_per_weight"] > cur["bits_per_weight"]:
            best[key] = row
    for row in rows:
        ref_model = best.get((row["model_group"], row["workload"]))
        if ref_model is None:
            continue
        row["reference_label"] = ref_model["model_label"]
        candidates = [
            r
            for r in rows
            if r["model_label"] == ref_model["model_label"]
            and r["workload"] == row["workload"]
            and r["status"] == "ok"
        ]
        same_params = [r for r in candidates if all(r[k] == row[k] for k in _PARAM_KEYS)]
        pool = same_params or candidates
        if not pool:
            continue
        ref = pool[0]
        mine, theirs = tokens_of.get(row["run_id"]), tokens_of.get(ref["run_id"])
        if mine is not None and theirs is not None:
            prefix, share, n = agreement(mine, theirs)
            row["agree_prefix_tokens"], row["agree_share"], row["agree_n_tokens"] = prefix, round(share, 4), n
        if same_params:
            for metric, out in (("tg_tps_median", "tg_ratio_vs_ref"), ("pp_tps_median", "pp_ratio_vs_ref")):
                if row[metric] is not None and ref[metric]:
                    row[out] = round(row[metric] / ref[metric], 4)
    from edgeprof.verdicts.judge import attach_verdicts

    attach_verdicts(session, rows)
    for row in rows:
        row.setdefault("throttle_verdict", None)
        row.setdefault("stability_verdict", None)
        row.setdefault("interference_verdict", None)
    attach_quality(session, rows)
    attach_fit(session, rows)  # after the quality fields: the recommendation weighs them
    for row in rows:
        inprocess_defaults(row)
    if include_serving:
        rows += serving_rows(session, serving_runs, attempts, FIELD_NAMES)
    attach_fleet(session, rows)  # issue 13: device and build of every row, serving rows included
    return rows


def fmt_value(value: Any, digits: int = 1) -> str:
    """A report cell: '—' for not measured, floats to ``digits`` places (shared by table, md and HTML)."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def fmt_spread(row: Mapping[str, Any], prefix: str) -> str:
    """'median [min–max] n=N' of a metric's steady reps, '—' when not measured."""
    if row[f"{prefix}_median"] is None:
        return "—"
    return (
        f"{row[prefix + '_median']:.1f} [{row[prefix + '_min']:.1f}–{row[prefix + '_max']:.1f}] "
        f"n={row[prefix + '_n']}"
    )


TABLE_COLUMNS = (
    "model",
    "quant",
    "ctx",
    "depth",
    "ngl",
    "thr",
    "workload",
    "tok out/n_pred",
    "status",
    "load ms",
    "cold ms",
    "pp t/s med [min–max]",
    "tg t/s med [min–max]",
    "TTFT p50/p95 ms",
    "RSS MiB",
    "mem pred/peak MiB",
    "BW GB/s (%)",
    "agree vs ref",
    "KLD / same-top",
    "tg×ref",
    "pp×ref",
    "start/max °C",
    "W dec",
    "J/tok net",
    "throttle",
    "stability",
    "interference",
)


def fmt_agreement(row: Mapping[str, Any], suffix: str = "") -> str:
    """'reference', or the share of tokens agreeing with the reference and the identical prefix."""
    if row.get("agree_share") is None:
        return "—"
    if row["model_label"] == row["reference_label"]:
        return "reference"
    share = row["agree_share"] * 100
    return f"{share:.0f}% ({row['agree_prefix_tokens']}/{row['agree_n_tokens']}{suffix})"


def _cells(row: dict[str, Any]) -> list[str]:
    status = row["status"] if row["status"] == "ok" else f"{row['status'].upper()}"
    agree = fmt_agreement(row, " prefix")
    ttft = "—" if row["ttft_ms_p50"] is None else f"{row['ttft_ms_p50']:.1f}/{row['ttft_ms_p95']:.1f}"
    return [
        row["model_label"],
        fmt_value(row["quant"]),
        str(row["ctx"]),
        fmt_value(row.get("depth")),
        str(row["ngl"]),
        str(row["threads"]),
        row["workload"],
        fmt_tokens_out(row),
        status,
        fmt_value(row["cold_load_ms"]),
        fmt_value(row["cold_start_ms"]),
        fmt_spread(row, "pp_tps"),
        fmt_spread(row, "tg_tps"),
        ttft,
        fmt_value(row["peak_rss_mb"]),
        fmt_memory(row),
        fmt_bandwidth(row),
        agree,
        fmt_quality(row),
        fmt_value(row["tg_ratio_vs_ref"], 2),
        fmt_value(row["pp_ratio_vs_ref"], 2),
        f"{fmt_value(row['start_temp_c'])}/{fmt_value(row['temp_max_c'])}",
        fmt_value(
            row["decode_power_mw_median"] / 1000.0 if row["decode_power_mw_median"] is not None else None, 2
        ),
        fmt_value(row["decode_j_per_token_net_median"], 4),
        fmt_value(row.get("throttle_verdict")),
        fmt_value(row.get("stability_verdict")),
        fmt_value(row.get("interference_verdict")),
    ]


def _failures(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        f"{r['model_label']} ctx={r['ctx']} ngl={r['ngl']} wl={r['workload']}: {r['status']}: {r['reason']}"
        for r in rows
        if r["status"] != "ok"
    ]
    # One line, not one per row: the default (-ngl all, as llama-bench) asks for offload on every config,
    # and on a CPU-only build every one of them measured the CPU.
    cpu_only = [r for r in rows if r["ngl"] > 0 and r.get("_gpu_offload_supported") is False]
    if cpu_only:
        ngls = ", ".join(str(n) for n in sorted({r["ngl"] for r in cpu_only}))
        out.append(
            f"{len(cpu_only)} config(s) asked for -ngl {ngls}, but this llama.cpp build cannot offload to "
            "a GPU: those runs measured the CPU"
        )
    out += [
        f"{r['model_label']} ctx={r['ctx']} ngl={r['ngl']}: device state changed before this config "
        f"(power mode {r['power_mode']}, clocks locked {r['clocks_locked']}): "
        "not comparable with earlier rows"
        for r in rows
        if r["device_state_changed"]
    ]
    out += [stability_note(r) for r in rows if stability_note(r)]
    return out


def stability_note(row: Mapping[str, Any]) -> str:
    """Why an ``unstable`` row is unstable, as far as the interference verdict tells: other processes
    competing for the CPU during its steady reps, or not (then the cause is in the device or the model)."""
    if row.get("stability_verdict") != "unstable":
        return ""
    where = f"{row['model_label']} ctx={row['ctx']} ngl={row['ngl']}"
    interference = row.get("interference_verdict")
    if interference == "contended":
        return (
            f"{where}: unstable while other processes competed for the CPU (interference: contended): "
            "rerun on a quiet machine before trusting its median"
        )
    if interference == "quiet":
        return f"{where}: unstable on a quiet machine (no competing CPU work): look at thermals and clocks"
    return f"{where}: unstable; whether other work competed for the CPU was not measured"


# Short names for `report --columns`, one per TABLE_COLUMNS entry, in the same order.
COLUMN_KEYS = (
    "model", "quant", "ctx", "depth", "ngl", "thr", "workload", "tokens", "status", "load", "cold", "pp",
    "tg", "ttft", "rss", "mem", "bw", "agree", "kld", "tg_ref", "pp_ref", "temp", "power", "j_tok",
    "throttle", "stability", "interference",
)  # fmt: skip
# Never left out to fit a terminal: without them a row does not say what it is or how fast it ran.
ESSENTIAL_KEYS = ("model", "quant", "ctx", "status", "tg")
# Left out first when the table is wider than the terminal (least telling first); each one is named.
FIT_DROP_ORDER = (
    "agree", "pp_ref", "bw", "load", "tokens", "rss", "depth", "ngl", "thr", "interference", "throttle",
    "mem", "cold", "pp", "workload", "ttft", "temp", "power", "j_tok", "tg_ref", "stability", "kld",
)  # fmt: skip


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


def table_lines(
    rows: list[dict[str, Any]],
    *,
    width: int | None = None,
    columns: tuple[str, ...] | None = None,
    wide: bool = False,
) -> list[str]:
    """The per-config table. Columns without data are left out (off a Jetson: temperatures, power, J/token),
    columns with one value in every row are said once above it (unless ``wide``), and with ``width`` the
    least telling columns are left out until it fits, named below it. ``columns`` picks exact columns."""
    key_of_header = dict(zip(TABLE_COLUMNS, COLUMN_KEYS, strict=True))
    headers = list(TABLE_COLUMNS)
    cells = [_cells(r) for r in rows]
    if columns is not None:
        idx = [COLUMN_KEYS.index(k) for k in columns]
        return render_grid([headers[i] for i in idx], [[c[i] for i in idx] for c in cells])
    essential = [h for h, k in key_of_header.items() if k in ESSENTIAL_KEYS]
    common: list[tuple[str, str]] = []
    if wide:
        headers, cells, _ = drop_empty_columns(headers, cells, keep=essential)
    else:
        headers, cells, common = drop_constant_columns(headers, cells, keep=essential)
    dropped: list[str] = []
    if width is not None and not wide:
        order = [h for k in FIT_DROP_ORDER for h, kk in key_of_header.items() if kk == k]
        headers, cells, dropped = fit_columns(headers, cells, width, order)
    lines = []
    if common:
        lines += ["every row: " + "  ".join(f"{h}={v}" for h, v in common)]
    lines += render_grid(headers, cells)
    if dropped:
        names = ", ".join(key_of_header[h] for h in dropped)
        lines += [f"(left out to fit {width} columns: {names}; --wide shows every column, --columns picks)"]
    if width is not None:
        lines = [part for line in lines for part in _wrap_line(line, width)]
    return lines


def render_table(
    rows: list[dict[str, Any]],
    *,
    width: int | None = None,
    columns: tuple[str, ...] | None = None,
    wide: bool = False,
) -> str:
    everything, rows = rows, [r for r in rows if r.get("runner", "llama-cpp") == "llama-cpp"]
    lines = table_lines(rows, width=width, columns=columns, wide=wide)
    recs = recommendation_lines(rows)  # issue 9: the report opens with the answer
    if recs:
        lines = [*recs, "", *lines]
    if rows and rows[0].get("_bw_note"):
        lines += ["", str(rows[0]["_bw_note"])]
    fails = _failures(rows)
    if fails:
        lines += ["", f"{len(fails)} note(s): failed configs, device changes, instability:"]
        lines += [f"  {f}" for f in fails]
    depth_lines = render_depth_lines(rows)
    if depth_lines:
        lines += ["", "tg t/s and TTFT against context depth (steady reps):"]
        lines += [f"  {x}" for x in depth_lines]
    lines += ["", "pp/tg: steady reps only (llama.cpp counters); load/cold: first start of a fresh process."]
    lines += render_serving(everything)  # issue 14: the HTTP API, apart
    if width is not None:  # the notes around the table wrap to the terminal too
        lines = [part for line in lines for part in _wrap_line(line, width)]
    return "\n".join(lines)


def _wrap_line(line: str, width: int) -> list[str]:
    if len(line) <= width:
        return [line]
    indent = " " * (len(line) - len(line.lstrip()) + 2)
    return textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False) or [line]


def render_markdown(rows: list[dict[str, Any]]) -> str:
    def esc(text: str) -> str:
        return text.replace("|", "\\|")

    everything, rows = rows, [r for r in rows if r.get("runner", "llama-cpp") == "llama-cpp"]
    headers, cells, _ = drop_empty_columns(list(TABLE_COLUMNS), [_cells(r) for r in rows])
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    recs = recommendation_lines(rows)  # issue 9: the report opens with the answer
    if recs:
        lines = [*(f"- {esc(x.strip())}" for x in recs), "", *lines]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in cells]
    fails = _failures(rows)
    if fails:
        lines += ["", "**Failed configs and device changes:**", ""] + [f"- {esc(f)}" for f in fails]
    depth_lines = render_depth_lines(rows)  # issue 10: the curve users ask for
    if depth_lines:
        lines += ["", "**tg t/s and TTFT against context depth (steady reps):**", "", "```"]
        lines += [*depth_lines, "```"]
    lines += render_serving(everything, markdown=True)  # issue 14: the HTTP API, apart
    return "\n".join(lines)


def render_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(FIELD_NAMES), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row[k] is None else row[k]) for k in FIELD_NAMES})
    return buf.getvalue()


def render_json(rows: list[dict[str, Any]]) -> str:
    return json.dumps([{k: row[k] for k in FIELD_NAMES} for row in rows], indent=2, allow_nan=False)


RENDERERS = {"table": render_table, "md": render_markdown, "csv": render_csv, "json": render_json}
