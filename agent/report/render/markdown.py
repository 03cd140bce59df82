"""The Markdown report: the answer as a list, the configs table (columns without data left out, the start of
each config's generated text last), the notes, the depth curves, then the serving levels apart."""

from __future__ import annotations

from typing import Any

from edgeprof.report.accuracy import accuracy_lines
from edgeprof.report.cells import md_code, output_head
from edgeprof.report.columns import cells, shown
from edgeprof.report.fit import recommendation_lines
from edgeprof.report.render.notes import ECHO_TITLE, config_name, failure_notes
from edgeprof.report.render.serving import serving_lines
from edgeprof.report.render.soak import soak_lines
from edgeprof.report.serving import is_serving_row
from edgeprof.report.tables import drop_empty_columns, md_escape, md_table
from edgeprof.report.workload import render_depth_lines
from edgeprof.safetext import safe_lines


def render_markdown(rows: list[dict[str, Any]]) -> str:
    everything, rows = rows, [r for r in rows if not is_serving_row(r)]
    columns = shown("md", rows=rows)
    headers, grid, _ = drop_empty_columns([c.header for c in columns], [cells(columns, r) for r in rows])
    lines = md_table(headers, grid)
    recs = recommendation_lines(rows)  # the report opens with the answer
    if recs:
        lines = [*(f"- {md_escape(x.strip())}" for x in recs), "", *lines]
    accuracy = accuracy_lines(rows)
    if accuracy:
        lines += ["", "**Task accuracy (each variant against its reference, on the same tasks):**", ""]
        lines += [f"- {md_escape(x)}" for x in accuracy]
    fails = failure_notes(rows)
    if fails:
        lines += ["", "**Failed configs and device changes:**", ""] + [f"- {md_escape(f)}" for f in fails]
    echoes = [r for r in rows if r.get("_output_echo")]
    if echoes:
        # the text in a code span: what a model generated is never read as Markdown or HTML
        lines += ["", f"**Configs with {md_escape(ECHO_TITLE)}:**", ""]
        lines += [f"- {md_escape(config_name(r))}: {md_code(str(output_head(r)))}" for r in echoes]
    depth_lines = render_depth_lines(rows)  # the curve users ask for
    if depth_lines:
        lines += ["", "**tg t/s and TTFT against context depth (steady reps):**", "", "```"]
        lines += [*depth_lines, "```"]
    soak = soak_lines(rows)
    if soak:  # the sparkline's blocks line up only in a code block
        lines += ["", f"**{md_escape(soak[0].rstrip(':'))}:**", "", "```", *soak[1:], "```"]
    lines += serving_lines(everything, markdown=True)  # the HTTP API, apart: another scenario
    # a Markdown report is read in a terminal as often as rendered: no stored text may act on either
    return safe_lines("\n".join(lines))
