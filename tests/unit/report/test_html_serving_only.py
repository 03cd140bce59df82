"""The HTML report of a sweep of serving levels only (agent/report/render/html.py, html_parts.py), from a
hand-built SYNTHETIC database: the summary counts the levels as the terminal does, there is no empty
configs table (nor a "configs compared" figure of nothing), the serving table is fitted to a 1366-px
window, a value a foreign server does not give is an empty cell (never "None"), and on a phone-width
screen every table cell names its column for the stacked layout."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support import dbbuild

from edgeprof.report import build_rows
from edgeprof.report.render.html import CSS, render_html
from edgeprof.report.render.html_parts import FIT_CHARS, fit_html, table_columns
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import ServingLevel

pytestmark = pytest.mark.timeout(120)


def serving_only_db(path: Path) -> int:
    """Two levels of llama-server and two of an OpenAI-compatible server (no ngl, threads or batch of its
    own: NULL), every latency figure filled so the table is as wide as it gets."""
    engine = open_engine(path)
    stats = {"error_rate": 0.0, "ttft_ms": {"p90": 31.5}, "tpot_e2e_ms": {"p50": 5.25}}
    with new_session(engine) as s:
        sweep = dbbuild.add_sweep(s, name="serve", n_specs=4)
        for seq, (runner, conc) in enumerate((("llama-server", 1), ("llama-server", 2), ("openai", 1),
                                              ("openai", 2))):  # fmt: skip
            # the foreign server's identity as the openai runner stores it: its file type, no model file
            server = {"server": {"endpoint": "chat", "model_meta": {"ftype": "Q4_K - Medium"}}}
            effective = json.dumps(server) if runner == "openai" else None
            run = dbbuild.add_run(s, sweep, seq, runner=runner, concurrency=conc, n_threads=1,
                                  workload_json='{"n_predict": 8}', effective_json=effective)  # fmt: skip
            s.add(ServingLevel(
                run_id=run.id, concurrency=conc, n_requests=8, n_ok=8, ttft_p50_ms=30.0 + seq,
                ttft_p99_ms=33.0, tpot_p50_ms=5.0, output_tps=300.0, ready_ms=250.0, cold_start_ms=300.0,
                slot_n_ctx=256, stats_json=json.dumps(stats),
            ))  # fmt: skip
        s.commit()
        return sweep.id


@pytest.fixture
def page(tmp_path: Path) -> str:
    db = tmp_path / "s.db"
    sweep_id = serving_only_db(db)
    with new_session(open_engine(db)) as s:
        return render_html(s, sweep_id)


def test_summary_counts_the_levels_and_no_empty_configs_table(page: str) -> None:
    assert re.search(r"<th>configs</th><td>4 of 4 \(4 ok\)</td>", page), page[:3000]
    assert "<h2>Configs</h2>" not in page and "Configs compared" not in page
    assert "HTTP API" in page


def test_empty_cells_not_none_and_the_servers_file_type_shown(page: str) -> None:
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", page)
    assert "None" not in cells
    assert cells.count("Q4_K_M") == 2  # the openai levels: the ftype the server reported
    assert "–" in cells  # the foreign server's ngl: not the plan's to give (docs/serving.md)


def test_every_table_cell_names_its_column_for_a_phone(page: str) -> None:
    serving = page.split("HTTP API", 1)[1].split("</table>", 1)[0]
    tds = re.findall(r"<td[^>]*>", serving)
    assert tds and all('data-label="' in td for td in tds)
    assert "@media (max-width: 640px)" in CSS and "attr(data-label)" in CSS
    assert 'class="figure"' in page or "figure not drawn" in page or "<img" not in page


def test_the_serving_table_fits_a_laptop_screen(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    sweep_id = serving_only_db(db)
    with new_session(open_engine(db)) as s:
        rows = [r for r in build_rows(s, sweep_id, include_serving=True)]
    every, _ = table_columns("serving", rows, drop_empty=True)
    kept, left_out = table_columns("serving", rows, drop_empty=True, fit_chars=FIT_CHARS)
    assert len(kept) + len(left_out) == len(every)
    # what was kept fits: fitting again leaves nothing more out
    assert fit_html(kept, rows, FIT_CHARS, "serving")[1] == []


def test_the_terminal_report_has_no_empty_configs_table(tmp_path: Path) -> None:
    from edgeprof.report import render_table

    db = tmp_path / "s.db"
    sweep_id = serving_only_db(db)
    with new_session(open_engine(db)) as s:
        text = render_table(build_rows(s, sweep_id, include_serving=True), width=200)
    assert text.startswith("HTTP API")
    assert "tg t/s" not in text and "pp t/s" not in text  # the in-process table's columns
