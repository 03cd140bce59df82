"""The column registry: one entry per field and column that every printer reads, which rows have each
field (checked against the recorded golden sweep: both runners, a quality workload, two depths), the runner
catalogue deciding what a serving row is, and the HTML tables drawn from the registry: all-empty columns
left out as the terminal leaves them out, every cell in a ``<td>``, every stored string escaped."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support import golden

from edgeprof.report import (
    COLUMNS,
    FIELD_NAMES,
    REPORT_FIELDS,
    build_rows,
    is_serving_runner,
    row_kind,
    shown,
    table_lines,
)
from edgeprof.report.columns import TABLES, fields
from edgeprof.report.render.html_parts import registry_table
from edgeprof.report.render.html_sections import serving_section
from edgeprof.runners.registry import RUNNERS
from edgeprof.storage.db import new_session, open_engine

JSON_TYPES = {"integer", "number", "string", "boolean", "null"}


@pytest.fixture(scope="module")
def golden_rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    db = golden.load_db(tmp_path_factory.mktemp("golden") / "golden.db")
    with new_session(open_engine(db)) as s:
        return build_rows(s, 1, include_serving=True)


def test_every_entry_is_a_field_or_a_column_with_a_unique_name() -> None:
    for c in COLUMNS:
        is_field = c.fmt is None
        assert is_field == (c.formats <= {"csv", "json"}), c.name
        assert bool(c.type) == is_field, c.name
        assert not is_field or set(c.type.split("|")) <= JSON_TYPES, c.name
        assert c.rows and c.formats, c.name
    assert [n for n, k in Counter(c.name for c in fields()).items() if k > 1] == []
    assert [n for n, k in Counter(c.name for c in COLUMNS if c.fmt).items() if k > 1] == []
    assert tuple((c.name, c.type) for c in fields()) == REPORT_FIELDS
    assert FIELD_NAMES[:3] == ("sweep_id", "run_id", "spec_id")
    assert FIELD_NAMES[-1] == "task_run_id"  # the last appended (schema v14)


def test_each_table_has_one_header_per_column_and_the_columns_exist(
    golden_rows: list[dict[str, Any]],
) -> None:
    for table in TABLES:
        for fmt in ("table", "md", "html"):
            columns = shown(fmt, table)
            assert columns, (table, fmt)
            headers = [c.html_header or c.header if fmt == "html" else c.header for c in columns]
            assert len(set(headers)) == len(headers), (table, fmt, headers)


def test_a_field_has_a_value_only_on_the_rows_the_registry_says(golden_rows: list[dict[str, Any]]) -> None:
    kinds = Counter(row_kind(r) for r in golden_rows)
    assert kinds == {"inprocess": 6, "quality": 3, "serving": 12}
    wrong = [
        (c.name, row_kind(r))
        for r in golden_rows
        for c in fields()
        if r[c.name] is not None and row_kind(r) not in c.rows
    ]
    assert wrong == []


def test_what_a_serving_row_is_comes_from_the_runner_catalogue() -> None:
    for name, info in RUNNERS.items():
        assert is_serving_runner(name) is info.serving
    assert is_serving_runner(None) is False  # runs stored before the runner axis ran in-process
    assert is_serving_runner("some-future-runner") is True  # not the in-process one: never mixed with it
    assert row_kind({"runner": "llama-server", "run_id": 1}) == "serving"
    assert row_kind({"runner": "llama-cpp", "run_id": 1, "quality_run_id": 1}) == "quality"
    assert row_kind({"runner": "llama-cpp", "run_id": 2, "quality_run_id": 1}) == "inprocess"


def _html_headers(page: str) -> list[list[str]]:
    return [
        lines.splitlines()[1].split(" | ") for lines in golden.html_tables_text(page).split("## table ")[1:]
    ]


def test_the_html_configs_table_leaves_out_empty_columns_as_the_terminal_does(
    golden_rows: list[dict[str, Any]],
) -> None:
    rows = [r for r in golden_rows if row_kind(r) != "serving"]
    (html_headers,) = _html_headers(registry_table("configs", rows, numbered=True, drop_empty=True))
    terminal = table_lines(rows, wide=True)[0].split("  ")
    terminal = [h.strip() for h in terminal if h.strip()]
    # no temperature, power or J/token on this VM: neither table has those columns
    for absent in ("start/max °C", "W decode", "W dec", "J/tok net", "shared/GPU MiB"):
        assert absent not in html_headers and absent not in terminal
    # the generated text's start is a page (and Markdown) column: too wide for a terminal's table
    page_only = {c.html_header or c.header for c in shown("html") if "table" not in c.formats}
    assert "output (first 120 chars)" in html_headers
    shared = [h for h in html_headers[1:] if h not in page_only]
    assert [h for h in terminal if h in shared] == shared  # same columns, same order (the page has fewer)
    # every column kept when each has data somewhere
    hot = [{**r, "start_temp_c": 40.0, "peak_shared_mb": 1.0, "decode_power_mw_median": 5000.0} for r in rows]
    (all_headers,) = _html_headers(registry_table("configs", hot, numbered=True, drop_empty=True))
    assert {"start/max °C", "W decode", "shared/GPU MiB"} <= set(all_headers)
    # the essential columns stay even without any data
    empty = [{**r, "tg_tps_median": None} for r in rows]
    (kept,) = _html_headers(registry_table("configs", empty, numbered=True, drop_empty=True))
    assert "tg t/s med [min–max]" in kept


def test_the_html_serving_tables_have_every_cell_in_a_cell_and_escaped(
    golden_rows: list[dict[str, Any]],
) -> None:
    inproc = [r for r in golden_rows if row_kind(r) != "serving"]
    serving = [
        {**r, "model_label": f"<b>{r['model_label']}</b>"} for r in golden_rows if row_kind(r) == "serving"
    ]
    for r in inproc:
        r["model_label"] = f"<b>{r['model_label']}</b>"
    page = serving_section(serving, inproc)
    text = golden.html_tables_text(page)
    assert "<text outside a cell" not in text
    assert "<b>" not in page and "&lt;b&gt;tiny-f16&lt;/b&gt;" in page
    tables = text.split("## table ")[1:]
    assert len(tables) == 2  # the levels, and in-process vs API
    levels = tables[0].splitlines()[2:]
    assert len(levels) == len(serving)
    # no level of the fixture has a request rate: that column, empty in every row, is left out
    assert "rate" not in tables[0].splitlines()[1].split(" | ")
    assert levels[0].split(" | ")[:7] == ["<b>tiny-f16</b>", "F16", "512", "0", "gen", "1", "ok"]
    assert len(tables[1].splitlines()[2:]) == 6


def test_every_format_prints_every_column_of_a_sparse_row(tmp_path: Path) -> None:
    row = dict.fromkeys(FIELD_NAMES)
    row.update(model_label="m", workload="w", status="ok", ctx=1, ngl=0, threads=1, pp_tps_n=0, tg_tps_n=0)
    for table in TABLES:
        for fmt in ("table", "md", "html"):
            for c in shown(fmt, table):
                assert isinstance(c.text(row), str), c.name
