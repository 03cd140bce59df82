"""The worker's order of requests (runners/llama_worker.py:rep_plan), without llama.cpp: the stored reps'
kinds and numbers come from it, and a cold-only job (the cold-cache runs) must serve one request."""

from __future__ import annotations

from edgeprof.runners.llama_worker import rep_plan


def test_cold_then_warmups_then_steady_reps() -> None:
    job = {"repeat": {"cold": 1, "warmup": 2, "steady": 3}}
    assert rep_plan(job) == [
        ("cold", 0), ("warmup", 0), ("warmup", 1), ("steady", 0), ("steady", 1), ("steady", 2),
    ]  # fmt: skip


def test_a_cold_only_job_serves_its_one_numbered_cold_rep() -> None:
    job = {"repeat": {"cold": 3, "warmup": 2, "steady": 3}, "cold_only": True, "cold_rep": 2}
    assert rep_plan(job) == [("cold", 2)]


def test_a_later_block_warms_up_first_and_serves_its_numbered_steady_reps() -> None:
    # a block of rival configs interleaved: a fresh process with no cold rep, at least one discarded warm-up
    job = {"repeat": {"cold": 1, "warmup": 0, "steady": 5}, "block": {"index": 2, "warmup_from": 1,
           "steady_from": 4, "steady_n": 1}}  # fmt: skip
    assert rep_plan(job) == [("warmup", 1), ("steady", 4)]
    job["repeat"]["warmup"] = 2
    job["block"] = {"index": 1, "warmup_from": 2, "steady_from": 2, "steady_n": 2}
    assert rep_plan(job) == [("warmup", 2), ("warmup", 3), ("steady", 2), ("steady", 3)]
