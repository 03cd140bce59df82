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
