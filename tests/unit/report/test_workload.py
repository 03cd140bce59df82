"""Report pieces of workloads as users run them, on synthetic rows: what a row generated past an ignored
EOS is never compared, tokens out beside n_predict, and the depth curves."""

from __future__ import annotations

from edgeprof.report import depth_curves, fmt_tokens_out, output_until_eos


def test_quality_never_compares_past_an_eos() -> None:
    assert output_until_eos([5, 6, 2, 9, 9], 2) == [5, 6, 2]
    assert output_until_eos([5, 6, 7], None) == [5, 6, 7]


def test_tokens_out_says_early_eos_and_ignored_eos() -> None:
    row = {"tokens_out_median": 20.0, "n_predict": 64, "eos_count": 5, "finish_reasons": "eos:5"}
    assert fmt_tokens_out(row) == "20/64 eos 5/5"
    assert (
        fmt_tokens_out({"tokens_out_median": 64.0, "n_predict": 64, "ignore_eos": True})
        == "64/64 (eos ignored)"
    )
    assert fmt_tokens_out({"tokens_out_median": None}) == "—"


def test_a_depth_curve_needs_two_depths_of_one_config() -> None:
    base = {"model_label": "m", "quant": "Q8_0", "workload": "w", "ctx": 512, "ngl": 0, "threads": 1,
            "status": "ok", "tg_tps_median": 10.0, "tg_tps_min": 9.0, "tg_tps_max": 11.0, "tg_tps_n": 3,
            "ttft_ms_p50": 1.0}  # fmt: skip
    assert depth_curves([{**base, "depth": 0}]) == []
    (curve,) = depth_curves([{**base, "depth": 128, "tg_tps_median": 8.0}, {**base, "depth": 0}])
    assert [p["depth"] for p in curve["points"]] == [0, 128]
    assert [p["tg_tps_median"] for p in curve["points"]] == [10.0, 8.0]
