"""The accuracy intervals against worked examples: Wilson's against Newcombe's published table, the paired
difference (Bonett-Price) against a hand computation, and the sentence said only when the data say it."""

from __future__ import annotations

import math

import pytest

from edgeprof.runners.tasks.intervals import loss_sentence, paired_difference, wilson

pytestmark = pytest.mark.timeout(10)


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    # R. G. Newcombe, "Two-sided confidence intervals for the single proportion: comparison of seven
    # methods", Stat Med 17:857-872 (1998), Table II, method 3 (score interval without correction)
    [(81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718)],
)
def test_wilson_matches_newcombes_table(k: int, n: int, low: float, high: float) -> None:
    lo, hi = wilson(k, n)
    assert lo == pytest.approx(low, abs=5e-5) and hi == pytest.approx(high, abs=5e-5)


def test_wilson_is_the_interval_llama_perplexity_prints() -> None:
    # its HellaSwag line: z = za^2/n; cnf = z sqrt(n (4 p (1-p) + z)) / (2 za); (p + z/2 -+ cnf) / (1 + z)
    k, n, za = 163, 400, 1.95996398454
    p, z = k / n, za * za / n
    cnf = z * math.sqrt(n * (4 * p * (1 - p) + z)) / (za + za)
    lo, hi = wilson(k, n)
    assert lo == pytest.approx((p + z / 2 - cnf) / (1 + z), abs=1e-10)
    assert hi == pytest.approx((p + z / 2 + cnf) / (1 + z), abs=1e-10)


def test_paired_difference_worked_example() -> None:
    # 400 tasks; the variant right where the reference was wrong on 8, wrong where it was right on 20.
    # Bonett-Price: p12 = 9/402, p21 = 21/402, d~ = -12/402 = -0.0298507;
    # var = (p12 + p21 - d~^2) / 402 = (0.0746269 - 0.000891062) / 402 = 1.834228e-4, se = 0.0135434;
    # half width 1.959964 x se = 0.0265446: (-0.0563953, -0.0033061); the estimate itself -12/400.
    diff, low, high = paired_difference(gained=8, lost=20, n=400)
    assert diff == pytest.approx(-0.03)
    assert low == pytest.approx(-0.0563953, abs=2e-7) and high == pytest.approx(-0.0033061, abs=2e-7)
    assert loss_sentence("Q4_K_M", 8, 20, 400) == (
        "Q4_K_M loses 3.0 points (95 % CI 0.3-5.6); 20 lost, 8 gained of 400 tasks"
    )


def test_no_loss_is_claimed_when_the_interval_holds_zero() -> None:
    # 14 against 20: the same 6-task gap, too few discordant tasks to be sure of its sign
    _diff, low, high = paired_difference(gained=14, lost=20, n=400)
    assert low < 0 < high
    said = loss_sentence("Q5_K_M", 14, 20, 400)
    assert said.startswith("Q5_K_M: no loss shown (loss +1.5 points, 95 % CI") and "loses" not in said
    assert loss_sentence("Q8_0", 0, 0, 400).startswith("Q8_0: no loss shown (loss +0.0 points")
    assert loss_sentence("Q6_K", 20, 4, 400).startswith("Q6_K gains 4.0 points")


def test_impossible_counts_are_refused() -> None:
    with pytest.raises(ValueError):
        paired_difference(5, 6, 10)
    with pytest.raises(ValueError):
        wilson(1, 0)
