"""The report's output formats by name: ``edgeprof report --format NAME`` prints with ``RENDERERS[NAME]``.

The row formats (``table``, ``md``, ``csv``, ``json``) print the rows of ``build_rows``; ``html`` draws a
whole page from the database (figures, verdict evidence, log tails), so it takes the session and the sweep
id instead, and so do llama-bench's formats (``llama-bench-json`` ..., edgeprof.report.render.llama_bench),
which need every repetition's time. Adding a format is one module in this folder and one line here.
"""

from collections.abc import Callable
from typing import Any

from edgeprof.report.render.csv import render_csv
from edgeprof.report.render.json import render_json
from edgeprof.report.render.llama_bench import REPORT_KINDS, sweep_renderer
from edgeprof.report.render.markdown import render_markdown
from edgeprof.report.render.text import render_table


def render_html(*args: Any, **kwargs: Any) -> str:
    """The HTML page (edgeprof.report.render.html), imported when one is drawn: its figures and sections
    take half a second to import, which every terminal ``report`` would otherwise pay."""
    from edgeprof.report.render.html import render_html as draw

    return draw(*args, **kwargs)


RENDERERS: dict[str, Callable[..., str]] = {
    "table": render_table,
    "md": render_markdown,
    "csv": render_csv,
    "json": render_json,
    "html": render_html,
    **{f"llama-bench-{kind}": sweep_renderer(kind) for kind in REPORT_KINDS},
}
