"""The sequential decision's statistics on a simulated device, on simulated time (no clock is read): each
round, the two rivals each run one block in a fresh process whose speed carries a process effect of its
own, and the round's drift falls on both. Synthetic by construction: every answer is known.

What it shows, over 1 000 simulated sweeps each:
- a known 3 % gap is decided, in the right direction, and the anytime-valid interval misses the true ratio
  at the moment it stopped in no more than its stated 5 % (optional stopping included: it looked after
  every block);
- two identical rivals are called different in no more than 5 % of sweeps, while "a fixed-n 95 % t interval
  checked after every block" calls them different far more often than its nominal 5 %;
- a tie is declared within ±R % where the rivals are equal;
- a pair that is neither (a gap the size of R) is stopped by its budget.

Mutants seen failing: K computed with alpha instead of alpha² (the interval too narrow: the null rate rose
above 5 %), the tie test on the interval's centre instead of its ends, the budget loop not bounded."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from edgeprof.stats import mean_confidence_sequence, pair_confidence_pct, paired_decision

SWEEPS = 1_000
START, BUDGET = 5, 20  # block pairs: ``[repeat] steady`` and the default 4 × steady
ALPHA = 0.05
T975 = {  # two-sided 95 % Student t quantiles by degrees of freedom (the naive rule's)
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
    11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
}  # fmt: skip


def simulated_round(rng: random.Random, gap: float, proc_sd: float) -> tuple[float, float]:
    """One round's block of each rival (one rep each): a's speed is (1 + gap) × b's, each fresh process
    moves its own speed by a process effect, and the round's drift (another tenant, heat) moves both."""
    drift = math.exp(rng.gauss(0.0, 0.05))
    a = 20.0 * (1.0 + gap) * drift * math.exp(rng.gauss(0.0, proc_sd))
    b = 20.0 * drift * math.exp(rng.gauss(0.0, proc_sd))
    return a, b


def sequential_sweep(
    rng: random.Random, gap: float, proc_sd: float, tie_pct: float | None
) -> tuple[str, int, float | None, float | None]:
    """The sweep's loop: START rounds, then one round at a time until decided, tied or out of budget."""
    a: dict[int, list[float]] = {}
    b: dict[int, list[float]] = {}
    for block in range(BUDGET):
        a[block], b[block] = (lambda x: ([x[0]], [x[1]]))(simulated_round(rng, gap, proc_sd))
        if block + 1 < START:
            continue
        found = paired_decision(a, b, 95.0, tie_pct)
        if found.state != "open":
            return found.state, found.n_pairs, found.low, found.high
    return "budget", found.n_pairs, found.low, found.high


def naive_sweep(rng: random.Random, gap: float, proc_sd: float) -> bool:
    """"A fixed-n interval checked after every block": a 95 % t interval on the block pairs' log ratios,
    looked at after each block from START on; True when it ever excludes 0."""
    ds: list[float] = []
    for _ in range(BUDGET):
        x, y = simulated_round(rng, gap, proc_sd)
        ds.append(math.log(x) - math.log(y))
        n = len(ds)
        if n < START:
            continue
        mean = sum(ds) / n
        sd = math.sqrt(sum((d - mean) ** 2 for d in ds) / (n - 1))
        if abs(mean) > T975[n - 1] * sd / math.sqrt(n):
            return True
    return False


def over_sweeps(run: Callable[[random.Random], object], seed: int) -> list[object]:
    rng = random.Random(seed)
    return [run(rng) for _ in range(SWEEPS)]


@pytest.mark.timeout(60)
def test_a_known_3_percent_gap_is_decided_within_the_stated_error() -> None:
    gap = 0.03
    results = over_sweeps(lambda r: sequential_sweep(r, gap, 0.015, 1.0), seed=3)
    decided = [res for res in results if res[0] == "decided"]
    wrong_way = [res for res in decided if res[3] is not None and res[3] < 1.0]
    missed = [res for res in results if res[2] is not None and not res[2] <= 1.0 + gap <= res[3]]
    assert len(decided) >= 0.9 * SWEEPS, len(decided)
    assert not wrong_way
    assert len(missed) <= ALPHA * SWEEPS, len(missed)
    # and it stops early where it can: most sweeps need far fewer block pairs than the budget
    pairs = sorted(res[1] for res in decided)
    assert pairs[len(pairs) // 2] < BUDGET // 2, pairs[len(pairs) // 2]


@pytest.mark.timeout(60)
def test_identical_rivals_are_rarely_called_different_and_the_naive_rule_is_not() -> None:
    sequential = over_sweeps(lambda r: sequential_sweep(r, 0.0, 0.03, None), seed=5)
    false_sequential = sum(1 for res in sequential if res[0] == "decided")  # type: ignore[index]
    naive = over_sweeps(lambda r: naive_sweep(r, 0.0, 0.03), seed=5)
    false_naive = sum(1 for hit in naive if hit)
    assert false_sequential <= ALPHA * SWEEPS, false_sequential
    # the nominal 5 % of a fixed-n interval, looked at 16 times: well above it
    assert false_naive > 2 * ALPHA * SWEEPS, false_naive


@pytest.mark.timeout(60)
def test_equal_rivals_are_declared_a_tie_within_r() -> None:
    results = over_sweeps(lambda r: sequential_sweep(r, 0.0, 0.01, 3.0), seed=7)
    ties = [res for res in results if res[0] == "tie"]  # type: ignore[index]
    assert len(ties) >= 0.9 * SWEEPS, len(ties)
    for _state, _n, low, high in ties:  # type: ignore[misc]
        assert low >= 1 / 1.03 and high <= 1.03


@pytest.mark.timeout(60)
def test_a_pair_neither_decided_nor_tied_is_stopped_by_the_budget() -> None:
    results = over_sweeps(lambda r: sequential_sweep(r, 0.02, 0.04, 2.0), seed=11)
    stopped = [res for res in results if res[0] == "budget"]  # type: ignore[index]
    assert len(stopped) >= 0.5 * SWEEPS, len(stopped)
    assert all(res[1] == BUDGET for res in stopped)  # type: ignore[index]


def test_the_interval_is_unbounded_until_it_can_hold_and_bonferroni_splits_the_error() -> None:
    assert mean_confidence_sequence([0.01, 0.02, 0.0], 0.05) is None  # 3 pairs: unbounded at 95 %
    assert mean_confidence_sequence([0.01, 0.02, 0.0, 0.01], 0.05) is not None  # 4: bounded
    assert pair_confidence_pct(95.0, 2) == 95.0
    assert pair_confidence_pct(95.0, 3) == pytest.approx(100 - 5 / 3)


def test_the_resolution_comes_from_the_noise_within_its_bounds() -> None:
    quiet = paired_decision({i: [20.0] for i in range(6)}, {i: [20.0] for i in range(6)})
    assert quiet.tie_pct == 1.0 and quiet.tie_from == "noise" and quiet.state == "tie"
    wild = {i: [20.0 * (1.5 if i % 2 else 0.7)] for i in range(6)}
    noisy = paired_decision(wild, {i: [20.0] for i in range(6)})
    assert noisy.tie_pct == 10.0 and noisy.state == "open"
    given = paired_decision(wild, {i: [20.0] for i in range(6)}, tie_pct=5.0)
    assert given.tie_pct == 5.0 and given.tie_from == "plan"


def test_a_tie_is_the_interval_within_r_inclusive_and_r_from_noise_is_kept_within_1_to_10_percent() -> None:
    from edgeprof.stats import TIE_FROM_NOISE, TIE_MAX_PCT, TIE_MIN_PCT

    assert (TIE_FROM_NOISE, TIE_MIN_PCT, TIE_MAX_PCT) == (2.0, 1.0, 10.0)
    wobble = [1.0 + 0.002 * ((-1) ** i) for i in range(10)]
    a = {i: [20.0 * w] for i, w in enumerate(wobble)}
    b = {i: [20.0] for i in range(10)}
    found = paired_decision(a, b, 95.0, 5.0)
    assert found.state == "tie" and found.low is not None and found.high is not None
    # R just at the interval's farther end: still a tie; just under: open
    edge = 100.0 * max(found.high - 1.0, 1.0 / found.low - 1.0)
    assert paired_decision(a, b, 95.0, edge + 1e-9).state == "tie"
    assert paired_decision(a, b, 95.0, edge - 1e-3).state == "open"
