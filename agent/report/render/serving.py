"""The serving section of the terminal and Markdown reports: the HTTP API levels, their failures, and the
in-process vs API table; nothing when the sweep has no serving rows."""

from __future__ import annotations

from typing import Any

from edgeprof.report.cells import RUNNING, fmt_value
from edgeprof.report.columns import Format, cells, shown
from edgeprof.report.serving import is_serving_row, serving_title, token_count_note, versus_rows
from edgeprof.report.tables import md_table, render_grid

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
    fails = [
        f"{r['model_label']} ctx={fmt_value(r['ctx'])} c={r['concurrency']}: {r['status']}: {r['reason']}"
        for r in serving
        if r["status"] not in ("ok", RUNNING)  # one still running has not failed
    ]
    if fails:
        lines += ["", f"{len(fails)} failed serving level(s):", *(f"  {f}" for f in fails)]
    tolerated = [
        f"{r['model_label']} ctx={fmt_value(r['ctx'])} c={r['concurrency']}: {r['serving_errors_by_reason']}"
        for r in serving
        if r["status"] == "ok" and r.get("serving_errors_by_reason")
    ]
    if tolerated:
        lines += ["", "failed requests within the plan's max_error_rate:", *(f"  {t}" for t in tolerated)]
    lines += ["", SERVING_NOTE.format(tokens=token_count_note(serving))]
    versus = versus_rows(rows)
    if versus:
        columns = shown(fmt, "versus")
        lines += ["", f"**{VERSUS_TITLE}**" if markdown else VERSUS_TITLE, ""]
        lines += table([c.header for c in columns], [cells(columns, r) for r in versus])
    return lines
