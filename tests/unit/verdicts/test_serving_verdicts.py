"""Serving-level verdicts (agent/verdicts/serving.py) on synthetic levels whose answer is known: stability
over consecutive request groups' E2EL per token, interference over the level's window from the proc_stat
counters (judged by their declared roles)."""

from __future__ import annotations

import pytest
from support.roles import declared_roles

from edgeprof.verdicts import LevelInputs, level_interference, level_stability, request_groups

Counters = dict[str, list[tuple[float, float]]]


def level(
    e2el_per_token: list[float],
    *,
    concurrency: int = 1,
    tpot: list[float] | None = None,
    window: tuple[float | None, float | None] = (0.0, 2.0),
    threads: int = 1,
) -> LevelInputs:
    return LevelInputs(
        t_start=window[0],
        t_end=window[1],
        concurrency=concurrency,
        e2el_per_token_ms=e2el_per_token,
        tpot_ms=tpot if tpot is not None else list(e2el_per_token),
        ttft_ms=[30.0] * len(e2el_per_token),
        server_threads=threads,
    )


def test_requests_are_cut_into_groups_of_at_least_one_wave_and_three() -> None:
    assert request_groups([1.0] * 12, 1) == (3, [1.0] * 4)
    assert request_groups([1.0] * 12, 4) == (4, [1.0] * 3)
    # the leftover (2 requests) joins the last group instead of being a group of its own
    size, medians = request_groups([1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 9.0, 9.0], 1)
    assert size == 3 and medians == [1.0, 2.0]
    assert request_groups([1.0, 1.0], 4) == (4, [])


def test_a_closed_loop_wave_is_stable_although_its_first_request_decodes_slower() -> None:
    # c = 4 on a quiet machine (measured shape): the wave's first request decodes while the other three
    # prefill, so its TPOT is ~1.3x theirs; all four end together, so their E2EL per token agrees
    tpot = [5.6, 4.3, 4.3, 4.3] * 4
    e2el_tok = [6.10, 6.22, 6.22, 6.19] * 4
    value, evidence = level_stability(level(e2el_tok, concurrency=4, tpot=tpot))
    assert value == "stable", evidence
    assert evidence["metric"] == "e2el_per_token_ms" and evidence["group_size"] == 4 and evidence["n"] == 4
    assert evidence["requests"]["tpot_ms"]["value"] == "unstable"  # what judging single TPOTs would say
    assert evidence["requests"]["e2el_per_token_ms"]["n"] == 16


def test_one_hiccup_among_many_requests_does_not_make_a_level_unstable_but_a_slow_half_does() -> None:
    quiet = [1.65] * 12
    quiet[9] = 2.4  # one request hit a scheduler hiccup (1.45x the others)
    assert level_stability(level(quiet)).value == "stable"
    # another process took the CPU for the second half of the level: whole groups moved
    value, evidence = level_stability(level([1.65] * 6 + [2.6] * 6))
    assert value == "unstable"
    assert any("x the median" in r or "of the mean" in r for r in evidence["reasons"])


def test_too_few_requests_for_three_groups_is_inconclusive_with_the_count_it_needs() -> None:
    value, evidence = level_stability(level([1.0] * 4, concurrency=2))
    assert value == "inconclusive"
    assert evidence["reasons"] == [
        "4 successful request(s) in groups of 3: 1 group(s); need 3 (9 requests) to judge the spread"
    ]


def _counters(other_cores: float, t_end: float = 2.0, step: float = 0.2) -> Counters:
    """proc_stat counters (seconds) on a 2-CPU machine: the server busy on one core, edgeprof's client on a
    tenth of one, ``other_cores`` of other work."""
    out: dict[str, list[tuple[float, float]]] = {}
    n = round(t_end / step) + 1
    for i in range(n):
        t = i * step
        for metric, value in (
            ("host.cpu_total_s", 2.0 * t),
            ("host.cpu_steal_s", 0.0),
            ("host.cpu_busy_s", (1.0 + 0.1 + other_cores) * t),
            ("proc.cpu_s", 1.0 * t),
            ("self.cpu_s", 0.1 * t),
            ("host.procs_running", 2.0),
        ):
            out.setdefault(metric, []).append((t, value))
    return out


ROLES = declared_roles(_counters(0.0))


def test_interference_is_judged_over_the_level_window_with_the_server_as_the_benchmark() -> None:
    value, evidence = level_interference(level([1.0] * 9), _counters(0.0), ROLES)
    assert value == "quiet", evidence
    assert evidence["level"]["child_cores"] == pytest.approx(1.0)
    assert evidence["other_cores"] == pytest.approx(0.0, abs=1e-6)
    assert evidence["reasons"] == ["no competing CPU work during the measured level (2.0 s)"]
    assert evidence["benchmark_threads"] == 2  # the server's one thread and the load generator

    value, evidence = level_interference(level([1.0] * 9), _counters(0.8), ROLES)
    assert value == "contended"
    reason = "the measured level (2.0 s) was contended: other processes used 0.80 cores"
    assert evidence["reasons"][0].startswith(reason)


def test_interference_without_counters_a_window_too_short_or_no_level_is_inconclusive() -> None:
    value, evidence = level_interference(level([1.0] * 9), {}, {})
    assert value == "inconclusive"
    assert "no CPU-time counters during the measured level" in evidence["reasons"][0]
    short = level([1.0] * 9, window=(0.0, 0.02))
    counters = _counters(0.0, t_end=0.04, step=0.02)
    value, evidence = level_interference(short, counters, declared_roles(counters))
    # the run queue alone still says nothing competed; the CPU-time figure is marked too coarse
    assert "CPU-time ticks" in evidence["level"]["note"]
    assert evidence["other_cores"] is None
    value, evidence = level_interference(level([], window=(None, None)), _counters(0.0), ROLES)
    assert value == "inconclusive"
    assert evidence["reasons"] == ["the measured level never ran: nothing to judge"]
