"""The plan's ``[quality_budget]`` table (agent/plan/budget.py): its keys, their checks (every problem at
once) and the budget read back from a stored plan's text."""

from __future__ import annotations

from edgeprof.plan import QualityBudget, budget_from_plan_text, parse_budget


def test_defaults_ask_for_five_reps_at_95_percent() -> None:
    budget = QualityBudget()
    assert (budget.kld_mean, budget.same_top_pct, budget.min_reps, budget.confidence_pct) == (
        0.05,
        90.0,
        5,
        95.0,
    )


def test_the_evidence_keys_are_read() -> None:
    problems: list[str] = []
    budget = parse_budget({"min_reps": 7, "confidence_pct": 99}, problems)
    assert problems == []
    assert budget == QualityBudget(min_reps=7, confidence_pct=99.0)
    assert budget_from_plan_text("[quality_budget]\nmin_reps = 10\nconfidence_pct = 90.0\n") == QualityBudget(
        min_reps=10, confidence_pct=90.0
    )


def test_every_problem_is_reported_at_once() -> None:
    problems: list[str] = []
    raw = {"kld_mean": -1, "same_top_pct": "high", "min_reps": 2.5, "confidence_pct": 100, "bogus": 1}
    assert parse_budget(raw, problems) == QualityBudget()
    assert problems == [
        "quality_budget.bogus: unknown key (expected one of confidence_pct, kld_mean, max_accuracy_loss, "
        "min_reps, same_top_pct)",
        "quality_budget.kld_mean: must be >= 0, got -1",
        "quality_budget.same_top_pct: expected a number, got 'high'",
        "quality_budget.min_reps: expected a whole number, got 2.5",
        "quality_budget.confidence_pct: must be at least 50 and below 100, got 100",
    ]


def test_bounds_of_the_evidence_keys() -> None:
    for raw, message in (
        ({"min_reps": True}, "quality_budget.min_reps: expected a whole number, got True"),
        ({"min_reps": 1}, "quality_budget.min_reps: must be between 2 and 1000, got 1"),
        ({"min_reps": 1001}, "quality_budget.min_reps: must be between 2 and 1000, got 1001"),
        ({"confidence_pct": "95"}, "quality_budget.confidence_pct: expected a number, got '95'"),
        (
            {"confidence_pct": 49.9},
            "quality_budget.confidence_pct: must be at least 50 and below 100, got 49.9",
        ),
    ):
        problems: list[str] = []
        assert parse_budget(raw, problems) == QualityBudget()
        assert problems == [message]


def test_a_stored_plan_with_a_bad_budget_reads_as_the_default() -> None:
    assert budget_from_plan_text("[quality_budget]\nmin_reps = 0\n") == QualityBudget()
