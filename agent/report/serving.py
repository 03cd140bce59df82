"""The serving runner in the report (issue 14): one row per serving level, kept apart from the in-process rows
(a server's TTFT under load is never averaged with an in-process tg t/s), and, where a sweep has both runners
for the same model / ctx / ngl / workload, the two side by side: single-stream (c = 1) TPOT beside in-process
decode ms/token, server TTFT beside in-process TTFT."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.storage.models import Run, ServingLevel

# v7 (issue 14), appended to the report's JSON contract. Null on in-process rows (runner "llama-cpp").
SERVING_FIELDS: tuple[tuple[str, str], ...] = (
    ("runner", "string"),
    ("concurrency", "integer|null"),
    ("request_rate", "number|null"),
    ("serving_requests", "integer|null"),
    ("serving_ok", "integer|null"),
    ("serving_error_rate", "number|null"),
    ("serving_timeouts", "integer|null"),
    ("serving_rejected", "integer|null"),
    ("serving_max_deferred", "number|null"),
    ("serving_ready_ms", "number|null"),
    ("serving_cold_start_ms", "number|null"),
    ("serving_slot_n_ctx", "integer|null"),
    ("serving_ttft_ms_p50", "number|null"),
    ("serving_ttft_ms_p90", "number|null"),
    ("serving_ttft_ms_p99", "number|null"),
    ("serving_tpot_ms_p50", "number|null"),
    ("serving_tpot_ms_p99", "number|null"),
    ("serving_tpot_e2e_ms_p50", "number|null"),
    ("serving_itl_ms_p50", "number|null"),
    ("serving_itl_ms_p99", "number|null"),
    ("serving_e2el_ms_p50", "number|null"),
    ("serving_e2el_ms_p99", "number|null"),
    ("serving_request_throughput_rps", "number|null"),
    ("serving_output_tps", "number|null"),
    ("serving_total_tps", "number|null"),
    ("serving_goodput_rps", "number|null"),
    ("serving_server_ms_per_token_p50", "number|null"),
    ("serving_client_minus_server_ttft_ms_p50", "number|null"),
    ("serving_output_j_per_token", "number|null"),
)
SERVING_FIELD_NAMES = tuple(name for name, _ in SERVING_FIELDS)


def is_serving(run: Run) -> bool:
    return (run.runner or "llama-cpp") != "llama-cpp"


def inprocess_defaults(row: dict[str, Any]) -> None:
    """The serving fields of an in-process row: its runner, the rest null (not measured by this runner)."""
    for name in SERVING_FIELD_NAMES:
        row.setdefault(name, None)
    row["runner"] = "llama-cpp"


def _p(stats: dict[str, Any], metric: str, key: str) -> Any:
    dist = stats.get(metric)
    return dist.get(key) if isinstance(dist, dict) else None


def serving_fields(run: Run, level: ServingLevel | None) -> dict[str, Any]:
    out: dict[str, Any] = dict.fromkeys(SERVING_FIELD_NAMES)
    out["runner"] = run.runner
    out["concurrency"] = run.concurrency
    out["request_rate"] = run.request_rate
    if level is None:
        return out
    stats = json.loads(level.stats_json) if level.stats_json else {}
    out.update(
        serving_requests=level.n_requests,
        serving_ok=level.n_ok,
        serving_error_rate=stats.get("error_rate"),
        serving_timeouts=level.n_timeouts,
        serving_rejected=level.n_rejected,
        serving_max_deferred=level.max_deferred,
        serving_ready_ms=level.ready_ms,
        serving_cold_start_ms=level.cold_start_ms,
        serving_slot_n_ctx=level.slot_n_ctx,
        serving_ttft_ms_p50=level.ttft_p50_ms,
        serving_ttft_ms_p90=_p(stats, "ttft_ms", "p90"),
        serving_ttft_ms_p99=level.ttft_p99_ms,
        serving_tpot_ms_p50=level.tpot_p50_ms,
        serving_tpot_ms_p99=level.tpot_p99_ms,
        serving_tpot_e2e_ms_p50=_p(stats, "tpot_e2e_ms", "p50"),
        serving_itl_ms_p50=level.itl_p50_ms,
        serving_itl_ms_p99=level.itl_p99_ms,
        serving_e2el_ms_p50=level.e2el_p50_ms,
        serving_e2el_ms_p99=level.e2el_p99_ms,
        serving_request_throughput_rps=level.request_throughput_rps,
        serving_output_tps=level.output_tps,
        serving_total_tps=level.total_tps,
        serving_goodput_rps=level.goodput_rps,
        serving_server_ms_per_token_p50=_p(stats, "server_ms_per_token", "p50"),
        serving_client_minus_server_ttft_ms_p50=_p(stats, "ttft_minus_server_prompt_ms", "p50"),
        serving_output_j_per_token=level.output_j_per_token,
    )
    return out


def serving_rows(
    session: Session, runs: list[Run], attempts: dict[str, int], all_fields: tuple[str, ...]
) -> list[dict[str, Any]]:
    """Report rows of the serving runs (the latest attempt per spec), every report field present."""
    from edgeprof.report.rows import _row

    rows: list[dict[str, Any]] = []
    for run in runs:
        row = _row(run, run.model_file)
        row["attempts"] = attempts.get(run.spec_id, 1)
        level = session.scalar(select(ServingLevel).where(ServingLevel.run_id == run.id))
        row.update(serving_fields(run, level))
        for name in all_fields:
            row.setdefault(name, None)
        rows.append(row)
    return rows


def _f(value: Any, digits: int = 1) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


SERVING_COLUMNS = (
    "model", "quant", "ctx", "ngl", "workload", "c", "rate", "status", "ok/n", "ready ms", "cold ms",
    "TTFT p50/p99 ms", "TPOT p50/p99 ms", "ITL p50/p99 ms", "E2EL p50/p99 ms", "req/s", "out tok/s",
    "goodput/s", "deferred", "slot ctx",
)  # fmt: skip


def _serving_cells(r: dict[str, Any]) -> list[str]:
    def pair(a: str, b: str) -> str:
        return "—" if r[a] is None else f"{_f(r[a])}/{_f(r[b])}"

    ok_n = "—" if r["serving_requests"] is None else f"{r['serving_ok']}/{r['serving_requests']}"
    return [
        str(r["model_label"]),
        _f(r["quant"]),
        str(r["ctx"]),
        str(r["ngl"]),
        str(r["workload"]),
        _f(r["concurrency"]),
        _f(r["request_rate"], 2),
        r["status"] if r["status"] == "ok" else str(r["status"]).upper(),
        ok_n,
        _f(r["serving_ready_ms"], 0),
        _f(r["serving_cold_start_ms"], 0),
        pair("serving_ttft_ms_p50", "serving_ttft_ms_p99"),
        pair("serving_tpot_ms_p50", "serving_tpot_ms_p99"),
        pair("serving_itl_ms_p50", "serving_itl_ms_p99"),
        pair("serving_e2el_ms_p50", "serving_e2el_ms_p99"),
        _f(r["serving_request_throughput_rps"], 2),
        _f(r["serving_output_tps"]),
        _f(r["serving_goodput_rps"], 2),
        _f(r["serving_max_deferred"], 0),
        _f(r["serving_slot_n_ctx"]),
    ]


SIDE_COLUMNS = (
    "model", "ctx", "ngl", "workload", "in-process decode ms/tok", "API TPOT p50 ms (c=1)",
    "API server ms/tok", "in-process TTFT p50 ms", "API TTFT p50 ms (c=1)",
)  # fmt: skip


def side_by_side(rows: list[dict[str, Any]]) -> list[list[str]]:
    """In-process vs API for the same model / ctx / ngl / workload: the API at concurrency 1, closed loop."""
    out: list[list[str]] = []
    inproc = {
        (r["model_label"], r["ctx"], r["ngl"], r["workload"]): r
        for r in rows
        if r.get("runner") == "llama-cpp" and r["status"] == "ok"
    }
    for r in rows:
        if r.get("runner") in (None, "llama-cpp") or r["concurrency"] != 1 or r["request_rate"] is not None:
            continue
        cli = inproc.get((r["model_label"], r["ctx"], r["ngl"], r["workload"]))
        if cli is None:
            continue
        decode_ms = 1000.0 / cli["tg_tps_median"] if cli["tg_tps_median"] else None
        out.append(
            [
                str(r["model_label"]),
                str(r["ctx"]),
                str(r["ngl"]),
                str(r["workload"]),
                _f(decode_ms, 2),
                _f(r["serving_tpot_ms_p50"], 2),
                _f(r["serving_server_ms_per_token_p50"], 2),
                _f(cli["ttft_ms_p50"]),
                _f(r["serving_ttft_ms_p50"]),
            ]
        )
    return out


def _grid(header: tuple[str, ...], body: list[list[str]]) -> list[str]:
    cells = [list(header), *body]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    lines = ["  ".join(c[i].ljust(widths[i]) for i in range(len(widths))).rstrip() for c in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def _md(header: tuple[str, ...], body: list[list[str]]) -> list[str]:
    def esc(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(esc(c) for c in row) + " |" for row in body]


def render_serving(rows: list[dict[str, Any]], markdown: bool = False) -> list[str]:
    """The serving section and the side-by-side table; nothing when the sweep has no serving rows."""
    serving = [r for r in rows if r.get("runner") not in (None, "llama-cpp")]
    if not serving:
        return []
    table = _md if markdown else _grid
    title = "**HTTP API (llama-server, streamed):**" if markdown else "HTTP API (llama-server, streamed):"
    lines = ["", title, "", *table(SERVING_COLUMNS, [_serving_cells(r) for r in serving])]
    fails = [
        f"{r['model_label']} ctx={r['ctx']} c={r['concurrency']}: {r['status']}: {r['reason']}"
        for r in serving
        if r["status"] != "ok"
    ]
    if fails:
        lines += ["", f"{len(fails)} failed serving level(s):", *(f"  {f}" for f in fails)]
    lines += [
        "",
        "TTFT/ITL/E2EL: client-side, every measured request (warm-ups and the cold request excluded), "
        "nearest rank; TPOT = (E2EL - TTFT)/(n - 1) (vLLM's); output tokens from the server's count.",
    ]
    side = side_by_side(rows)
    if side:
        side_title = "In-process (CLI) vs HTTP API, same model/ctx/ngl/workload:"
        lines += ["", f"**{side_title}**" if markdown else side_title, ""]
        lines += table(SIDE_COLUMNS, side)
    return lines
