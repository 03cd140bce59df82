"""The recommendation: the fastest variant within the quality budget that fits, on a
hand-built (synthetic) fixture DB and on synthetic report rows. What counts as faster (noise, conditions,
exclusions, the reference check) is in test_recommend_evidence.py."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support import dbbuild
from support.plans import plan_toml

from edgeprof.plan import PlanError, QualityBudget, budget_from_plan_text, parse_plan
from edgeprof.report import (
    FIELD_NAMES,
    build_rows,
    render_json,
    render_markdown,
    render_recommendations,
    render_table,
)
from edgeprof.report.recommend import recommend
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Device, Measurement, ModelFile, QualityResult, Run, Sweep

pytestmark = pytest.mark.timeout(120)

NOW = datetime(2026, 1, 2, 3, 4, 5)

# Synthetic figures. (label, quant, bytes, steady tg t/s, KLD, same-top %, status)
# F16 is the reference; Q4_K_M is fastest but outside the default budget (KLD 0.08 > 0.05); Q3_K_S would be
# faster still but was predicted not to fit. Expected: Q5_K_M best, Q8_0 runner-up. Five steady reps each,
# the least the recommendation decides on.
VARIANTS: tuple[tuple[str, str, int, list[float], float, float, str], ...] = (
    ("demo-f16", "F16", 4_000_000, [10.0, 10.5, 9.5, 10.2, 9.8], 0.0, 100.0, "ok"),
    ("demo-q8_0", "Q8_0", 2_125_000, [18.0, 18.5, 17.5, 18.2, 17.8], 0.0012, 99.1, "ok"),
    ("demo-q5_k_m", "Q5_K_M", 1_375_000, [22.0, 22.4, 21.6, 22.2, 21.8], 0.011, 96.8, "ok"),
    ("demo-q4_k_m", "Q4_K_M", 1_200_000, [26.0, 26.5, 25.5, 26.2, 25.8], 0.08, 88.0, "ok"),
    ("demo-q3_k_s", "Q3_K_S", 900_000, [], 0.2, 80.0, "skipped_memory"),
)
N_PARAMS = 2_000_000
CONDITION = "ctx 512, depth 0, ngl 0, threads 2, gen, llama-cpp"  # what the recommendation holds fixed


def _run(sweep_id: int, seq: int, mf: ModelFile, label: str, workload: str, status: str, **kw: Any) -> Run:
    return Run(
        sweep_id=sweep_id,
        spec_id=f"{label}-{workload}",
        seq=seq,
        model_file_id=mf.id,
        model_label=label,
        model_group="demo",
        model_path=mf.path,
        workload_name=workload,
        workload_hash="w" * 64,
        workload_json=json.dumps(
            {"name": workload, "kind": "quality", "n_predict": 0}
            if workload == "kld"
            else {"name": workload, "n_predict": 64}
        ),
        params_json="{}",
        repeat_json=json.dumps({"cold": 1, "warmup": 0, "steady": 3}),
        n_ctx=512,
        n_gpu_layers=0,
        n_threads=2,
        n_batch=512,
        n_ubatch=512,
        flash_attn="off",
        type_k="f16",
        type_v="f16",
        use_mmap=True,
        status=status,
        started_at=NOW,
        **kw,
    )


def _quality(run_id: int, kld: float, same_top: float, is_ref: bool) -> QualityResult:
    return dbbuild.quality_result(
        run_id, kld, reference_label="demo-f16", is_reference=is_ref, ctx=128, n_chunks=4, n_tokens=252,
        same_top_pct=same_top, ppl=10.0, ppl_se=0.1, ppl_ref=10.0, ppl_ref_se=0.1, delta_ppl=0.0,
        delta_ppl_se=0.0, ln_ppl_ratio_se=0.0,
    )  # fmt: skip


def build_fixture_db(db: Path | str, plan_text: str = "") -> tuple[Any, int]:
    """A synthetic sweep: per variant one generation run (speed) and one quality run (KLD)."""
    engine = open_engine(db)
    with new_session(engine) as s:
        device = Device(fingerprint="f" * 64, hostname="box", arch="x86_64", facts_json="{}", first_seen=NOW)
        s.add(device)
        s.flush()
        sweep = Sweep(
            name="synthetic-recommend",
            plan_text=plan_text,
            plan_hash="h" * 64,
            device_id=device.id,
            edgeprof_version="0.1.0",
            started_at=NOW,
            status="completed",
            n_specs=2 * len(VARIANTS),
            bw_probe_gbps=20.0,
        )
        s.add(sweep)
        s.flush()
        seq = 0
        for label, quant, size, tgs, kld, top, status in VARIANTS:
            sha = hashlib.sha256(label.encode()).hexdigest()  # files of their own: no two labels share one
            mf = ModelFile(path=f"/m/{label}.gguf", sha256=sha, size_bytes=size, mtime_ns=1)
            mf.n_params, mf.quant_type = N_PARAMS, quant
            s.add(mf)
            s.flush()
            gen = _run(
                sweep.id,
                seq,
                mf,
                label,
                "gen",
                status,
                mem_predicted_mb=100.0 + size / 1e5,
                mem_available_mb=140.0,
                peak_rss_mb=(98.0 + size / 1e5) if status == "ok" else None,
                reason="predicted not to fit: needs ≈ 150 MB, 140 MB available" if status != "ok" else None,
            )
            gen.measurements = [
                Measurement(kind="steady", rep=i, n_prompt=128, n_gen=63, tg_tps=tg, bw_gbps=tg * size / 1e7)
                for i, tg in enumerate(tgs)
            ]
            seq += 1
            q = _run(sweep.id, seq, mf, label, "kld", "ok" if status == "ok" else status)
            s.add_all([gen, q])
            s.flush()
            if status == "ok":
                s.add(_quality(q.id, kld, top, label == "demo-f16"))
            seq += 1
        s.commit()
        return engine, sweep.id


def _rows(tmp_path: Path, plan_text: str = "") -> list[dict[str, Any]]:
    engine, sweep_id = build_fixture_db(tmp_path / "r.db", plan_text)
    with new_session(engine) as s:
        return build_rows(s, sweep_id)


def test_recommendation_picks_the_fastest_within_budget_that_fits(tmp_path: Path) -> None:
    rows = _rows(tmp_path)
    by = {(r["model_label"], r["workload"]): r for r in rows}
    assert by[("demo-q5_k_m", "gen")]["recommendation"] == "best"
    assert by[("demo-q8_0", "gen")]["recommendation"] == "runner_up"
    assert by[("demo-q4_k_m", "gen")]["recommendation"] is None  # outside the budget
    assert by[("demo-q3_k_s", "gen")]["recommendation"] is None  # skipped_memory
    assert by[("demo-q3_k_s", "gen")]["status"] == "skipped_memory"
    text = render_table(rows)
    first = text.splitlines()[0]
    assert first.startswith(f"Recommendation ({CONDITION}): demo-q5_k_m")
    assert "mean KLD ≤ 0.05, same-top ≥ 90 %" in first
    evidence, runner = text.splitlines()[1:3]
    assert "evidence: demo-q5_k_m (Q5_K_M) · tg 22.0 t/s [21.6–22.4] n=5" in evidence
    assert "KLD 0.0110, same-top 96.8 %" in evidence
    assert runner.strip().startswith("runner-up: demo-q8_0 (Q8_0) · tg 18.0 t/s")
    assert runner.endswith("demo-q5_k_m faster beyond noise (ratio 1.22, 95 % CI 1.19–1.26)")
    assert text.splitlines()[3:5] == [
        "  excluded: demo-q4_k_m: outside the quality budget: KLD 0.0800 over 0.05, "
        "same-top 88.0 % under 90 %",
        "  excluded: demo-q3_k_s: does not fit in memory (skipped_memory: predicted not to fit: "
        "needs ≈ 150 MB, 140 MB available)",
    ]
    md_first = render_markdown(rows).splitlines()[0]
    assert md_first.startswith(f"- Recommendation ({CONDITION}): demo-q5_k_m")


def test_plan_budget_changes_the_answer(tmp_path: Path) -> None:
    plan = "[quality_budget]\nkld_mean = 0.1\nsame_top_pct = 85\n"
    rows = _rows(tmp_path, plan)
    best = [r for r in rows if r["recommendation"] == "best"]
    assert [r["model_label"] for r in best] == ["demo-q4_k_m"]


def test_report_fields_memory_and_bandwidth(tmp_path: Path) -> None:
    rows = _rows(tmp_path)
    q5 = next(r for r in rows if r["model_label"] == "demo-q5_k_m" and r["workload"] == "gen")
    assert q5["mem_predicted_mb"] == pytest.approx(113.75)
    assert q5["mem_available_mb"] == 140.0
    assert q5["bw_gbps"] == pytest.approx(22.0 * 1_375_000 / 1e7, rel=1e-3)  # median rep
    assert q5["bw_probe_gbps"] == 20.0
    assert q5["bw_pct"] == pytest.approx(round(100 * 22.0 * 1_375_000 / 1e7 / 20.0, 1))
    assert q5["bw_datasheet_gbps"] is None and q5["bw_datasheet_pct"] is None  # not a Jetson: NULL, never 0
    skipped = next(r for r in rows if r["model_label"] == "demo-q3_k_s" and r["workload"] == "gen")
    assert skipped["peak_rss_mb"] is None and skipped["bw_gbps"] is None
    assert skipped["mem_predicted_mb"] is not None
    decoded = json.loads(render_json(rows))
    assert list(decoded[0]) == list(FIELD_NAMES)
    start = FIELD_NAMES.index("mem_predicted_mb")  # appended together (schema v6); later versions follow
    assert FIELD_NAMES[start : start + 8] == (
        "mem_predicted_mb",
        "mem_available_mb",
        "bw_gbps",
        "bw_pct",
        "bw_probe_gbps",
        "bw_datasheet_gbps",
        "bw_datasheet_pct",
        "recommendation",
    )


def _row(
    label: str, tg: float | None, kld: float | None, top: float | None, status: str = "ok", **kw: Any
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "run_id": hash(label) & 0xFFFF,
        "model_label": label,
        "model_group": "g",
        "quant": label.upper(),
        "ctx": 512,
        "ngl": 0,
        "workload": "gen",
        "status": status,
        "reason": None,
        "tg_tps_median": tg,
        "tg_tps_min": tg,
        "tg_tps_max": tg,
        "tg_tps_n": 5 if tg is not None else 0,
        "_tg_tps_reps": [tg] * 5 if tg is not None else [],
        "kld_mean": kld,
        "same_top_pct": top,
        "reference_label": "f16",
        "quality_reference_label": "f16" if kld is not None else None,
    }
    row.update(kw)
    return row


def test_same_top_is_part_of_the_budget() -> None:
    rows = [_row("f16", 10.0, 0.0, 100.0), _row("q4", 30.0, 0.01, 85.0), _row("q8", 20.0, 0.001, 99.0)]
    (rec,) = recommend(rows, QualityBudget())
    assert rec.best is not None and rec.best.label == "q8"
    assert rec.runner_up is not None and rec.runner_up.label == "f16"
    assert any(x.startswith("q4: outside the quality budget") for x in rec.excluded)


def test_no_quality_at_all_falls_back_to_speed_and_says_so() -> None:
    rows = [_row("f16", 10.0, None, None), _row("q4", 30.0, None, None), _row("q8", 20.0, None, None)]
    (rec,) = recommend(rows)
    assert rec.best is not None and rec.best.label == "q4"
    assert "quality NOT measured" in render_recommendations([rec])[0]


def test_unmeasured_quality_is_not_within_budget_when_others_are_measured() -> None:
    rows = [_row("f16", 10.0, 0.0, 100.0), _row("q4", 30.0, None, None), _row("q8", 20.0, 0.001, 99.0)]
    (rec,) = recommend(rows)
    assert rec.best is not None and rec.best.label == "q8"
    assert "q4: quality not measured" in rec.excluded


def test_nothing_ran_gives_a_none_line() -> None:
    rows = [_row("q4", None, None, None, status="skipped_memory", reason="needs ≈ 5.1 GB, 3.2 GB available")]
    (rec,) = recommend(rows)
    assert rec.best is None
    line = render_recommendations([rec])[0]
    assert "none" in line and "skipped_memory" in line and "5.1 GB" in line


def test_budget_from_plan_text_and_validation(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    assert budget_from_plan_text("") == QualityBudget()
    assert budget_from_plan_text("[quality_budget]\nkld_mean = 0.02\n") == QualityBudget(kld_mean=0.02)
    models = [tiny_models["Q8_0"]]
    workloads = [{"name": "w", "prompt_tokens": 16, "n_predict": 8}]
    good = plan_toml(
        models,
        ctx=[512],
        workloads=workloads,
        run={"reserve_mb": 256},
        tables={"quality_budget": {"same_top_pct": 95}},
    )
    plan = parse_plan(good, "p.toml", tmp_path)
    assert plan.reserve_mb == 256.0
    assert plan.quality_budget == QualityBudget(same_top_pct=95.0)
    bad_budget = {"kld_mean": "low", "same_top_pct": 120, "x": 1}
    bad = plan_toml(
        models, ctx=[512], workloads=workloads, run={"reserve_mb": -1}, tables={"quality_budget": bad_budget}
    )
    with pytest.raises(PlanError) as err:
        parse_plan(bad, "p.toml", tmp_path)
    text = "\n".join(err.value.problems)
    assert "run.reserve_mb" in text
    assert "quality_budget.kld_mean: expected a number" in text
    assert "quality_budget.same_top_pct: must be between 0 and 100" in text
    assert "quality_budget.x: unknown key" in text


def test_pareto_front() -> None:
    from edgeprof.report.figures import pareto_front

    # (KLD, t/s): the reference (0, 10), (0.02, 15) dominated by (0.01, 22), the fastest (0.08, 26)
    pts = [(0.0, 10.0), (0.0012, 18.0), (0.01, 22.0), (0.02, 15.0), (0.08, 26.0)]
    assert pareto_front(pts) == [0, 1, 2, 4]
    assert pareto_front([(0.1, 5.0), (0.1, 5.0)]) == [0, 1]  # ties dominate nobody


@pytest.mark.timeout(180)
def test_html_opens_with_the_recommendation_and_draws_speed_vs_kld(tmp_path: Path) -> None:
    from edgeprof.report import render_html

    engine, sweep_id = build_fixture_db(tmp_path / "h.db")
    with new_session(engine) as s:
        page = render_html(s, sweep_id)
    assert page.index("<h2>Recommendation</h2>") < page.index("<h2>Summary</h2>")
    assert f"Recommendation ({CONDITION}): demo-q5_k_m" in page
    assert "<h3>Speed against KLD per ctx (Pareto front)</h3><div class=\"figure\"><img" in page
