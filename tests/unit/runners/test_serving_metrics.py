"""Serving metrics on injected timings (synthetic records, no server): every figure against a hand-computed
value, nearest-rank percentiles with n, TPOT under both definitions, goodput, SSE and /metrics parsing."""

from __future__ import annotations

import pytest

from edgeprof.runners.loadgen import (
    RequestRecord,
    apply_chunk,
    counter_deltas,
    meets_slo,
    parse_prometheus,
    parse_sse_line,
    summarize,
)

pytestmark = pytest.mark.timeout(60)


def synthetic(idx: int, ttft_s: float, status: str = "ok") -> RequestRecord:
    """A synthetic request sent at t = 10 s: 3 output tokens, chunks at ttft, +50 ms, +150 ms."""
    rec = RequestRecord(idx=idx, kind="measured", status=status)
    rec.t_send = 10.0
    if status == "ok":
        rec.t_first = 10.0 + ttft_s
        rec.chunk_times = [rec.t_first, rec.t_first + 0.050, rec.t_first + 0.150]
        rec.t_end = rec.t_first + 0.150
        rec.output_tokens = 3
        rec.prompt_tokens = 16
        rec.server_prompt_ms = ttft_s * 1000.0 - 2.0
        rec.server_predicted_ms = 147.0
    else:
        rec.t_end = 10.5
        rec.error = "synthetic failure"
    return rec


def level() -> list[RequestRecord]:
    # TTFT 100..1000 ms, in a shuffled order (the percentiles must sort), plus one failed request
    order = [7, 2, 9, 1, 5, 10, 3, 8, 4, 6]
    recs = [synthetic(i, k / 10.0) for i, k in enumerate(order)]
    recs.append(synthetic(99, 0.0, status="error"))
    warm = synthetic(100, 5.0)
    warm.kind = "warmup"  # excluded from every figure
    return [*recs, warm]


def test_per_request_definitions() -> None:
    r = synthetic(0, 0.2)
    assert r.ttft_ms == pytest.approx(200.0)
    assert r.e2el_ms == pytest.approx(350.0)
    assert r.itl_ms == pytest.approx([50.0, 100.0])
    assert r.tpot_ms == pytest.approx(75.0)  # vLLM: (350 - 200) / (3 - 1)
    assert r.tpot_e2e_ms == pytest.approx(350.0 / 3)  # GuideLLM: E2EL / n, TTFT included
    one = synthetic(1, 0.2)
    one.output_tokens = 1
    assert one.tpot_ms is None  # undefined for a single token, never 0


def test_level_percentiles_against_hand_computed_values() -> None:
    s = summarize(level(), duration_s=2.0, slo={"ttft_ms": 550.0, "tpot_ms": 80.0})
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
    s = summarize(level(), duration_s=2.0, slo={})
    assert s["goodput_rps"] is None and s["n_good"] is None
    assert not meets_slo(synthetic(0, 0.1, status="timeout"), {"ttft_ms": 1e9})


def test_output_tokens_come_from_the_server_not_the_chunk_count() -> None:
    rec = RequestRecord(idx=0, kind="measured")
    rec.t_send = 0.0
    assert not apply_chunk(rec, {"content": "ab", "stop": False}, 0.1)
    assert apply_chunk(
        rec,
        {
            "content": "",
            "stop": True,
            "tokens_predicted": 2,  # one chunk carried two tokens
            "tokens_evaluated": 5,
            "stop_type": "limit",
            "timings": {
                "prompt_n": 5, "prompt_ms": 12.5, "predicted_n": 2, "predicted_ms": 20.0, "cache_n": 0
            },
        },
        0.2,
    )
    assert rec.output_tokens == 2 and len(rec.chunk_times) == 1
    assert (rec.prompt_tokens, rec.server_prompt_ms, rec.server_predicted_ms) == (5, 12.5, 20.0)
    assert rec.finish_reason == "limit" and rec.server_cache_n == 0
    rec.status, rec.t_end = "ok", 0.2  # what stream_request sets on the final chunk
    s = summarize([rec], 1.0, {})
    assert s["n_chunk_token_mismatch"] == 1


def test_sse_and_prometheus_parsing() -> None:
    assert parse_sse_line('data: {"content": "x"}') == {"content": "x"}
    assert parse_sse_line("data: [DONE]") is None
    assert parse_sse_line(": ping") is None
    assert parse_sse_line("data: not json") is None
    text = (
        "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.\n"
        "# TYPE llamacpp:prompt_tokens_total counter\n"
        "llamacpp:prompt_tokens_total 120\n"
        "llamacpp:tokens_predicted_total 64\n"
        "llamacpp:requests_deferred 2\n"
    )
    before = parse_prometheus(text)
    assert before["llamacpp:requests_deferred"] == 2.0
    after = dict(before, **{"llamacpp:prompt_tokens_total": 200.0})
    assert counter_deltas(before, after) == {
        "llamacpp:prompt_tokens_total": 80.0,
        "llamacpp:tokens_predicted_total": 0.0,
    }
