"""Every output format of the report, one module each, registered by kind in ``RENDERERS``.

The row formats (``table``, ``md``, ``csv``, ``json``) print the rows of ``build_rows``; ``html`` draws a
whole page from the database (figures, verdict evidence, log tails), so it takes the session and the sweep
id instead, and so do llama-bench's formats (``llama-bench-json`` ..., edgeprof.report.render.llama_bench),
which need every repetition's time. Adding a format is one module here and one line in ``RENDERERS``.
"""

from collections.abc import Callable

from edgeprof.report.render.csv import render_csv
from edgeprof.report.render.html import render_html, write_html
from edgeprof.report.render.json import render_json
from edgeprof.report.render.llama_bench import REPORT_KINDS, sweep_renderer
from edgeprof.report.render.markdown import render_markdown
from edgeprof.report.render.notes import stability_note
from edgeprof.report.render.text import render_table, table_lines

RENDERERS: dict[str, Callable[..., str]] = {
    "table": render_table,
    "md": render_markdown,
    "csv": render_csv,
    "json": render_json,
    "html": render_html,
    **{f"llama-bench-{kind}": sweep_renderer(kind) for kind in REPORT_KINDS},
}

__all__ = [
    "RENDERERS",
    "render_csv",
    "render_html",
    "render_json",
    "render_markdown",
    "render_table",
    "stability_note",
    "table_lines",
    "write_html",
]
