"""Reports: rows of a sweep, their columns, the renderers, the recommendation, compare and figures.

``build_rows`` reads a sweep into report rows; ``COLUMNS`` (``edgeprof.report.columns``) says every field
and table column once; ``RENDERERS`` prints the rows as a terminal table, Markdown, CSV or JSON, and
``write_html`` draws the self-contained HTML page. The figures (``edgeprof.report.figures``) load
matplotlib, so only the HTML page imports them, when it draws.

The names below are the ones callers use; each is imported from its module on first use
(``edgeprof.lazy``), so importing the package alone costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgeprof.lazy import lazy_exports

if TYPE_CHECKING:
    from edgeprof.report.cells import fmt_tokens_out
    from edgeprof.report.columns import (
        COLUMNS,
        FIELD_NAMES,
        REPORT_FIELDS,
        ColumnError,
        is_serving_runner,
        parse_columns,
        row_kind,
        shown,
    )
    from edgeprof.report.compare import (
        COMPARE_FIELDS,
        compare_rows,
        compare_sweeps,
        describe_sweep,
        ranges_overlap,
        ratio,
        render_compare,
    )
    from edgeprof.report.recommend import render_recommendations
    from edgeprof.report.render.csv import render_csv
    from edgeprof.report.render.formats import RENDERERS
    from edgeprof.report.render.html import render_html, write_html
    from edgeprof.report.render.json import render_json
    from edgeprof.report.render.markdown import render_markdown
    from edgeprof.report.render.notes import stability_note
    from edgeprof.report.render.text import render_table, table_lines
    from edgeprof.report.rows import ReportError, build_rows, latest_sweep_id
    from edgeprof.report.run_row import agreement
    from edgeprof.report.tables import fit_table
    from edgeprof.report.workload import depth_curves, output_until_eos

# module of this package -> the public names it defines, imported on first use
_HOMES: dict[str, tuple[str, ...]] = {
    "cells": ("fmt_tokens_out",),
    "columns": (
        "COLUMNS",
        "FIELD_NAMES",
        "REPORT_FIELDS",
        "ColumnError",
        "is_serving_runner",
        "parse_columns",
        "row_kind",
        "shown",
    ),
    "compare": (
        "COMPARE_FIELDS",
        "compare_rows",
        "compare_sweeps",
        "describe_sweep",
        "ranges_overlap",
        "ratio",
        "render_compare",
    ),
    "recommend": ("render_recommendations",),
    "render.csv": ("render_csv",),
    "render.formats": ("RENDERERS",),
    "render.html": ("render_html", "write_html"),
    "render.json": ("render_json",),
    "render.markdown": ("render_markdown",),
    "render.notes": ("stability_note",),
    "render.text": ("render_table", "table_lines"),
    "rows": ("ReportError", "build_rows", "latest_sweep_id"),
    "run_row": ("agreement",),
    "tables": ("fit_table",),
    "workload": ("depth_curves", "output_until_eos"),
}

__all__ = [
    "COLUMNS",
    "COMPARE_FIELDS",
    "FIELD_NAMES",
    "RENDERERS",
    "REPORT_FIELDS",
    "ColumnError",
    "ReportError",
    "agreement",
    "build_rows",
    "compare_rows",
    "compare_sweeps",
    "depth_curves",
    "describe_sweep",
    "fit_table",
    "fmt_tokens_out",
    "is_serving_runner",
    "latest_sweep_id",
    "output_until_eos",
    "parse_columns",
    "ranges_overlap",
    "ratio",
    "render_compare",
    "render_csv",
    "render_html",
    "render_json",
    "render_markdown",
    "render_recommendations",
    "render_table",
    "row_kind",
    "shown",
    "stability_note",
    "table_lines",
    "write_html",
]

__getattr__ = lazy_exports(__name__, _HOMES)
