"""A serving level's outcome, one judgement for both serving runners (``loadgen.judge_level``): ``ok`` only
while the share of failed requests is within the plan's ``max_error_rate`` (default 0), every failure
counted by reason; and the prompts that keep each request's prompt its own (a per-run nonce first)."""

from __future__ import annotations

import hashlib

import pytest
from support.serving import synthetic_request

from edgeprof.runners import loadgen
from edgeprof.runners.llama_server import payload_for, prompt_key, token_prompt

pytestmark = pytest.mark.timeout(30)

DROPPED = "stream ended without a finish_reason"


def level(n_ok: int, n_failed: int, error: str = DROPPED) -> list[loadgen.RequestRecord]:
    recs = [synthetic_request(i, 0.1) for i in range(n_ok)]
    for i in range(n_failed):
        rec = synthetic_request(n_ok + i, 0.1, status="error")
        rec.error = error
        recs.append(rec)
    return recs


def test_one_failed_request_of_eight_fails_the_level_by_default() -> None:
    status, reason = loadgen.judge_level(level(7, 1), 60.0)
    assert status == "error"
    assert reason == (
        f"1 of 8 measured requests failed (error rate 0.125 > max_error_rate 0): 1 × {DROPPED}"
    )


def test_seven_of_eight_dropped_mid_stream_is_failed_with_the_reasons_counted() -> None:
    recs = level(1, 6)
    recs.append(synthetic_request(7, 0.1, status="timeout"))
    recs[-1].error = "no complete response within 60 s"
    status, reason = loadgen.judge_level(recs, 60.0)
    assert status == "error" and reason is not None
    assert reason.endswith(f"6 × {DROPPED}; 1 × no complete response within 60 s")
    assert loadgen.errors_by_reason(recs) == {DROPPED: 6, "no complete response within 60 s": 1}


def test_max_error_rate_just_inside_and_just_outside() -> None:
    # 1 of 4 failed: an error rate of exactly 0.25
    assert loadgen.judge_level(level(3, 1), 60.0, max_error_rate=0.25) == ("ok", None)
    status, _reason = loadgen.judge_level(level(3, 1), 60.0, max_error_rate=0.2499)
    assert status == "error"
    assert loadgen.judge_level(level(4, 0), 60.0) == ("ok", None)


def test_every_request_failed_or_timed_out() -> None:
    failed = loadgen.judge_level(level(0, 2), 60.0)
    assert failed == ("error", f"every measured request failed: 2 × {DROPPED}")
    recs = [synthetic_request(i, 0.1, status="timeout") for i in range(2)]
    status, reason = loadgen.judge_level(recs, 5.0, max_error_rate=1.0)
    assert status == "timeout" and reason == "every measured request timed out (request_timeout_s = 5)"


def test_a_mix_of_timeouts_and_errors_is_every_request_failed_not_timed_out() -> None:
    recs = [synthetic_request(i, 0.1, status="timeout") for i in range(2)]
    for r in recs:
        r.error = "no complete response within 5 s"
    recs += level(0, 1)
    status, reason = loadgen.judge_level(recs, 5.0, max_error_rate=1.0)
    assert status == "error"
    assert reason == f"every measured request failed: 2 × no complete response within 5 s; 1 × {DROPPED}"


def test_only_the_measured_requests_judge_the_level() -> None:
    """Warm-up requests are not the level: a failed warm-up neither fails it nor counts in its rate."""
    warm = level(0, 3)
    for r in warm:
        r.kind = "warmup"
    assert loadgen.judge_level(warm + level(4, 0), 60.0) == ("ok", None)
    status, reason = loadgen.judge_level(warm + level(3, 1), 60.0)
    assert status == "error" and reason is not None
    assert reason.startswith("1 of 4 measured requests failed (error rate 0.25 > max_error_rate 0)")
    timed_out = [synthetic_request(i, 0.1, status="timeout") for i in range(2)]
    status, reason = loadgen.judge_level(warm + timed_out, 5.0)
    assert (status, reason) == ("timeout", "every measured request timed out (request_timeout_s = 5)")


def test_a_reply_body_is_cut_so_that_like_failures_count_together() -> None:
    a = level(0, 1, "HTTP 500: " + "x" * 200)[0]
    assert len(loadgen.error_reason(a)) == loadgen.REASON_CHARS


def test_every_prompt_starts_with_the_runs_nonce_and_its_index() -> None:
    job = {"workload": {"prompt": "hello", "n_predict": 4}, "serving": {"nonce": "a1b2"}}
    key = hashlib.sha256(b"a1b2:7").hexdigest()[:12]  # rebuilt from the stored nonce and the index
    assert payload_for(job, 7)["prompt"] == f"[{key}] hello"
    firsts = {payload_for(job, i)["prompt"][1] for i in range(64)}
    assert len(firsts) > 8  # the requests of a level differ from the key's first character on
    assert payload_for(job, 7)["cache_prompt"] is False
    other_sweep = {**job, "serving": {"nonce": "c3d4"}}
    assert payload_for(other_sweep, 7)["prompt"] != payload_for(job, 7)["prompt"]
    cached = {**job, "serving": {"nonce": "a1b2", "cache_prompt": True}}
    assert payload_for(cached, 7)["prompt"] == payload_for(cached, 8)["prompt"] == "hello"  # the scenario
    assert payload_for(cached, 7)["cache_prompt"] is True


def test_token_prompts_share_no_prefix_across_runs_or_requests() -> None:
    keys = [prompt_key({"nonce": n}, i) for n in ("a1", "b2") for i in range(50)]
    prompts = [token_prompt(16, 49152, k) for k in keys]
    assert all(len(p) == 16 and all(300 <= t < 49152 for t in p) for p in prompts)
    assert len({tuple(p[:2]) for p in prompts}) == len(prompts)  # no two share even two leading tokens
    assert token_prompt(16, 49152, keys[0]) == prompts[0]  # a request's prompt can be rebuilt from its key
    # cache on: every request of the level sends one and the same prompt (no key), a full one in range
    cached = {"nonce": "a1", "cache_prompt": True}
    shared = {tuple(token_prompt(8, 49152, prompt_key(cached, i))) for i in range(20)}
    assert len(shared) == 1
    [one] = shared
    assert len(one) == 8 and all(300 <= t < 49152 for t in one) and list(one) not in prompts
