"""The columns that tell rows apart stay: a parameter that differs between the rows shown (threads here) is
never left out to fit a terminal (120 and 200 columns) or a 1366-px page; measures go first, and are named;
llama.cpp's other settings get a column only where they differ. And the cells that read wrong: -ngl 999 is
"all (999)", a server edgeprof did not start has no ngl ("–"), a config still running is "running"."""

from __future__ import annotations

from typing import Any

import pytest
from support import golden

from edgeprof.report import build_rows, row_kind
from edgeprof.report.cells import fmt_ngl, fmt_status
from edgeprof.report.columns import shown
from edgeprof.report.recommend import exclusion
from edgeprof.report.render.html_parts import FIT_CHARS, cell, table_columns
from edgeprof.report.render.text import table_lines
from edgeprof.storage.db import new_session, open_engine

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def golden_rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    db = golden.load_db(tmp_path_factory.mktemp("golden") / "golden.db")
    with new_session(open_engine(db)) as s:
        return [r for r in build_rows(s, 1, include_serving=True) if row_kind(r) == "inprocess"]


def threads_varied(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The golden sweep's rows (more columns than a screen holds) with threads 1 and 2 in turn, so that two
    rows (f16 at depth 0 and 64) differ in threads and depth but in no other setting."""
    return [{**r, "threads": 1 + i % 2} for i, r in enumerate(rows)]


@pytest.mark.parametrize("width", [120, 200])
def test_a_terminal_table_keeps_the_threads_column_when_threads_differ(
    golden_rows: list[dict[str, Any]], width: int
) -> None:
    rows = threads_varied(golden_rows)
    lines = table_lines(rows, width=width)
    header = next(line for line in lines if line.startswith("model"))
    assert " thr " in f" {header} ", lines
    body = lines[lines.index(header) + 2 : lines.index(header) + 4]
    cells_of = [line.split() for line in body]
    col = header.split().index("thr")
    assert [c[col] for c in cells_of] == ["1", "2"], lines
    assert "depth" in header.split()
    start = next((i for i, x in enumerate(lines) if x.startswith("(left out")), len(lines))
    left_out = " ".join(lines[start:])
    assert "thr" not in left_out and "depth" not in left_out
    assert width == 200 or "ttft" in left_out  # a measure went instead


def test_the_page_keeps_the_threads_column_and_leaves_out_measures(golden_rows: list[dict[str, Any]]) -> None:
    rows = threads_varied(golden_rows)
    kept, left_out = table_columns("configs", rows, drop_empty=True, fit_chars=FIT_CHARS)
    assert {"thr", "depth"} <= {c.name for c in kept} and not {"thr", "depth"} & set(left_out)
    narrow, gone = table_columns("configs", rows, drop_empty=True, fit_chars=60)  # less than it needs
    assert {"thr", "depth"} <= {c.name for c in narrow} and {"ngl", "workload"} <= set(gone), gone
    params = {c.name for c in shown("html") if c.param}
    first_param = next((i for i, k in enumerate(left_out) if k in params), len(left_out))
    assert not [k for k in left_out[first_param:] if k not in params], left_out  # measures went first


def test_other_settings_get_a_column_only_where_they_differ(golden_rows: list[dict[str, Any]]) -> None:
    same = threads_varied(golden_rows)
    assert "batch" not in [c.name for c in shown("table", rows=same)]
    other = [same[0], {**same[1], "n_batch": 256}]
    assert "batch" in [c.name for c in shown("table", rows=other)]
    lines = table_lines(other, width=120)
    assert any("batch/ubatch" in line for line in lines), lines


def test_ngl_reads_all_for_999_and_a_dash_for_a_foreign_server() -> None:
    assert (fmt_ngl(999), fmt_ngl(0), fmt_ngl(20), fmt_ngl(None)) == ("all (999)", "0", "20", "–")


def test_a_running_config_reads_running_not_failed(golden_rows: list[dict[str, Any]]) -> None:
    row = {**golden_rows[0], "status": "running", "reason": None}
    assert fmt_status(row) == "running"
    status = next(c for c in shown("html") if c.name == "status")
    assert "failed" not in cell(status, row)
    assert "failed" in cell(status, {**row, "status": "crashed"})
    from edgeprof.report.render.notes import failure_notes

    assert not [n for n in failure_notes([row]) if "running" in n]  # not listed among the failed
    assert failure_notes([{**row, "status": "crashed"}])

    class Candidate:  # the recommendation's view of a row
        def __init__(self, row: dict[str, Any]) -> None:
            self.row = row

    from edgeprof.plan import QualityBudget

    assert exclusion(Candidate(row), QualityBudget(), False) == "still running"  # type: ignore[arg-type]
