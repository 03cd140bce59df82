"""Report rows from a hand-built sweep: the JSON schema (REPORT_FIELDS), statistics, the reference and
agreement columns, failures as nulls, and the CSV / Markdown / table renderings."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from support import dbbuild

from edgeprof.report import (
    FIELD_NAMES,
    REPORT_FIELDS,
    ReportError,
    agreement,
    build_rows,
    render_csv,
    render_json,
    render_markdown,
    render_table,
)
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Measurement, ModelFile, Run

# --- agreement ------------------------------------------------------------------------------------------


def test_agreement_identical() -> None:
    assert agreement([1, 2, 3, 4], [1, 2, 3, 4]) == (4, 1.0, 4)


def test_agreement_diverges_at_k() -> None:
    assert agreement([1, 2, 9, 4], [1, 2, 3, 4]) == (2, 0.75, 4)
    assert agreement([9, 2, 3, 4], [1, 2, 3, 4]) == (0, 0.75, 4)
    assert agreement([1, 2, 3, 9], [1, 2, 3, 4]) == (3, 0.75, 4)


def test_agreement_different_lengths_compares_over_the_longer() -> None:
    # A run that stopped early is not rewarded: missing positions count as disagreement.
    assert agreement([1, 2], [1, 2, 3, 4]) == (2, 0.5, 4)
    assert agreement([1, 2, 3, 4], [1, 2]) == (2, 0.5, 4)
    assert agreement([1, 2, 3, 4, 5], [1, 2, 3, 4]) == (4, 0.8, 5)


def test_agreement_empty() -> None:
    assert agreement([], []) == (0, 1.0, 0)
    assert agreement([], [1, 2]) == (0, 0.0, 2)
    assert agreement([1, 2], []) == (0, 0.0, 2)


# --- a hand-built sweep ---------------------------------------------------------------------------------

NOW = datetime(2026, 1, 2, 3, 4, 5)
N_PARAMS = 2_000_000
REF_TOKENS = [5, 6, 7, 8, 9, 10, 11, 12]
Q4_TOKENS = [5, 6, 7, 99, 9, 10]  # diverges at 3; same at 0,1,2,4,5 -> 5 of max(6, 8) = 8
CRASH_REASON = "worker killed by SIGSEGV during load"


@dataclass
class Built:
    engine: Engine
    sweep_id: int
    q8_label: str = "demo-q8_0"
    q4_label: str = "demo-q4_k_m"


def _run(
    sweep_id: int, seq: int, mf: ModelFile, label: str, *, spec_id: str, ctx: int = 512, **kw: Any
) -> Run:
    workload = {"name": "wl", "prompt": None, "prompt_tokens": 128, "n_predict": 64}
    mine = {
        "model_file_id": mf.id,
        "model_label": label,
        "model_group": "demo",
        "model_path": mf.path,
        "workload_name": "wl",
        "workload_hash": "w" * 64,
        "workload_json": json.dumps(workload),
        "repeat_json": json.dumps({"cold": 1, "warmup": 1, "steady": 5}),
        "n_ctx": ctx,
        "n_threads": 2,
        "flash_attn": "off",
        "started_at": NOW,
    }
    # not added: the caller attaches measurements first (dbbuild.add_run would flush it at once)
    return Run(sweep_id=sweep_id, spec_id=spec_id, seq=seq, **(dbbuild.RUN_DEFAULTS | mine | kw))


def _steady(rep: int, tg: float, pp: float, ttft: float, tokens: list[int]) -> Measurement:
    return Measurement(
        kind="steady",
        rep=rep,
        n_prompt=128,
        tg_tps=tg,
        pp_tps=pp,
        ttft_ms=ttft,
        output_tokens_json=json.dumps(tokens),
    )


def build_sweep(db: Path | str) -> Built:
    engine = open_engine(db)
    with new_session(engine) as s:
        device = dbbuild.add_device(s, fingerprint="f" * 64, hostname="box", arch="x86_64", first_seen=NOW)
        sweep = dbbuild.add_sweep(
            s, device, name="t", plan_hash="h" * 64, edgeprof_version="0.1.0", started_at=NOW, status="done"
        )
        sweep.n_specs = 3
        # Q8_0: 8.0 bits per weight; Q4_K_M: 4.5.
        q8 = ModelFile(
            path="/m/q8.gguf", sha256="8" * 64, size_bytes=2_000_000, mtime_ns=1, n_params=N_PARAMS
        )
        q8.quant_type = "Q8_0"
        q4 = ModelFile(
            path="/m/q4.gguf", sha256="4" * 64, size_bytes=1_125_000, mtime_ns=1, n_params=N_PARAMS
        )
        q4.quant_type = "Q4_K_M"
        s.add_all([sweep, q8, q4])
        s.flush()

        # Reference (Q8_0): a cold request and a warm-up far off the steady numbers, which must not count.
        ref = _run(sweep.id, 0, q8, "demo-q8_0", spec_id="spec-q8", status="ok", peak_rss_mb=300.0)
        ref.measurements = [
            Measurement(kind="cold", rep=0, load_ms=100.0, cold_start_ms=150.0, ttft_ms=20.0, tg_tps=1.0),
            Measurement(kind="warmup", rep=0, tg_tps=1000.0, pp_tps=1.0, ttft_ms=999.0),
            *[
                _steady(i, tg, pp, ttft, REF_TOKENS)
                for i, (tg, pp, ttft) in enumerate(
                    [
                        (50.0, 400.0, 10.0),
                        (52.0, 420.0, 12.0),
                        (48.0, 380.0, 11.0),
                        (51.0, 410.0, 30.0),
                        (49.0, 390.0, 9.0),
                    ]
                )
            ],
        ]
        # Q4_K_M at the same params: an even number of steady reps.
        other = _run(sweep.id, 1, q4, "demo-q4_k_m", spec_id="spec-q4", status="ok", peak_rss_mb=200.0)
        other.measurements = [
            _steady(i, tg, pp, ttft, Q4_TOKENS)
            for i, (tg, pp, ttft) in enumerate(
                [(80.0, 600.0, 7.0), (84.0, 640.0, 8.0), (76.0, 620.0, 6.0), (82.0, 580.0, 9.0)]
            )
        ]
        # Q4_K_M at a larger ctx: crashed, nothing measured.
        crashed = _run(
            sweep.id,
            2,
            q4,
            "demo-q4_k_m",
            spec_id="spec-q4-ctx",
            ctx=1024,
            status="crashed",
            reason=CRASH_REASON,
        )
        s.add_all([ref, other, crashed])
        s.commit()
        return Built(engine=engine, sweep_id=sweep.id)


@pytest.fixture
def built(any_db: str) -> Built:
    # Every report test runs on SQLite and on PostgreSQL: a fleet's central database is PostgreSQL.
    return build_sweep(any_db)


@pytest.fixture
def rows(built: Built) -> list[dict[str, Any]]:
    with new_session(built.engine) as s:
        return build_rows(s, built.sweep_id)


JSON_TYPES: dict[str, Any] = {
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def test_json_schema_keys_and_types(rows: list[dict[str, Any]]) -> None:
    data = json.loads(render_json(rows))
    assert isinstance(data, list) and len(data) == 3
    names = [name for name, _ in REPORT_FIELDS]
    assert tuple(names) == FIELD_NAMES
    for obj in data:
        assert list(obj) == names
        for name, declared in REPORT_FIELDS:
            allowed = declared.split("|")
            assert all(t in JSON_TYPES for t in allowed), declared
            assert any(JSON_TYPES[t](obj[name]) for t in allowed), (name, declared, obj[name])


def test_json_is_the_default_latest_sweep(built: Built) -> None:
    with new_session(built.engine) as s:
        assert build_rows(s) == build_rows(s, built.sweep_id)


def test_rows_in_run_order(rows: list[dict[str, Any]]) -> None:
    assert [(r["model_label"], r["ctx"], r["status"]) for r in rows] == [
        ("demo-q8_0", 512, "ok"),
        ("demo-q4_k_m", 512, "ok"),
        ("demo-q4_k_m", 1024, "crashed"),
    ]


def test_reference_row_values(rows: list[dict[str, Any]]) -> None:
    ref = json.loads(render_json(rows))[0]
    assert ref["quant"] == "Q8_0"
    assert ref["bits_per_weight"] == 8.0
    assert ref["n_prompt"] == 128 and ref["n_predict"] == 64
    assert ref["mmap"] is True and ref["attempts"] == 1
    # cold apart from steady
    assert (ref["cold_load_ms"], ref["cold_start_ms"], ref["cold_ttft_ms"]) == (100.0, 150.0, 20.0)
    # steady tg [50, 52, 48, 51, 49], pp [400, 420, 380, 410, 390], ttft sorted [9, 10, 11, 12, 30]
    assert (ref["tg_tps_median"], ref["tg_tps_min"], ref["tg_tps_max"], ref["tg_tps_n"]) == (
        50.0,
        48.0,
        52.0,
        5,
    )
    assert (ref["pp_tps_median"], ref["pp_tps_min"], ref["pp_tps_max"], ref["pp_tps_n"]) == (
        400.0,
        380.0,
        420.0,
        5,
    )
    assert (ref["ttft_ms_p50"], ref["ttft_ms_p95"], ref["ttft_n"]) == (11.0, 30.0, 5)
    assert ref["peak_rss_mb"] == 300.0
    # the reference against itself
    assert ref["reference_label"] == "demo-q8_0"
    assert ref["agree_share"] == 1.0
    assert ref["agree_prefix_tokens"] == len(REF_TOKENS) == ref["agree_n_tokens"]
    assert ref["tg_ratio_vs_ref"] == 1.0 and ref["pp_ratio_vs_ref"] == 1.0


def test_quantized_row_values(rows: list[dict[str, Any]]) -> None:
    row = json.loads(render_json(rows))[1]
    assert row["quant"] == "Q4_K_M"
    assert row["bits_per_weight"] == 4.5
    # even n: tg sorted [76, 80, 82, 84] -> median 81; pp sorted [580, 600, 620, 640] -> median 610
    assert (row["tg_tps_median"], row["tg_tps_min"], row["tg_tps_max"], row["tg_tps_n"]) == (
        81.0,
        76.0,
        84.0,
        4,
    )
    assert (row["pp_tps_median"], row["pp_tps_min"], row["pp_tps_max"], row["pp_tps_n"]) == (
        610.0,
        580.0,
        640.0,
        4,
    )
    # ttft sorted [6, 7, 8, 9]: p50 = ceil(2) = 2nd, p95 = ceil(3.8) = 4th
    assert (row["ttft_ms_p50"], row["ttft_ms_p95"], row["ttft_n"]) == (7.0, 9.0, 4)
    assert (row["cold_load_ms"], row["cold_start_ms"], row["cold_ttft_ms"]) == (None, None, None)
    assert row["reference_label"] == "demo-q8_0"
    assert (row["agree_prefix_tokens"], row["agree_share"], row["agree_n_tokens"]) == (3, 0.625, 8)
    assert row["tg_ratio_vs_ref"] == round(81.0 / 50.0, 4) == 1.62
    assert row["pp_ratio_vs_ref"] == round(610.0 / 400.0, 4) == 1.525


SPEED_FIELDS = (
    "cold_load_ms",
    "cold_start_ms",
    "cold_ttft_ms",
    "pp_tps_median",
    "pp_tps_min",
    "pp_tps_max",
    "tg_tps_median",
    "tg_tps_min",
    "tg_tps_max",
    "ttft_ms_p50",
    "ttft_ms_p95",
    "peak_rss_mb",
    "tg_ratio_vs_ref",
    "pp_ratio_vs_ref",
    "agree_prefix_tokens",
    "agree_share",
    "agree_n_tokens",
    "n_prompt",
)


def test_failed_run_has_nulls_not_zeros(rows: list[dict[str, Any]]) -> None:
    row = json.loads(render_json(rows))[2]
    assert row["status"] == "crashed"
    assert row["reason"] == CRASH_REASON
    for name in SPEED_FIELDS:
        assert row[name] is None, name
    assert row["tg_tps_n"] == 0 and row["pp_tps_n"] == 0 and row["ttft_n"] == 0
    assert row["reference_label"] == "demo-q8_0"
    assert row["quant"] == "Q4_K_M"


def test_redone_spec_last_attempt_speaks(built: Built) -> None:
    with new_session(built.engine) as s:
        crashed = s.query(Run).filter_by(spec_id="spec-q4-ctx").one()
        mf = crashed.model_file
        assert mf is not None
        redo = _run(built.sweep_id, 2, mf, "demo-q4_k_m", spec_id="spec-q4-ctx", ctx=1024, status="ok")
        redo.measurements = [_steady(0, 70.0, 500.0, 8.0, Q4_TOKENS)]
        s.add(redo)
        s.commit()
        rows = build_rows(s, built.sweep_id)
    assert len(rows) == 3
    last = rows[2]
    assert (last["status"], last["attempts"], last["tg_tps_median"]) == ("ok", 2, 70.0)
    # other params than the reference: agreement still against the reference's tokens, no speed ratio
    assert last["agree_share"] == 0.625
    assert last["tg_ratio_vs_ref"] is None


def test_csv_header_is_the_field_names(rows: list[dict[str, Any]]) -> None:
    text = render_csv(rows)
    records = list(csv.reader(io.StringIO(text)))
    assert records[0] == list(FIELD_NAMES)
    assert len(records) == 1 + len(rows)
    failed = dict(zip(FIELD_NAMES, records[3], strict=True))
    assert failed["tg_tps_median"] == ""  # null, not 0
    assert failed["reason"] == CRASH_REASON


@pytest.mark.parametrize("render", [render_markdown, render_table])
def test_md_and_table_show_the_failure_reason(rows: list[dict[str, Any]], render: Any) -> None:
    text = render(rows)
    assert CRASH_REASON in text
    assert "demo-q8_0" in text and "demo-q4_k_m" in text


def test_unknown_and_missing_sweep(tmp_path: Path, built: Built) -> None:
    with new_session(built.engine) as s, pytest.raises(ReportError, match="no sweep with id 999"):
        build_rows(s, 999)
    empty = open_engine(tmp_path / "empty.db")
    with new_session(empty) as s, pytest.raises(ReportError, match="no sweep in this database"):
        build_rows(s)


def test_table_and_markdown_have_one_header_per_cell() -> None:
    from edgeprof.report import FIELD_NAMES, shown
    from edgeprof.report.columns import cells

    row = dict.fromkeys(FIELD_NAMES)
    row.update(model_label="m", workload="w", status="ok", ctx=1, ngl=0, threads=1, pp_tps_n=0, tg_tps_n=0)
    for fmt in ("table", "md", "html"):
        columns = shown(fmt)
        assert len(cells(columns, row)) == len([c.header for c in columns])


# -- the terminal table, fitted to its width --------------------------------------------------------
def _wide_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fixture's rows with verdicts and quality filled in, so the table has many columns with data."""
    out = []
    for i, r in enumerate(rows):
        out.append(
            {
                **r,
                "stability_verdict": "stable" if i else "unstable",
                "throttle_verdict": "not_throttled",
                "interference_verdict": "quiet",
                "mem_predicted_mb": 90.0,
                "kld_mean": 0.01 * i,
                "same_top_pct": 99.0 - i,
            }
        )
    return out


def test_the_table_fits_a_120_column_terminal_and_names_what_it_left_out(rows: list[dict[str, Any]]) -> None:
    from edgeprof.report import shown, table_lines

    wide = _wide_rows(rows)
    lines = table_lines(wide, width=120)
    assert all(len(line) <= 120 for line in lines), max(lines, key=len)
    header = next(line for line in lines if line.startswith("model"))
    for essential in ("model", "quant", "ctx", "status", "tg t/s"):
        assert essential in header
    note = " ".join(lines[lines.index(next(x for x in lines if x.startswith("(left out"))) :])
    assert note.startswith("(left out to fit 120 columns:") and "--wide" in note
    # Not measured off a Jetson: no temperature, power or J/token column at all, not even in --wide.
    full = "\n".join(table_lines(wide, wide=True))
    for absent in ("start/max °C", "W dec", "J/tok net"):
        assert absent not in full
    for present in ("RSS MiB", "KLD / same-top", "stability"):
        assert present in full
    assert "RSS MB" not in full  # the unit is MiB (VmHWM / 1024)
    assert len(full.splitlines()[0]) > 120  # --wide really is wider than the fitted table
    assert {c.header for c in shown("table")} >= {"RSS MiB"}


def test_constant_columns_are_said_once(rows: list[dict[str, Any]]) -> None:
    from edgeprof.report import table_lines

    lines = table_lines(_wide_rows(rows))
    assert lines[0].startswith("every row: ")
    assert "thr=" in lines[0]  # one thread count in the whole sweep
    header = lines[1]
    assert "thr" not in header.split()


def test_columns_picks_exactly_and_refuses_unknown_names(rows: list[dict[str, Any]]) -> None:
    from edgeprof.report import ColumnError, parse_columns, table_lines

    lines = table_lines(rows, columns=parse_columns("model,ctx,tg"))
    assert lines[0].split() == ["model", "ctx", "tg", "t/s", "med", "[min–max]"]
    with pytest.raises(ColumnError, match="unknown column\\(s\\) speed; choose from model, quant"):
        parse_columns("model,speed")
