"""The HTML configs table chooses its columns from the registry as the terminal does: columns without data
left out, then the least telling ones (``drop_order("html")``) until it fits a 1366-px window, each one
named below it; ``--wide`` keeps every column with data. (Checked in a real browser by
tests/integration/test_report_browser.py; here the choice itself, on the golden sweep's rows.)"""

from __future__ import annotations

import re
from typing import Any

import pytest
from support import golden

from edgeprof.report import build_rows, row_kind
from edgeprof.report.columns import FIT_DROP_ORDER, drop_order, shown, telling_params
from edgeprof.report.render.html import configs_section
from edgeprof.report.render.html_parts import FIT_CHARS, cell_chars, non_empty, table_columns
from edgeprof.report.tables import grid_width
from edgeprof.storage.db import new_session, open_engine


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    db = golden.load_db(tmp_path_factory.mktemp("golden") / "golden.db")
    with new_session(open_engine(db)) as s:
        return [r for r in build_rows(s, 1, include_serving=True) if row_kind(r) != "serving"]


def test_the_page_leaves_out_the_least_telling_columns_until_the_table_fits(
    rows: list[dict[str, Any]],
) -> None:
    everything = non_empty(list(shown("html", rows=rows)), rows)
    kept, left_out = table_columns("configs", rows, drop_empty=True, fit_chars=FIT_CHARS)
    assert left_out, "the golden sweep has more columns than a laptop screen holds"
    assert [c.name for c in kept] == [c.name for c in everything if c.name not in left_out]  # order kept
    # left out in the registry's order, least telling first (measures before the settings every row shares,
    # never a setting that differs between rows), and never an essential column
    telling = telling_params(everything, rows)
    params = {c.name for c in everything if c.param}
    ranked = [k for k in drop_order("html") if k not in telling]
    order = [k for k in ranked if k not in params] + [k for k in ranked if k in params]
    assert left_out == [k for k in order if k in left_out][: len(left_out)]
    assert left_out == [k for k in order if k in {c.name for c in everything}][: len(left_out)]
    assert all(c.essential is False for c in everything if c.name in left_out)
    assert {"model", "quant", "ctx", "status", "tg"} <= {c.name for c in kept}
    # it fits, and one more column would not have
    def width(columns: list[Any]) -> int:
        heads = [max(len(w) for w in (c.html_header or c.header).split()) for c in columns]
        grid = [["x" * n for n in heads], *(["x" * cell_chars(c, r) for c in columns] for r in rows)]
        return grid_width([c.name for c in columns], grid)

    assert width(kept) <= FIT_CHARS
    last = next(c for c in everything if c.name == left_out[-1])
    assert width([*kept, last]) > FIT_CHARS


def test_the_terminal_and_the_page_leave_columns_out_in_the_same_order() -> None:
    page_only = {c.name for c in shown("html") if "table" not in c.formats}
    assert [k for k in drop_order("html") if k not in page_only] == [
        k for k in FIT_DROP_ORDER if k in {c.name for c in shown("html")}
    ]
    assert drop_order("table") == FIT_DROP_ORDER


def test_the_left_out_columns_are_named_and_wide_shows_them_all(rows: list[dict[str, Any]]) -> None:
    fitted, wide = configs_section(rows), configs_section(rows, wide=True)
    _kept, left_out = table_columns("configs", rows, drop_empty=True, fit_chars=FIT_CHARS)
    note = re.search(r"Left out to fit a 1366-px window: ([^(<]+) \(", fitted)
    assert note and note.group(1).split(", ") == left_out
    assert "--wide" in fitted and "Left out" not in wide
    headers = re.findall(r"<th>(.*?)</th>", wide)
    with_data = non_empty(list(shown("html", rows=rows)), rows)
    assert len(headers) == 1 + len(with_data)  # '#' and every column with data
