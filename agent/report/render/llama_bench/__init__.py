"""llama-bench's output formats, one module each, registered by kind in ``FORMATS``: ``edgeprof bench -o``
prints with them, and ``edgeprof report --format llama-bench-<kind>`` writes any sweep with them.

Every printer takes the records of ``edgeprof.report.llamabench.sweep_records`` (one per llama-bench test,
keyed by its field list), so one field list drives them all.
"""

from collections.abc import Callable
from typing import Any

from edgeprof.report.render.llama_bench.csv import render_csv
from edgeprof.report.render.llama_bench.json import render_json
from edgeprof.report.render.llama_bench.jsonl import render_jsonl
from edgeprof.report.render.llama_bench.markdown import render_markdown
from edgeprof.report.render.llama_bench.sql import render_sql

FORMATS: dict[str, Callable[[list[dict[str, Any]]], str]] = {
    "md": render_markdown,
    "csv": render_csv,
    "json": render_json,
    "jsonl": render_jsonl,
    "sql": render_sql,
}

# The kinds ``edgeprof report --format llama-bench-<kind>`` writes (md is bench's terminal table)
REPORT_KINDS = ("json", "jsonl", "csv", "sql")


def sweep_renderer(kind: str) -> Callable[[Any, int | None], str]:
    """A renderer of a whole sweep in llama-bench's ``kind``: like the HTML page it reads the database
    (the per-repetition samples), so it takes the session and the sweep id (None: the latest)."""

    def render(session: Any, sweep_id: int | None) -> str:
        from edgeprof.report.llamabench import sweep_records

        return FORMATS[kind](sweep_records(session, sweep_id))

    return render


__all__ = ["FORMATS", "REPORT_KINDS", "sweep_renderer"]
