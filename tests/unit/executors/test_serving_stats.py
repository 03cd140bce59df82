"""A serving level's figures on synthetic records (no server): every figure against a hand-computed value,
nearest-rank percentiles with n, goodput under the SLOs, failed and warm-up requests left out."""

from __future__ import annotations

import pytest
from support.serving import synthetic_request as synthetic

from edgeprof.executors import meets_slo, summarize_level
from edgeprof.runners.loadgen import RequestRecord

pytestmark = pytest.mark.timeout(60)


def level() -> list[RequestRecord]:
    # TTFT 100..1000 ms, in a shuffled order (the percentiles must sort), plus one failed request
    order = [7, 2, 9, 1, 5, 10, 3, 8, 4, 6]
    recs = [synthetic(i, k / 10.0) for i, k in enumerate(order)]
    recs.append(synthetic(99, 0.0, status="error"))
    warm = synthetic(100, 5.0)
    warm.kind = "warmup"  # excluded from every figure
    return [*recs, warm]


def test_level_percentiles_against_hand_computed_values() -> None:
    s = summarize_level(level(), duration_s=2.0, slo={"ttft_ms": 550.0, "tpot_ms": 80.0})
    assert (s["n_requests"], s["n_ok"], s["n_errors"], s["n_timeouts"]) == (11, 10, 1, 0)
    assert s["error_rate"] == pytest.approx(1 / 11)
    ttft = s["ttft_ms"]
    # nearest rank on 10 values 100..1000: p50 = 5th, p90 = 9th, p95 = p99 = 10th
    assert ttft["n"] == 10
    assert (ttft["p50"], ttft["p90"], ttft["p95"], ttft["p99"]) == pytest.approx((500, 900, 1000, 1000))
    assert (ttft["min"], ttft["median"], ttft["max"]) == pytest.approx((100, 550, 1000))
    itl = s["itl_ms"]  # 20 gaps: ten of 50 ms, ten of 100 ms
    assert itl["n"] == 20
    assert (itl["p50"], itl["p90"], itl["p99"]) == pytest.approx((50, 100, 100))
    assert s["tpot_ms"]["p99"] == pytest.approx(75.0)
    assert s["e2el_ms"]["p90"] == pytest.approx(900 + 150)
    assert s["request_throughput_rps"] == pytest.approx(10 / 2.0)
    assert s["output_tps"] == pytest.approx(30 / 2.0)
    assert s["total_tps"] == pytest.approx((30 + 160) / 2.0)
    # goodput: TTFT <= 550 ms and TPOT <= 80 ms -> the five requests of 100..500 ms
    assert s["n_good"] == 5
    assert s["goodput_rps"] == pytest.approx(5 / 2.0)
    assert s["ttft_minus_server_prompt_ms"]["max"] == pytest.approx(2.0)
    assert s["e2el_minus_server_ms"]["max"] == pytest.approx(150 + 2 - 147)
    assert s["n_chunk_token_mismatch"] == 0


def test_no_slo_means_no_goodput_and_failed_requests_never_meet_one() -> None:
    s = summarize_level(level(), duration_s=2.0, slo={})
    assert s["goodput_rps"] is None and s["n_good"] is None
    assert not meets_slo(synthetic(0, 0.1, status="timeout"), {"ttft_ms": 1e9})


def test_the_level_says_where_its_token_counts_came_from() -> None:
    recs = level()
    for r, source in zip(recs[:10], ["usage"] * 7 + ["chunks"] * 2 + [None], strict=True):
        r.token_source = source
    s = summarize_level(recs, duration_s=2.0, slo={})
    # successful measured requests only: the failed one and the warm-up are not counted
    assert s["token_sources"] == {"chunks": 2, "none": 1, "usage": 7}


def test_the_prompt_cache_count_and_whether_the_plan_asked_for_it() -> None:
    from edgeprof.report.cells import fmt_prompt_cache
    from edgeprof.report.serving import prompt_cache_state

    recs = level()
    for r in recs:
        r.server_cache_n = 0
    s = summarize_level(recs, duration_s=2.0, slo={})
    assert (s["cached_prompt_tokens"], s["cache_prompt_tokens_of"], s["n_cache_reported"]) == (0, 160, 11)
    assert s["prompt_cache_unasked"] is False and prompt_cache_state(s) == "off"
    recs[3].server_cache_n = 12  # one request's prompt served in part by the cache, unasked
    s = summarize_level(recs, duration_s=2.0, slo={})
    assert s["cached_prompt_tokens"] == 12 and s["prompt_cache_unasked"] is True
    row = {
        "serving_cached_prompt_tokens": 12,
        "serving_cached_prompt_tokens_of": 160,
        "serving_prompt_cache": prompt_cache_state(s),
    }
    assert fmt_prompt_cache(row) == "12/160 UNASKED"
    asked = summarize_level(recs, duration_s=2.0, slo={}, cache_asked=True)
    assert asked["prompt_cache_unasked"] is False and prompt_cache_state(asked) == "on"
    assert fmt_prompt_cache({**row, "serving_prompt_cache": "on"}) == "12/160 (cache on)"
    for r in recs:
        r.server_cache_n = None  # a server that gives no count: not measured, never 0
    s = summarize_level(recs, duration_s=2.0, slo={})
    assert s["cached_prompt_tokens"] is None and s["prompt_cache_unasked"] is None
    assert fmt_prompt_cache({**row, "serving_cached_prompt_tokens": None}) == "—"


def test_failed_requests_are_counted_by_reason_and_goodput_names_all_sent() -> None:
    from edgeprof.report.cells import fmt_goodput

    s = summarize_level(level(), duration_s=2.0, slo={})
    assert s["errors_by_reason"] == {"synthetic failure": 1}
    s = summarize_level(level(), duration_s=2.0, slo={"ttft_ms": 550.0})
    row = {"serving_goodput_rps": s["goodput_rps"], "serving_good": s["n_good"], "serving_requests": 11}
    assert fmt_goodput(row) == "2.50 (5/11)"  # 5 of the 11 sent met the SLO, over the level's 2 s
    assert fmt_goodput({**row, "serving_goodput_rps": None}) == "—"
