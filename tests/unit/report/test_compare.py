"""Comparing two sweeps: matching, ratios of medians, the within-noise rule, and the three renderings."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy.orm import Session
from support import dbbuild

from edgeprof.report import (
    COMPARE_FIELDS,
    ReportError,
    compare_rows,
    compare_sweeps,
    describe_sweep,
    ranges_overlap,
    ratio,
    render_compare,
)
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Build, Measurement


def row(label: str = "m-q4", ctx: int = 512, **values: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "run_id": 1,
        "status": "ok",
        "model_label": label,
        "quant": "Q4_K_M",
        "ctx": ctx,
        "ngl": 0,
        "threads": 4,
        "n_batch": 512,
        "flash_attn": "auto",
        "type_k": "f16",
        "type_v": "f16",
        "workload": "w",
        "tg_tps_median": None,
        "tg_tps_min": None,
        "tg_tps_max": None,
        "pp_tps_median": None,
        "pp_tps_min": None,
        "pp_tps_max": None,
        "ttft_ms_p50": None,
        "ttft_ms_min": None,
        "ttft_ms_max": None,
    }
    base.update(values)
    return base


def tg(med: float, lo: float, hi: float) -> dict[str, float]:
    return {"tg_tps_median": med, "tg_tps_min": lo, "tg_tps_max": hi}


def test_ratio_and_overlap_helpers() -> None:
    assert ratio(10.0, 12.0) == pytest.approx(1.2)
    assert ratio(0.0, 1.0) is None and ratio(None, 1.0) is None and ratio(1.0, None) is None
    assert ranges_overlap(1, 3, 2, 4) is True
    assert ranges_overlap(1, 2, 2, 3) is True  # touching ranges share a point
    assert ranges_overlap(1, 2, 2.5, 3) is False
    assert ranges_overlap(5, 5, 5, 5) is True  # one rep each, equal values
    assert ranges_overlap(None, 2, 1, 3) is None


def test_ratios_and_within_noise() -> None:
    a = [
        row(run_id=1, **tg(10.0, 9.5, 10.5)),
        row(ctx=1024, run_id=2, **tg(8.0, 7.9, 8.1), pp_tps_median=100.0, pp_tps_min=99.0, pp_tps_max=101.0),
    ]
    b = [
        row(run_id=11, **tg(10.2, 9.9, 10.6)),  # overlaps A: within noise
        row(ctx=1024, run_id=12, **tg(9.6, 9.4, 9.8), pp_tps_median=90.0, pp_tps_min=89.0, pp_tps_max=91.0),
    ]
    out = compare_rows(a, b)
    assert [r["match"] for r in out] == ["both", "both"]
    first, second = out
    assert (first["a_run_id"], first["b_run_id"]) == (1, 11)
    assert first["tg_tps_ratio"] == pytest.approx(1.02)
    assert first["tg_tps_within_noise"] is True
    assert second["tg_tps_ratio"] == pytest.approx(1.2)
    assert second["tg_tps_within_noise"] is False
    assert second["pp_tps_ratio"] == pytest.approx(0.9)
    assert second["pp_tps_within_noise"] is False
    # not measured on either side: no ratio, no noise claim
    assert first["pp_tps_ratio"] is None and first["pp_tps_within_noise"] is None
    assert first["ttft_ms_ratio"] is None


def test_matching_uses_every_key_and_lists_unmatched_configs() -> None:
    a = [row(run_id=1, **tg(10, 9, 11)), row(label="m-q8", run_id=2, **tg(5, 4, 6))]
    b = [
        row(run_id=11, **tg(11, 10, 12)),
        row(run_id=12, threads=8, **tg(14, 13, 15)),  # same model, other thread count: another config
        row(label="m-q4", run_id=13, workload="long", **tg(9, 8, 10)),
    ]
    out = compare_rows(a, b)
    assert [(r["match"], r["a_run_id"], r["b_run_id"]) for r in out] == [
        ("both", 1, 11),
        ("only_a", 2, None),
        ("only_b", None, 12),
        ("only_b", None, 13),
    ]
    only_a = out[1]
    assert only_a["tg_tps_a"] == 5 and only_a["tg_tps_b"] is None and only_a["tg_tps_ratio"] is None
    text = render_compare(out, "table")
    assert "only in A: m-q8 ctx=512" in text
    assert "only in B: m-q4 ctx=512 ngl=0 t=8" in text
    assert "3 unmatched config(s)" in text


def test_a_failed_side_has_no_ratio() -> None:
    out = compare_rows([row(**tg(10, 9, 11))], [row(status="oom")])
    assert out[0]["match"] == "both" and out[0]["b_status"] == "oom"
    assert out[0]["tg_tps_ratio"] is None and out[0]["tg_tps_within_noise"] is None
    assert "10.0→—" in render_compare(out, "table")


def test_renderings() -> None:
    out = compare_rows(
        [row(**tg(10, 9.5, 10.5), ttft_ms_p50=50.0, ttft_ms_min=48.0, ttft_ms_max=52.0)],
        [row(**tg(12, 11.8, 12.2), ttft_ms_p50=40.0, ttft_ms_min=39.0, ttft_ms_max=41.0)],
    )
    table = render_compare(out, "table")
    assert "10.0→12.0 ×1.20" in table and "(noise)" not in table.splitlines()[2]
    assert "50.00→40.00 ×0.80" in table
    md = render_compare(out, "md")
    assert md.splitlines()[0].startswith("| model | quant |") and "| 10.0→12.0 ×1.20 |" in md
    data = json.loads(render_compare(out, "json"))
    assert list(data[0]) == list(COMPARE_FIELDS)
    assert data[0]["tg_tps_ratio"] == 1.2 and data[0]["tg_tps_within_noise"] is False
    noisy = compare_rows([row(**tg(10, 9, 11))], [row(**tg(10.5, 10, 11))])
    assert "×1.05 (noise)" in render_compare(noisy, "table")
    # A ratio between a busy or noisy side and a quiet one says so instead of reading as a finding.
    busy = compare_rows([row(**tg(10, 9.5, 10.5))], [row(**tg(22, 21, 23), stability_verdict="unstable")])
    assert busy[0]["b_caveat"] == "unstable" and busy[0]["a_caveat"] is None
    assert "×2.20 (B unstable)" in render_compare(busy, "table")
    contended = compare_rows(
        [row(**tg(10, 9.5, 10.5), interference_verdict="contended")], [row(**tg(22, 21, 23))]
    )
    assert "(A contended)" in render_compare(contended, "table")
    with pytest.raises(ValueError, match="unknown format"):
        render_compare(out, "xml")
    assert "(no config appears in both sweeps)" in render_compare([], "table")


# -- from a database ---------------------------------------------------------------------------------------
def add_sweep(
    s: Session, name: str, configs: Sequence[tuple[str, int, str, list[float], list[float]]]
) -> int:
    sweep = dbbuild.add_sweep(s, name=name, n_specs=len(configs))
    for seq, (label, ctx, status, tgs, ttfts) in enumerate(configs, start=1):
        run = dbbuild.add_run(
            s,
            sweep,
            seq,
            spec_id=f"{label}-{ctx}",
            model_label=label,
            model_path=f"/{label}.gguf",
            workload_json='{"n_predict": 32}',
            n_ctx=ctx,
            status=status,
        )
        for i, (v, ttft) in enumerate(zip(tgs, ttfts, strict=True)):
            s.add(Measurement(run_id=run.id, kind="steady", rep=i, tg_tps=v, pp_tps=100.0, ttft_ms=ttft))
        s.add(Measurement(run_id=run.id, kind="cold", rep=0, tg_tps=1.0, pp_tps=1.0, ttft_ms=999.0))
    s.commit()
    return sweep.id


def test_compare_sweeps_from_the_database(any_db: str) -> None:
    engine = open_engine(any_db)  # SQLite and PostgreSQL (a fleet's central database)
    with new_session(engine) as s:
        a = add_sweep(
            s,
            "a",
            [
                ("m-q4", 512, "ok", [10.0, 11.0, 12.0, 10.5, 11.5], [50.0, 52.0, 54.0, 51.0, 53.0]),
                ("m-q8", 512, "ok", [6.0, 6.1, 6.2], [70.0, 71.0, 72.0]),
                ("m-f16", 512, "oom", [], []),
                ("m-q5", 512, "ok", [10.0, 10.2, 10.1], [50.0, 50.0, 50.0]),
            ],
        )
        b = add_sweep(
            s,
            "b",
            [
                ("m-q4", 512, "ok", [14.0, 15.0, 16.0, 14.5, 15.5], [40.0, 41.0, 42.0, 40.5, 41.5]),
                ("m-q8", 512, "ok", [6.1, 6.2, 6.4], [69.0, 70.0, 71.5]),
                ("m-q4", 1024, "ok", [9.0, 9.0, 9.0], [60.0, 60.0, 60.0]),
                ("m-q5", 512, "ok", [15.7, 15.9, 16.0], [50.0, 50.0, 50.0]),
            ],
        )
        out = compare_sweeps(s, a, b)
        with pytest.raises(ReportError):
            compare_sweeps(s, a, 999)
    by = {(r["model_label"], r["ctx"], r["match"]): r for r in out}
    q4 = by[("m-q4", 512, "both")]
    assert q4["tg_tps_ratio"] == pytest.approx(15.0 / 11.0, abs=1e-4)
    assert q4["tg_tps_within_noise"] is False  # 5 reps a side, the rank interval excludes 1
    # TTFT: ratio of p50s, noise judged by the same interval on the steady reps (the cold request is no rep)
    assert q4["ttft_ms_a"] == 52.0 and q4["ttft_ms_b"] == 41.0
    assert q4["ttft_ms_ratio"] == pytest.approx(41.0 / 52.0, abs=1e-4)
    assert q4["ttft_ms_within_noise"] is False
    q8 = by[("m-q8", 512, "both")]
    assert q8["tg_tps_within_noise"] is True and q8["ttft_ms_within_noise"] is True
    # ×1.57 with every rep of B above every rep of A, but 3 reps a side: no 95 % rank interval can exclude 1
    q5 = by[("m-q5", 512, "both")]
    assert q5["tg_tps_ratio"] == pytest.approx(1.574, abs=1e-3)
    assert q5["tg_tps_within_noise"] is True
    assert by[("m-f16", 512, "only_a")]["a_status"] == "oom"
    assert ("m-q4", 1024, "only_b") in by
    assert len(out) == 5


# -- naming A and B, fitting the terminal ----------------------------------------------------------------
def busy_pairs() -> list[dict[str, Any]]:
    """Two depths of two models with every figure and a caveat on each side: the widest table there is."""
    a, b = [], []
    for i, (label, depth) in enumerate([("tiny-q8_0", 0), ("tiny-q8_0", 64), ("tiny-q4_k_m", 0)]):
        def figures(k: float) -> dict[str, float]:
            return {**tg(11971.3 * k, 11000.0 * k, 12500.0 * k), "pp_tps_median": 30217.2 * k,
                    "pp_tps_min": 30000.0 * k, "pp_tps_max": 31000.0 * k, "ttft_ms_p50": 1.18 * k,
                    "ttft_ms_min": 1.1 * k, "ttft_ms_max": 1.3 * k}  # fmt: skip

        a.append(row(label, run_id=i, depth=depth, n_batch=2048 + i, interference_verdict="contended",
                     **figures(1.0 + i)))  # fmt: skip
        b.append(row(label, run_id=10 + i, depth=depth, n_batch=2048 + i, interference_verdict="contended",
                     stability_verdict="unstable" if i else None, **figures(1.1 + i)))  # fmt: skip
    return compare_rows(a, b)


SIDES = [
    {"sweep_id": 3, "name": "nightly", "device_hostname": "orin", "device_board_model": "Jetson Orin Nano",
     "device_l4t_release": "36.4.0", "builds": ["llama-cpp-python 0.3.8 (cuda)"],
     "started_at": "2026-01-02 01:00"},
    {"sweep_id": 5, "name": "nightly", "device_hostname": "vm", "device_board_model": None,
     "device_l4t_release": None, "builds": [], "started_at": None},
]  # fmt: skip


def test_the_output_names_a_and_b() -> None:
    out = busy_pairs()
    table = render_compare(out, "table", sides=SIDES).splitlines()
    assert table[0] == (
        "A: sweep 3 'nightly' on orin (Jetson Orin Nano, L4T 36.4.0), llama-cpp-python 0.3.8 (cuda), "
        "started 2026-01-02 01:00"
    )
    assert table[1] == "B: sweep 5 'nightly' on vm, no build recorded" and table[2] == ""
    md = render_compare(out, "md", sides=[SIDES[0], {**SIDES[1], "database": "central.db"}]).splitlines()
    assert md[0].startswith("**A**: sweep 3 'nightly' on orin")
    assert md[0].endswith("  ")  # a Markdown line break
    assert md[1] == "**B**: sweep 5 'nightly' in central.db on vm, no build recorded  "
    assert md[3].startswith("| model | quant | ctx | depth |")
    assert json.loads(render_compare(out, "json", sides=SIDES))[0].keys() == set(COMPARE_FIELDS)  # unchanged


@pytest.mark.parametrize("width", [40, 80, 100, 120, 160])
def test_the_table_fits_the_terminal(width: int) -> None:
    text = render_compare(busy_pairs(), "table", sides=SIDES, width=width)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width, text
    if width < 80:
        return  # narrower than its essential columns: its lines wrap, as the report's do
    header = next(line for line in lines if line.startswith("model"))
    for kept in ("model", "depth", "workload", "tg t/s", "caveat"):  # what the row is, its speed, why not
        assert kept in header, (kept, header)
    # each side's caveat once per row, never once per metric cell (the legend names the letters)
    assert text.count("contended") == (1 if width < 160 else 6)
    if width < 160:  # caveats in letters, the least telling columns left out and named
        assert "A c, B u+c" in text and "(u unstable, c contended, t throttled)" in text
        assert any(line.startswith("(left out to fit") and "TTFT" in line for line in lines)
    else:  # in words, and every column
        assert "A contended, B unstable+contended" in text and "left out" not in text


def test_an_unfitted_table_says_caveats_in_every_cell() -> None:
    text = render_compare(busy_pairs(), "table")  # piped, --wide: as wide as its cells
    assert "(A contended, B unstable+contended)" in text and "caveat" not in text.splitlines()[2]
    assert text.count("(A contended, B contended)") == 3  # tg, pp and TTFT of the first row
    assert "left out" not in text
    # a table that fits with the caveats in its cells is left so
    assert render_compare(busy_pairs(), "table", width=10_000) == text


def test_rows_at_two_depths_are_told_apart() -> None:
    text = render_compare(busy_pairs(), "table", width=80)
    rows = [line for line in text.splitlines() if line.startswith("tiny-q8_0")]
    assert len(rows) == 2 and rows[0].split()[1:2] != rows[1].split()[1:2]  # depth 0, then 64
    only = compare_rows([row(depth=64, run_id=1)], [])
    assert "only in A: m-q4 ctx=512 depth=64 ngl=0" in render_compare(only, "table")


def test_describe_sweep(any_db: str) -> None:
    engine = open_engine(any_db)
    with new_session(engine) as s:
        device = dbbuild.add_device(s, hostname="orin", board_model="Jetson AGX Orin", l4t_release="36.4.0")
        sweep = dbbuild.add_sweep(s, device, name="nightly")
        for i, (version, backend) in enumerate([("0.3.8", "cuda"), ("0.3.8", "cuda"), ("0.3.9", "cpu")]):
            build = Build(fingerprint=f"b{i}", llama_cpp_python_version=version, backend=backend,
                          gpu_offload=True, system_info="", first_seen=dbbuild.T0)  # fmt: skip
            s.add(build)
            s.flush()
            dbbuild.add_run(s, sweep, i, build_id=build.id)
        s.commit()
        about = describe_sweep(s, sweep.id)
        with pytest.raises(ReportError):
            describe_sweep(s, 999)
    assert about["builds"] == ["llama-cpp-python 0.3.8 (cuda)", "llama-cpp-python 0.3.9 (cpu)"]
    assert (about["sweep_id"], about["name"], about["device_hostname"]) == (sweep.id, "nightly", "orin")
    assert about["started_at"] == "2024-01-01 00:00"
