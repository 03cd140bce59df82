"""The serving section of the terminal and Markdown reports: the HTTP API levels, their failures, and the
in-process vs API table; nothing when the sweep has no serving rows."""

from __future__ import annotations

from typing import Any

from edgeprof.report.columns import Format, cells, shown
from edgeprof.report.serving import is_serving_row, versus_rows
from edgeprof.report.tables import md_table, render_grid

SERVING_TITLE = "HTTP API (llama-server, streamed):"
VERSUS_TITLE = "In-process (CLI) vs HTTP API, same model/ctx/ngl/workload:"
SERVING_NOTE = (
    "TTFT/ITL/E2EL: client-side, every measured request (warm-ups and the cold request excluded), "
    "nearest rank; TPOT = (E2EL - TTFT)/(n - 1) (vLLM's); output tokens from the server's count."
)


def serving_lines(rows: list[dict[str, Any]], markdown: bool = False) -> list[str]:
    serving = [r for r in rows if is_serving_row(r)]
    if not serving:
        return []
    table = md_table if markdown else render_grid
    fmt: Format = "md" if markdown else "table"
    columns = shown(fmt, "serving")
    lines = ["", f"**{SERVING_TITLE}**" if markdown else SERVING_TITLE, ""]
    lines += table([c.header for c in columns], [cells(columns, r) for r in serving])
    fails = [
        f"{r['model_label']} ctx={r['ctx']} c={r['concurrency']}: {r['status']}: {r['reason']}"
        for r in serving
        if r["status"] != "ok"
    ]
    if fails:
        lines += ["", f"{len(fails)} failed serving level(s):", *(f"  {f}" for f in fails)]
    lines += ["", SERVING_NOTE]
    versus = versus_rows(rows)
    if versus:
        columns = shown(fmt, "versus")
        lines += ["", f"**{VERSUS_TITLE}**" if markdown else VERSUS_TITLE, ""]
        lines += table([c.header for c in columns], [cells(columns, r) for r in versus])
    return lines
