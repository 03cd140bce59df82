"""Reports: rows of a sweep, their columns, the renderers, the recommendation, compare and figures.

``build_rows`` reads a sweep into report rows; ``COLUMNS`` (``edgeprof.report.columns``) says every field
and table column once; ``RENDERERS`` prints the rows as a terminal table, Markdown, CSV or JSON, and
``write_html`` draws the self-contained HTML page. The figures (``edgeprof.report.figures``) load
matplotlib, so only the HTML page imports them, when it draws.
"""

from edgeprof.report.cells import fmt_agreement, fmt_tokens_out, fmt_value
from edgeprof.report.columns import (
    COLUMN_KEYS,
    COLUMNS,
    FIELD_NAMES,
    REPORT_FIELDS,
    REPORT_SCHEMA_VERSION,
    Column,
    ColumnError,
    cells,
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
from edgeprof.report.recommend import recommend, render_recommendations
from edgeprof.report.render import (
    RENDERERS,
    render_csv,
    render_html,
    render_json,
    render_markdown,
    render_table,
    stability_note,
    table_lines,
    write_html,
)
from edgeprof.report.rows import ReportError, build_rows, latest_sweep_id
from edgeprof.report.run_row import agreement
from edgeprof.report.tables import fit_table
from edgeprof.report.workload import depth_curves, output_until_eos

__all__ = [
    "COLUMNS",
    "COLUMN_KEYS",
    "COMPARE_FIELDS",
    "FIELD_NAMES",
    "RENDERERS",
    "REPORT_FIELDS",
    "REPORT_SCHEMA_VERSION",
    "Column",
    "ColumnError",
    "ReportError",
    "agreement",
    "build_rows",
    "cells",
    "compare_rows",
    "compare_sweeps",
    "depth_curves",
    "describe_sweep",
    "fit_table",
    "fmt_agreement",
    "fmt_tokens_out",
    "fmt_value",
    "is_serving_runner",
    "latest_sweep_id",
    "output_until_eos",
    "parse_columns",
    "ranges_overlap",
    "ratio",
    "recommend",
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
