"""The serving runner's rows: one row per serving level, kept apart from the in-process rows (a server's
TTFT under load is never averaged with an in-process tg t/s), and, where a sweep has both runners for the
same model / ctx / ngl / workload, the ``versus`` rows that put them side by side: single-stream (c = 1)
TPOT beside in-process decode ms/token, server TTFT beside in-process TTFT.

The printers are in ``edgeprof.report.render``; the columns in ``edgeprof.report.columns``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.report.columns import COLUMNS, SERVING, is_serving_runner
from edgeprof.report.run_row import base_row
from edgeprof.runners.loadgen import reasons_text
from edgeprof.runners.registry import kind_of
from edgeprof.stats import Summary, nearest_rank
from edgeprof.storage.models import Run, ServingLevel, ServingRequest, Verdict
from edgeprof.verdicts import verdicts_by_run

# The fields only a serving level has (null on in-process rows).
SERVING_FIELD_NAMES = tuple(c.name for c in COLUMNS if c.fmt is None and c.rows == SERVING)



def _title(runner: str) -> str:
    """How a serving runner is named above its table (``RunnerInfo.title``)."""
    return kind_of(runner).title or runner


def _token_source(runner: str) -> str:
    """Where a serving runner's output-token counts come from (``RunnerInfo.token_source``)."""
    return kind_of(runner).token_source or "the server"


def _runners(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted({str(r.get("runner")) for r in rows if is_serving_runner(r.get("runner"))})


def serving_title(rows: Sequence[Mapping[str, Any]]) -> str:
    """'HTTP API (llama-server, streamed)', naming the runners the rows were measured with."""
    names = [_title(r) for r in _runners(rows)] or ["llama-server"]
    return f"HTTP API ({' and '.join(names)}, streamed)"


def token_count_note(rows: Sequence[Mapping[str, Any]]) -> str:
    """Where the rows' output tokens were counted, per runner."""
    runners = _runners(rows) or ["llama-server"]
    if len(runners) == 1:
        return f"output tokens: {_token_source(runners[0])}"
    return "output tokens: " + "; ".join(f"{r}: {_token_source(r)}" for r in runners)


def is_serving(run: Run) -> bool:
    return is_serving_runner(run.runner)


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
        serving_errors_by_reason=reasons_text(stats.get("errors_by_reason") or {}) or None,
        serving_cached_prompt_tokens=stats.get("cached_prompt_tokens"),
        serving_cached_prompt_tokens_of=stats.get("cache_prompt_tokens_of"),
        serving_prompt_cache=prompt_cache_state(stats),
        serving_good=stats.get("n_good"),
        mem_predicted_mb=run.mem_predicted_mb if run.mem_predicted_mb is not None else _budget_mb(level),
        mem_available_mb=run.mem_available_mb,
    )
    return out


def prompt_cache_state(stats: Mapping[str, Any]) -> str | None:
    """"on" (the plan asked for the server's prompt cache), "unasked" (it served prompt tokens although the
    plan did not), "off"; None for a level stored before edgeprof read the cache's count."""
    if "prompt_cache_asked" not in stats:
        return None
    if stats["prompt_cache_asked"]:
        return "on"
    return "unasked" if stats.get("prompt_cache_unasked") else "off"


def _budget_mb(level: ServingLevel) -> float | None:
    """The server's predicted memory from the executor's budget (slots x ctx), where the run has none."""
    budget = json.loads(level.kv_budget_json) if level.kv_budget_json else {}
    value = budget.get("predicted_mb")
    return float(value) if isinstance(value, (int, float)) else None


def token_fields(session: Session, run: Run) -> dict[str, Any]:
    """Prompt and output tokens of the level's measured successful requests, as the server counted them:
    the prompt's median request (a text prompt's per-request prefix can move it by a token), the output's
    median and minimum (below ``n_predict`` where a request stopped early)."""
    query = select(ServingRequest.prompt_tokens, ServingRequest.output_tokens).where(
        ServingRequest.run_id == run.id, ServingRequest.kind == "measured", ServingRequest.status == "ok"
    )
    requests = list(session.execute(query))
    prompts = sorted(p for p, _ in requests if p is not None)
    outs = [o for _, o in requests if o is not None]
    median_prompt = nearest_rank(prompts, 0.5)
    return {
        "prompt_n_tokens": int(median_prompt) if median_prompt is not None else None,
        "tokens_out_median": Summary.of(outs).median,
        "tokens_out_min": min(outs) if outs else None,
    }


def verdict_fields(found: Mapping[str, Verdict]) -> dict[str, Any]:
    """A level's stability and interference verdicts (``agent/verdicts/serving.py``). Its throttle verdict
    is not shown: it is judged over the server's load phase, not over the level."""
    return {
        kind: found[name].value if name in found else None
        for kind, name in (("stability_verdict", "stability"), ("interference_verdict", "interference"))
    }


# The llama.cpp settings a plan gives a server edgeprof starts. A server it did not start keeps its own:
# the plan's values on its row would read as measured settings, so they are NULL there, and ctx is the
# slot's context where the server reports it.
SERVER_OWN_SETTINGS = ("ngl", "threads", "n_batch", "n_ubatch", "flash_attn", "type_k", "type_v", "mmap")


def foreign_settings(level: ServingLevel | None) -> dict[str, Any]:
    """What a server edgeprof did not start says of its settings (its slot's ctx), NULL for the rest."""
    return {"ctx": level.slot_n_ctx if level is not None else None, **dict.fromkeys(SERVER_OWN_SETTINGS)}


def serving_rows(session: Session, runs: list[Run], attempts: dict[str, int]) -> list[dict[str, Any]]:
    """Report rows of the serving runs (the latest attempt per spec)."""
    rows: list[dict[str, Any]] = []
    verdicts = verdicts_by_run(session, [run.id for run in runs])
    for run in runs:
        row = base_row(run, run.model_file)
        row["attempts"] = attempts.get(run.spec_id, 1)
        level = session.scalar(select(ServingLevel).where(ServingLevel.run_id == run.id))
        row.update(serving_fields(run, level))
        if kind_of(run.runner).foreign:
            row.update(foreign_settings(level))
        row.update(token_fields(session, run))
        row.update(verdict_fields(verdicts.get(run.id, {})))
        rows.append(row)
    return rows


def is_serving_row(row: Mapping[str, Any]) -> bool:
    return is_serving_runner(row.get("runner"))


def versus_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """In-process vs API for the same model / ctx / ngl / workload: each serving level at concurrency 1,
    closed loop, with its in-process config's decode ms/token and TTFT beside it."""
    out: list[dict[str, Any]] = []
    inproc = {
        (r["model_label"], r["ctx"], r["ngl"], r["workload"]): r
        for r in rows
        if not is_serving_row(r) and r["status"] == "ok"
    }
    for r in rows:
        if not is_serving_row(r) or r["concurrency"] != 1 or r["request_rate"] is not None:
            continue
        cli = inproc.get((r["model_label"], r["ctx"], r["ngl"], r["workload"]))
        if cli is None:
            continue
        decode_ms = 1000.0 / cli["tg_tps_median"] if cli["tg_tps_median"] else None
        out.append(
            {**r, "inprocess_decode_ms_per_token": decode_ms, "inprocess_ttft_ms_p50": cli["ttft_ms_p50"]}
        )
    return out
