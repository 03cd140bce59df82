"""A soak on llama-server cut into windows from its requests' timestamps (agent/executors/serving_soak.py).
Synthetic request records with known arrival times; no server."""

from __future__ import annotations

import pytest

from edgeprof.executors.serving_soak import token_arrivals, windows_from_records
from edgeprof.runners.loadgen import RequestRecord

pytestmark = pytest.mark.timeout(30)


def request(idx: int, chunks: list[float], tokens: int | None, kind: str = "measured") -> RequestRecord:
    rec = RequestRecord(idx=idx, kind=kind, status="ok")
    rec.t_send = chunks[0] - 0.1
    rec.t_first, rec.t_end = chunks[0], chunks[-1]
    rec.chunk_times = list(chunks)
    rec.output_tokens = tokens
    rec.prompt_tokens, rec.server_prompt_ms = 20, 50.0
    return rec


def test_the_servers_count_is_spread_over_the_chunks_and_adds_up() -> None:
    assert [k for _t, k in token_arrivals(request(0, [1.0, 1.1, 1.2], 3))] == [1, 1, 1]
    merged = token_arrivals(request(0, [1.0, 1.1, 1.2], 7))  # multi-byte pieces merged into fewer chunks
    assert sum(k for _t, k in merged) == 7 and [t for t, _k in merged] == [1.0, 1.1, 1.2]
    assert sum(k for _t, k in token_arrivals(request(0, [1.0, 1.1], None))) == 2  # no count: the chunks


def test_each_token_goes_to_the_window_it_arrived_in_and_nothing_after_the_duration() -> None:
    t0 = 100.0
    records = [
        request(0, [99.9], 1, kind="warmup"),  # before the soak: not its
        request(1, [100.2, 100.4, 100.6, 100.8], 4),  # window 0
        request(2, [100.9, 101.1, 101.3], 3),  # 1 token in window 0, 2 in window 1
        request(3, [101.8, 102.1, 102.6], 3),  # 1 in window 1, 1 in the last (shorter) window, 1 after
    ]
    windows = windows_from_records(records, t0, duration_s=2.5, window_s=1.0)
    assert [w.index for w in windows] == [0, 1, 2]
    assert [w.tokens for w in windows] == [5, 3, 1]
    assert [(w.t_start, w.t_end) for w in windows] == [(100.0, 101.0), (101.0, 102.0), (102.0, 102.5)]
    assert [w.tg_tps for w in windows] == pytest.approx([5.0, 3.0, 2.0])  # per second of the window
    # prefill speed from the requests whose first token arrived in the window: 20 tokens in 50 ms each
    assert [w.pp_tps for w in windows] == pytest.approx([400.0, 400.0, None])


def test_a_level_that_ended_early_measures_no_window_after_it() -> None:
    records = [request(1, [100.2, 100.5, 101.2], 3)]
    windows = windows_from_records(records, 100.0, duration_s=10.0, window_s=1.0, level_end=101.5)
    assert [(w.index, w.tokens) for w in windows] == [(0, 2), (1, 1)]
    assert windows[-1].t_end == 101.5
    idle = windows_from_records([], 100.0, duration_s=3.0, window_s=1.0)
    assert [w.tg_tps for w in idle] == [0.0, 0.0, 0.0]  # the level ran and nothing arrived: a measured stall
