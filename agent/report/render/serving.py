"""The serving section of the terminal and Markdown reports: the HTTP API levels, their failures, and the
in-process vs API table; nothing when the sweep has no serving rows."""

from __future__ import annotations

from typing import Any

from edgeprof.report.cells import RUNNING, fmt_value
from edgeprof.report.columns import Format, cells, shown
from edgeprof.report.serving import is_serving_row, serving_title, token_count_note, versus_rows
from edgeprof.report.tables import md_table, render_grid

UNASKED_TITLE = (
    "levels the server's prompt cache served although the plan did not ask for it (TTFT measured the cache, "
    "not the model; the server ignores cache_prompt: false):"
)
VERSUS_TITLE = "In-process (CLI) vs HTTP API, same model/ctx/ngl/workload:"
SERVING_NOTE = (
    "TTFT/ITL/E2EL: client-side, every measured request (warm-ups and the cold request excluded), "
    "nearest rank; TPOT = (E2EL - TTFT)/(n - 1) (vLLM's); {tokens}."
)


def serving_lines(rows: list[dict[str, Any]], markdown: bool = False) -> list[str]:
    serving = [r for r in rows if is_serving_row(r)]
    if not serving:
        return []
    table = md_table if markdown else render_grid
    fmt: Format = "md" if markdown else "table"
    columns = shown(fmt, "serving", rows=serving)
    title = serving_title(serving) + ":"
    lines = ["", f"**{title}**" if markdown else title, ""]
    lines += table([c.header for c in columns], [cells(columns, r) for r in serving])
    lines += level_notes(serving)
    lines += ["", SERVING_NOTE.format(tokens=token_count_note(serving))]
    versus = versus_rows(rows)
    if versus:
        columns = shown(fmt, "versus")
        lines += ["", f"**{VERSUS_TITLE}**" if markdown else VERSUS_TITLE, ""]
        lines += table([c.header for c in columns], [cells(columns, r) for r in versus])
    return lines


def _where(r: dict[str, Any]) -> str:
    return f"{r['model_label']} ctx={fmt_value(r['ctx'])} c={r['concurrency']}"


def level_notes(serving: list[dict[str, Any]]) -> list[str]:
    """Below the levels: the failed ones with their reasons (failures counted by reason), failures an ok
    level tolerated within ``max_error_rate``, and levels the server's cache served unasked."""
    lines: list[str] = []
    fails = [
        f"{_where(r)}: {r['status']}: {r['reason']}"
        for r in serving
        if r["status"] not in ("ok", RUNNING)  # one still running has not failed
    ]
    if fails:
        lines += ["", f"{len(fails)} failed serving level(s):", *(f"  {f}" for f in fails)]
    tolerated = [
        f"{_where(r)}: {r['serving_errors_by_reason']}"
        for r in serving
        if r["status"] == "ok" and r.get("serving_errors_by_reason")
    ]
    if tolerated:
        lines += ["", "failed requests within the plan's max_error_rate:", *(f"  {t}" for t in tolerated)]
    cached = [
        f"{_where(r)}: {r['serving_cached_prompt_tokens']} of "
        f"{fmt_value(r['serving_cached_prompt_tokens_of'])} prompt tokens"
        for r in serving
        if r.get("serving_prompt_cache") == "unasked"
    ]
    if cached:
        lines += ["", UNASKED_TITLE, *(f"  {c}" for c in cached)]
    return lines
