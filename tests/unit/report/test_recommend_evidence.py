"""What the recommendation takes as evidence, on hand-built (synthetic) fixture databases: "faster" only
beyond the noise, noisy rows never decide, depth and thread rows never compete, every excluded variant is
listed with its reason in every format, and a suspect reference is flagged."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session
from support import dbbuild

from edgeprof.report import build_rows, render_html, render_json, render_markdown, render_table
from edgeprof.stats import median
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Measurement, ModelFile, QualityResult, Verdict

pytestmark = pytest.mark.timeout(120)

N_PARAMS = 1_000_000
REFERENCE = "demo-f16"
# Seven steady reps within ±0.5 % of 1, in two orders: a quiet machine's spread.
TIGHT = [1.0, 1.004, 0.996, 1.002, 0.998, 1.003, 0.997]
TIGHT_TOO = [1.003, 0.997, 1.0, 0.995, 1.005, 1.001, 0.999]


@dataclass
class Variant:
    label: str
    quant: str
    bpw: float  # from the tensor sizes
    reps: list[float]  # steady tg t/s
    kld: float | None = None  # None: no quality run
    same_top: float = 99.0
    status: str = "ok"
    reason: str | None = None
    sha: str | None = None  # the same sha256 for two labels: the same file twice
    verdicts: dict[str, str] = field(default_factory=dict)  # kind -> value
    run: dict[str, Any] = field(default_factory=dict)  # Run columns (n_threads, depth, ...)


def scaled(speed: float, shape: list[float] = TIGHT) -> list[float]:
    return [round(speed * x, 4) for x in shape]


def _model_file(s: Session, v: Variant) -> ModelFile:
    mf = ModelFile(
        path=f"/m/{v.label}.gguf",
        sha256=(v.sha or v.label.ljust(64, "0"))[:64],
        size_bytes=int(v.bpw * N_PARAMS / 8) + 300_000,  # the tokenizer and metadata on top of the tensors
        mtime_ns=1,
        n_params=N_PARAMS,
        quant_type=v.quant,
        tensor_bytes=int(v.bpw * N_PARAMS / 8),
    )
    s.add(mf)
    s.flush()
    return mf


def _quality(run_id: int, v: Variant) -> QualityResult:
    kld = float(v.kld or 0.0)
    return dbbuild.quality_result(
        run_id, kld, reference_label=REFERENCE, is_reference=v.label == REFERENCE, ctx=128, n_chunks=4,
        n_tokens=252, kld_se=kld / 20, same_top_pct=v.same_top, ppl=10.0, ppl_ref=10.0, delta_ppl=0.0,
    )  # fmt: skip


def build(db: Path, variants: list[Variant], plan_text: str = "") -> tuple[Any, int]:
    """A sweep of one model group: per variant its generation runs (steady reps, verdicts) and, where it
    has a KLD, one quality run."""
    engine = open_engine(db)
    with new_session(engine) as s:
        sweep = dbbuild.add_sweep(s, name="evidence", plan_text=plan_text, n_specs=2 * len(variants))
        files: dict[str, ModelFile] = {}
        quality_done: set[str] = set()
        for seq, v in enumerate(variants):
            mf = files.get(v.label) or _model_file(s, v)
            files[v.label] = mf
            common = {
                "model_file_id": mf.id,
                "model_label": v.label,
                "model_group": "demo",
                "model_path": mf.path,
            }
            gen = dbbuild.add_run(s, sweep, 2 * seq, workload_name="gen", status=v.status, reason=v.reason,
                                  **common, **v.run)  # fmt: skip
            s.add_all(
                Measurement(run_id=gen.id, kind="steady", rep=i, tg_tps=tg) for i, tg in enumerate(v.reps)
            )
            s.add_all(
                Verdict(run_id=gen.id, kind=k, value=val, evidence_json="{}") for k, val in v.verdicts.items()
            )
            if v.kld is not None and v.label not in quality_done:
                quality_done.add(v.label)
                kind = json.dumps({"name": "kld", "kind": "quality", "n_predict": 0})
                q = dbbuild.add_run(
                    s, sweep, 2 * seq + 1, workload_name="kld", workload_json=kind, n_ctx=128, **common
                )
                s.add(_quality(q.id, v))
        s.commit()
        return engine, sweep.id


def rows_of(tmp_path: Path, variants: list[Variant], plan_text: str = "") -> list[dict[str, Any]]:
    engine, sweep_id = build(tmp_path / "e.db", variants, plan_text)
    with new_session(engine) as s:
        return build_rows(s, sweep_id)


def recommendation_text(rows: list[dict[str, Any]]) -> list[str]:
    text = render_table(rows).split("\n\n", 1)[0]  # the report opens with the answer
    return text.splitlines()


def gen(rows: list[dict[str, Any]], label: str) -> dict[str, Any]:
    (row,) = [r for r in rows if r["model_label"] == label and r["workload"] == "gen"]
    return row


def f16(speed: float = 10.0) -> Variant:
    return Variant(REFERENCE, "F16", 16.0, scaled(speed), kld=0.0, same_top=100.0)


def test_the_same_file_under_two_labels_is_a_tie_never_fastest(tmp_path: Path) -> None:
    sha = "s" * 64  # two copies of one file: whatever the reps say, neither is faster
    a = Variant("demo-q8_0-a", "Q8_0", 8.5, [20.0, 20.3, 19.8, 20.1, 19.9, 20.2, 20.05], kld=0.0012, sha=sha)
    b = Variant("demo-q8_0-b", "Q8_0", 8.5, [20.1, 19.9, 20.2, 20.0, 19.85, 20.25, 20.0], kld=0.0012, sha=sha)
    rows = rows_of(tmp_path, [f16(), a, b])
    head, *rest = recommendation_text(rows)
    assert "fastest" not in "\n".join([head, *rest])
    # nothing measured sets one copy apart (their quality alike, memory and energy not measured): no pick
    assert head.startswith(
        "Recommendation (ctx 512, depth 0, ngl 0, threads 4, gen, llama-cpp): none picked — tie within noise "
        "between demo-q8_0-a and demo-q8_0-b (ratio 1.00, 95 % CI "
    )
    assert "nothing measured breaks it: quality alike; memory not measured for every one" in head
    ci = head.split("95 % CI ", 1)[1].split(")", 1)[0]
    low, high = (float(x) for x in ci.split("–"))
    assert low < 1.0 < high
    assert {gen(rows, x)["recommendation_decision"] for x in (REFERENCE, a.label, b.label)} == {"tie"}
    assert gen(rows, a.label)["recommendation"] is None and gen(rows, b.label)["recommendation"] is None
    ratio = gen(rows, b.label)
    assert ratio["tg_ratio_vs_best_ci_low"] < 1.0 < ratio["tg_ratio_vs_best_ci_high"]


def test_a_variant_twenty_percent_faster_over_seven_tight_reps_is_picked(tmp_path: Path) -> None:
    q8 = Variant("demo-q8_0", "Q8_0", 8.5, scaled(20.0), kld=0.002)
    q4 = Variant("demo-q4_k_m", "Q4_K_M", 4.9, scaled(24.0, TIGHT_TOO), kld=0.02)  # worse, within budget
    rows = rows_of(tmp_path, [f16(), q8, q4])
    head, evidence, runner, *_ = recommendation_text(rows)
    assert head.endswith("demo-q4_k_m — fastest within mean KLD ≤ 0.05, same-top ≥ 90 % that fits in memory")
    assert "evidence: demo-q4_k_m (Q4_K_M) · tg 24.0 t/s" in evidence and "n=7" in evidence
    assert runner.startswith("  runner-up: demo-q8_0 (Q8_0) · tg 20.0 t/s")
    assert runner.endswith("demo-q4_k_m faster beyond noise (ratio 1.200, 95 % CI 1.195–1.205)")
    assert gen(rows, "demo-q4_k_m")["recommendation"] == "best"
    assert gen(rows, "demo-q4_k_m")["recommendation_decision"] == "faster"
    slower = gen(rows, "demo-q8_0")
    assert slower["tg_ratio_vs_best"] == pytest.approx(20 / 24, abs=1e-3)
    assert slower["tg_ratio_vs_best_ci_high"] < 1.0


@pytest.mark.parametrize(
    ("noisy", "why", "rerun"),
    [
        ({"verdicts": {"interference": "contended"}}, "contended", "rerun on a quiet machine"),
        ({"verdicts": {"stability": "unstable"}}, "unstable", "rerun on a quiet machine"),
        ({"reps": scaled(24.0)[:3]}, "3 steady reps < 5", "rerun with [repeat] steady ≥ 5"),
    ],
)
def test_noisy_rows_or_too_few_reps_give_no_decision(
    tmp_path: Path, noisy: dict[str, Any], why: str, rerun: str
) -> None:
    q8 = Variant("demo-q8_0", "Q8_0", 8.5, scaled(20.0), kld=0.002)
    q4 = Variant("demo-q4_k_m", "Q4_K_M", 4.9, scaled(24.0), kld=0.02)
    for key, value in noisy.items():
        setattr(q4, key, value)
    rows = rows_of(tmp_path, [f16(), q8, q4])
    (head,) = recommendation_text(rows)
    where = "ctx 512, depth 0, ngl 0, threads 4, gen, llama-cpp"
    assert head == f"Recommendation ({where}): no decision: demo-q4_k_m ({why}); {rerun}"
    assert all(r["recommendation"] is None for r in rows)
    assert gen(rows, "demo-q4_k_m")["recommendation_excluded"] == why
    assert {gen(rows, x)["recommendation_decision"] for x in (REFERENCE, "demo-q8_0")} == {"no_decision"}


def test_the_plan_sets_the_reps_a_decision_needs(tmp_path: Path) -> None:
    q8 = Variant("demo-q8_0", "Q8_0", 8.5, scaled(20.0), kld=0.002)
    q4 = Variant("demo-q4_k_m", "Q4_K_M", 4.9, scaled(24.0)[:3], kld=0.02)
    rows = rows_of(tmp_path, [f16(), q8, q4], "[quality_budget]\nmin_reps = 3\n")
    assert gen(rows, "demo-q4_k_m")["recommendation"] == "best"
    assert "faster beyond noise (ratio 1.20, 95 % CI" in recommendation_text(rows)[2]


def test_depth_rows_never_compete_thread_counts_do(tmp_path: Path) -> None:
    variants = []
    # Another depth is another question; another thread count on the same file is a rival, as a quant is.
    for label, quant, bpw, kld, speed in (("demo-q4_k_m", "Q4_K_M", 4.9, 0.02, 30.0),
                                          ("demo-q8_0", "Q8_0", 8.5, 0.002, 20.0)):  # fmt: skip
        for depth, threads, factor in ((0, 1, 1.0), (64, 1, 0.95), (0, 2, 1.5), (64, 2, 1.4)):
            run = {"depth": depth, "n_threads": threads}
            variants.append(Variant(label, quant, bpw, scaled(speed * factor), kld=kld, run=run))
    rows = rows_of(tmp_path, variants)
    text = recommendation_text(rows)
    lines = [x for x in text if x.startswith("Recommendation")]
    assert [x.split(": demo")[0] for x in lines] == [
        f"Recommendation (ctx 512, depth {d}, ngl 0, gen, llama-cpp)" for d in (0, 64)
    ]
    assert all(": demo-q4_k_m threads 2 — fastest" in x for x in lines)
    runner_ups = [x for x in text if x.startswith("  runner-up:")]
    assert len(runner_ups) == 2
    assert all(x.startswith("  runner-up: demo-q4_k_m threads 1 (Q4_K_M)") for x in runner_ups)
    advice = [x for x in text if x.startswith("  advice:")]
    assert advice[0].startswith("  advice: threads 2: 1.5× faster than threads 1 here (ratio 1.50")
    # 1.4 / 0.95
    assert advice[1].startswith("  advice: threads 2: 1.5× faster than threads 1 here (ratio 1.47")
    for depth in (0, 64):
        same = [r for r in rows if r["workload"] == "gen" and r["depth"] == depth]
        assert sorted(str(r["recommendation"]) for r in same) == ["None", "None", "best", "runner_up"]


def test_thread_counts_within_noise_are_said_so() -> None:
    from edgeprof.report.recommend import recommend, render_recommendations

    rows = [
        _speed_row(1, "q4", 4.9, scaled(20.0), threads=1),
        _speed_row(2, "q4", 4.9, scaled(20.05), threads=2),
    ]
    (rec,) = recommend(rows)
    assert rec.decision == "tie"
    lines = render_recommendations([rec])
    assert lines[0].startswith(
        "Recommendation (ctx 512, depth 0, ngl 0, gen, llama-cpp): none picked — tie within noise between "
        "q4 threads 2 and q4 threads 1"
    )
    noise = "  advice: threads 2 and threads 1: within noise here (ratio 1.00"
    assert any(x.startswith(noise) for x in lines)


# variant -> what its reason says, in every format
EXCLUDED = {
    "demo-q6_k": "contended",
    "demo-q5_1": "unstable",
    "demo-q5_0": "4 steady reps < 5",
    "demo-q4_0": "outside the quality budget: KLD 0.0800 over 0.05",
    "demo-q4_k_s": "outside the quality budget: same-top 86.5 % under 90 %",
    "demo-q3_k_s": "does not fit in memory (skipped_memory: predicted not to fit: needs ≈ 150 MiB, "
    "140 MiB available)",
    "demo-q2_k": "failed (crashed: llama.cpp exited with SIGSEGV)",
    "demo-iq2_xs": "quality not measured",
}


def _every_reason() -> list[Variant]:
    fit = "predicted not to fit: needs ≈ 150 MiB, 140 MiB available"
    return [
        f16(),
        Variant("demo-q8_0", "Q8_0", 8.5, scaled(20.0), kld=0.001),
        Variant("demo-q6_k", "Q6_K", 6.6, scaled(21.0), kld=0.002, verdicts={"interference": "contended"}),
        Variant("demo-q5_1", "Q5_1", 6.0, scaled(22.0), kld=0.004, verdicts={"stability": "unstable"}),
        Variant("demo-q5_0", "Q5_0", 5.5, scaled(23.0)[:4], kld=0.006),
        Variant("demo-q4_0", "Q4_0", 4.5, scaled(26.0), kld=0.08),
        Variant("demo-q4_k_s", "Q4_K_S", 4.6, scaled(27.0), kld=0.03, same_top=86.5),
        Variant("demo-q3_k_s", "Q3_K_S", 3.5, [], kld=None, status="skipped_memory", reason=fit),
        Variant(
            "demo-q2_k", "Q2_K", 2.6, [], kld=0.3, status="crashed", reason="llama.cpp exited with SIGSEGV"
        ),
        Variant("demo-iq2_xs", "IQ2_XS", 2.3, scaled(32.0)),
    ]


def test_every_excluded_variant_is_listed_with_its_reason_in_every_format(tmp_path: Path) -> None:
    engine, sweep_id = build(tmp_path / "x.db", _every_reason())
    with new_session(engine) as s:
        rows = build_rows(s, sweep_id)
        page = render_html(s, sweep_id)
    table, md = render_table(rows), render_markdown(rows)
    noisy = ("demo-q6_k", "demo-q5_1", "demo-q5_0")
    head = (
        "no decision: demo-q6_k (contended); demo-q5_1 (unstable); demo-q5_0 (4 steady reps < 5); "
        "rerun on a quiet machine with [repeat] steady ≥ 5"
    )
    assert head in table and head in md and html.escape(head) in page
    for label, why in EXCLUDED.items():
        line = f"{label} ({why})" if label in noisy else f"excluded: {label}: {why}"
        assert line in table, label
        assert line in md, label
        assert html.escape(line) in page, label
    by_label = {r["model_label"]: r for r in json.loads(render_json(rows)) if r["workload"] == "gen"}
    for label, why in EXCLUDED.items():
        assert by_label[label]["recommendation_excluded"] == why, label
    assert by_label["demo-q8_0"]["recommendation_excluded"] is None  # it competed


def test_the_chart_draws_both_budget_lines_and_marks_what_is_outside() -> None:
    from edgeprof.plan import QualityBudget
    from edgeprof.report.figures import speed_vs_kld_figure

    rows = [
        {"model_label": label, "quant": None, "status": "ok", "ctx": 512, "ngl": 0, "workload": "gen",
         "depth": 0, "threads": 4, "tg_tps_median": tg, "tg_tps_min": tg, "tg_tps_max": tg, "kld_mean": kld,
         "same_top_pct": top}
        for label, tg, kld, top in (("f16", 10.0, 0.0, 100.0), ("q5", 22.0, 0.01, 86.5),
                                    ("q8", 18.0, 0.001, 99.0))
    ]  # fmt: skip
    fig = speed_vs_kld_figure(rows, QualityBudget(kld_mean=0.04, same_top_pct=92.0))
    assert fig is not None
    speed, same_top = fig.axes
    vertical = [tuple(line.get_xdata()) for ax in (speed, same_top) for line in ax.get_lines()]
    assert vertical.count((0.04, 0.04)) == 2  # the KLD limit, in both panels
    assert [tuple(line.get_ydata()) for line in same_top.get_lines()].count((92.0, 92.0)) == 1
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert " same-top budget 92 %" in texts and texts.count(" KLD budget 0.04") == 2
    markers = [line.get_marker() for line in same_top.get_lines() if len(line.get_xdata()) == 1]
    assert sorted(markers) == ["X", "o", "o"]  # q5 is under the same-top budget


def _reference_check(tmp_path: Path, variants: list[Variant]) -> tuple[list[str], dict[str, Any], str]:
    engine, sweep_id = build(tmp_path / "q.db", variants)
    with new_session(engine) as s:
        rows = build_rows(s, sweep_id)
        page = render_html(s, sweep_id)
    found = [x for x in recommendation_text(rows) if x.startswith("Reference check")]
    for line in found:
        assert line in render_markdown(rows) and html.escape(line) in page
    return found, gen(rows, variants[-1].label), page


def test_a_lower_kld_at_fewer_bits_flags_the_reference(tmp_path: Path) -> None:
    q5 = Variant("demo-q5_k_m", "Q5_K_M", 5.7, scaled(20.0), kld=0.021)
    q4 = Variant("demo-q4_k_m", "Q4_K_M", 4.9, scaled(24.0), kld=0.012)
    found, row, _ = _reference_check(tmp_path, [f16(), q5, q4])
    expect = (
        "Reference check: demo-q4_k_m (4.90 bits per weight) has a lower KLD than demo-q5_k_m (5.70): "
        "0.0120 against 0.0210; the reference may itself be dequantized; KLD then measures distance from "
        "that file"
    )
    assert found == [expect]
    assert row["quality_warning"] == expect.split(": ", 1)[1]
    assert row["bits_per_weight"] == pytest.approx(4.9, abs=1e-3)  # the tensors, not the file's 7.3


def test_a_quantized_reference_is_flagged_and_a_sane_set_is_not(tmp_path: Path) -> None:
    monotone = [f16(), Variant("demo-q5_k_m", "Q5_K_M", 5.7, scaled(20.0), kld=0.012),
                Variant("demo-q4_k_m", "Q4_K_M", 4.9, scaled(24.0), kld=0.021)]  # fmt: skip
    (tmp_path / "sane").mkdir()
    found, row, _ = _reference_check(tmp_path / "sane", monotone)
    assert found == [] and row["quality_warning"] is None
    (tmp_path / "q8").mkdir()
    quantized = [Variant(REFERENCE, "Q8_0", 8.5, scaled(20.0), kld=0.0, same_top=100.0),
                 Variant("demo-q4_k_m", "Q4_K_M", 4.9, scaled(24.0), kld=0.021)]  # fmt: skip
    found, _, _ = _reference_check(tmp_path / "q8", quantized)
    assert found == [
        "Reference check: the reference demo-f16 has 8.50 bits per weight (under 9): it is itself "
        "quantized; KLD then measures distance from that file, not from the original weights"
    ]


def _speed_row(run_id: int, label: str, bpw: float, reps: list[float], **kw: Any) -> dict[str, Any]:
    """A report row as build_rows gives it, without a database (no quality measured)."""
    row: dict[str, Any] = {
        "run_id": run_id, "model_label": label, "model_group": "g", "quant": label.upper(), "workload": "gen",
        "runner": "llama-cpp", "status": "ok", "reason": None, "bits_per_weight": bpw,
        "tg_tps_median": median(reps), "tg_tps_min": min(reps, default=None),
        "tg_tps_max": max(reps, default=None),
        "tg_tps_n": len(reps), "_tg_tps_reps": reps, "kld_mean": None, "same_top_pct": None,
        "ctx": 512, "depth": 0, "ngl": 0, "threads": 4, "flash_attn": "off",
    }  # fmt: skip
    row.update(kw)
    return row


def test_without_kld_a_tie_is_not_broken_on_bits_per_weight() -> None:
    """Bits per weight are not a measured quality: without a quality run a tie picks nothing."""
    from edgeprof.report import render_recommendations
    from edgeprof.report.recommend import recommend

    rows = [
        _speed_row(1, "q4", 4.9, scaled(20.0)),
        _speed_row(2, "q8", 8.5, scaled(20.0, TIGHT_TOO)),
        _speed_row(3, "q6", 6.6, scaled(20.02)),
    ]
    (rec,) = recommend(rows)
    assert rec.decision == "tie" and rec.best is None
    head, runner, also = render_recommendations([rec])
    assert head.startswith("Recommendation (ctx 512, depth 0, ngl 0, threads 4, gen, llama-cpp): none picked")
    assert 'nothing measured breaks it: quality not measured (add a kind = "quality" workload)' in head
    assert "bits per weight" not in head and "chose" not in head
    assert runner.startswith("  tied: ") and also.startswith("  also within noise: ")


def test_the_only_variant_left_is_named_with_what_is_wrong_with_its_figures() -> None:
    from edgeprof.report import render_recommendations
    from edgeprof.report.recommend import recommend

    rows = [
        _speed_row(1, "q8", 8.5, scaled(20.0)[:3], interference_verdict="contended"),
        _speed_row(2, "f16", 16.0, [], status="skipped_memory", reason="needs ≈ 900 MiB, 500 MiB available",
                   tg_tps_median=None),
    ]  # fmt: skip
    (rec,) = recommend(rows)
    assert rec.decision == "only"
    assert render_recommendations([rec])[0].endswith(
        "q8 — the only variant that fits in memory (its own speed figures: contended, 3 steady reps < 5); "
        'quality NOT measured (add a kind = "quality" workload)'
    )


def test_a_parameter_the_sweep_varies_is_a_condition_and_is_named() -> None:
    from edgeprof.report import render_recommendations
    from edgeprof.report.recommend import recommend

    rows = [
        _speed_row(i, label, bpw, scaled(speed), type_k=kv)
        for i, (label, bpw, speed, kv) in enumerate(
            (
                ("q8", 8.5, 20.0, "f16"),
                ("q4", 4.9, 30.0, "f16"),
                ("q8", 8.5, 26.0, "q8_0"),
                ("q4", 4.9, 25.0, "q8_0"),
            )
        )
    ]
    heads = [x for x in render_recommendations(recommend(rows)) if x.startswith("Recommendation")]
    rule = 'fastest that fits in memory; quality NOT measured (add a kind = "quality" workload)'
    assert heads == [
        f"Recommendation (ctx 512, depth 0, ngl 0, threads 4, gen, llama-cpp, type_k f16): q4 — {rule}",
        f"Recommendation (ctx 512, depth 0, ngl 0, threads 4, gen, llama-cpp, type_k q8_0): q8 — {rule}",
    ]


def test_a_speed_parameter_competes_within_the_file() -> None:
    from edgeprof.report.recommend import recommend, render_recommendations

    rows = [
        _speed_row(i, label, bpw, scaled(speed), flash_attn=fa)
        for i, (label, bpw, speed, fa) in enumerate(
            (
                ("q8", 8.5, 20.0, "off"),
                ("q4", 4.9, 30.0, "off"),
                ("q8", 8.5, 26.0, "on"),
                ("q4", 4.9, 25.0, "on"),
            )
        )
    ]
    lines = render_recommendations(recommend(rows))
    head = "Recommendation (ctx 512, depth 0, ngl 0, threads 4, gen, llama-cpp): q4 flash_attn off — fastest"
    assert lines[0].startswith(head)
    ratio = "ratio 1.200, 95 % CI 1.195–1.205"
    advice = f"  advice: flash_attn off: 1.2× faster than flash_attn on here ({ratio})"
    assert advice in lines


def test_contended_rivals_decide_only_when_they_ran_interleaved() -> None:
    from edgeprof.report.recommend import recommend, render_recommendations

    loaded = {"interference_verdict": "contended"}
    alone = [
        _speed_row(1, "q4", 4.9, scaled(30.0), **loaded),
        _speed_row(2, "q8", 8.5, scaled(20.0), **loaded),
    ]
    (rec,) = recommend(alone)
    assert rec.decision == "no_decision"  # one after the other: the load may have moved between them
    blocks = {0: scaled(30.0)[:2], 1: scaled(30.0)[2:4], 2: scaled(30.0)[4:]}
    slower = {k: [x * 2 / 3 for x in v] for k, v in blocks.items()}
    paired = [
        _speed_row(1, "q4", 4.9, scaled(30.0), _tg_tps_blocks=blocks, **loaded),
        _speed_row(2, "q8", 8.5, scaled(20.0), _tg_tps_blocks=slower, **loaded),
    ]
    (rec,) = recommend(paired)
    assert rec.decision == "faster" and rec.best is not None and rec.best.label == "q4"
    lines = render_recommendations([rec])
    assert any(x.startswith("  note: measured under other work: q4 (contended); q8 (contended); the variants "
                            "ran interleaved") for x in lines)  # fmt: skip
    one_block = [dict(r, _tg_tps_blocks={0: r["_tg_tps_reps"], 1: []}) for r in paired]
    (rec,) = recommend(one_block)
    assert rec.decision == "no_decision"  # a single shared block is no pairing


def test_the_bandwidth_share_is_shown_with_the_probes_spread() -> None:
    from edgeprof.report.recommend import Candidate, evidence

    row = _speed_row(1, "q4", 4.9, scaled(20.0), bw_pct=11.2, _bw_pct_range=(11.2, 39.6))
    shown = evidence(Candidate(row, None, None, True))
    assert "11 % of measured bandwidth (11–40 % over the probe's passes)" in shown
    row["_bw_pct_range"] = None  # a probe stored before its passes were kept
    assert evidence(Candidate(row, None, None, True)).endswith("11 % of measured bandwidth")


def test_a_files_tensor_mix_and_requantization_are_said_in_the_report() -> None:
    from edgeprof.report.columns import fmt_mix
    from edgeprof.report.fit import mix_fields
    from edgeprof.report.recommend import recommend, render_recommendations

    warning = "only 2 of 10 weight matrices are Q5_K: the rest fell back to other types"
    stored = {"shares": {"Q8_0": 0.3, "Q5_0": 0.68, "F32": 0.02}, "named": "Q5_K", "named_share": 0.2,
              "n_matrices": 10, "requantized_from": "Q8_0 (sha256 abc)", "warning": warning}  # fmt: skip
    fields = mix_fields(stored)
    assert fields == {
        "tensor_mix": "Q5_0 68 %, Q8_0 30 %, F32 2 %",
        "tensor_mix_warning": stored["warning"],
        "requantized_from": "Q8_0 (sha256 abc)",
    }
    assert mix_fields(None) == {"tensor_mix": None, "tensor_mix_warning": None, "requantized_from": None}
    row = _speed_row(1, "q5", 5.5, scaled(20.0), quant="Q5_K_M", **fields)
    cell = fmt_mix(row)
    assert cell.startswith("Q5_0 68 %, Q8_0 30 %, F32 2 %; ! only 2 of 10")
    assert "! requantized from Q8_0" in cell
    lines = render_recommendations(recommend([row]))
    assert "  note: q5 was requantized from Q8_0 (sha256 abc): precision lost twice" in lines
    assert any(x.startswith("  note: q5 (Q5_K_M): only 2 of 10 weight matrices are Q5_K") for x in lines)
