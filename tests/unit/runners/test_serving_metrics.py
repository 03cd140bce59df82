"""The serving runner's per-request figures on injected timings (synthetic records, no server): TTFT, E2EL,
ITL and TPOT under both definitions, output tokens from the server's count, SSE and /metrics parsing. A
level's figures (the agent's side) are tests/unit/executors/test_serving_stats.py."""

from __future__ import annotations

import pytest
from support.serving import synthetic_request as synthetic

from edgeprof.executors import counter_deltas, summarize_level
from edgeprof.runners.llama_server import parse_prometheus
from edgeprof.runners.loadgen import RequestRecord, apply_chunk, parse_sse_line

pytestmark = pytest.mark.timeout(60)


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
    s = summarize_level([rec], 1.0, {})
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
