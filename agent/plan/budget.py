"""The plan's ``[quality_budget]`` table: what the recommendation accepts against the reference, and how
much evidence it wants before it calls one variant faster than another."""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (JetPack 6)
    import tomli as tomllib


@dataclass(frozen=True)
class QualityBudget:
    """Plan table ``[quality_budget]``: ``kld_mean`` (max mean KLD) and ``same_top_pct`` (min %) bound the
    quality; ``min_reps`` (steady reps each side) and ``confidence_pct`` (of the interval of the speed ratio)
    bound the evidence a "faster" needs."""

    kld_mean: float = 0.05
    same_top_pct: float = 90.0
    # With 3 steady reps a side no rank interval at 95 % can exclude a ratio of 1 whatever the figures, with 4
    # only the extreme ordering (every rep of one above every rep of the other) can; 5 is the least where the
    # interval rests on more than that one ordering and the median survives two outlier reps.
    min_reps: int = 5
    confidence_pct: float = 95.0
    # Optional: the most task-accuracy points a variant may lose against the reference, judged on the upper
    # end of the 95 % interval of its paired loss (a kind = "task" workload): "within" is then a claim the
    # data support, never a point estimate that noise put under the bound.
    max_accuracy_loss: float | None = None

    def describe(self) -> str:
        text = f"mean KLD ≤ {self.kld_mean:g}, same-top ≥ {self.same_top_pct:g} %"
        if self.max_accuracy_loss is not None:
            text += f", task accuracy loss ≤ {self.max_accuracy_loss:g} points (95 % bound)"
        return text


BUDGET_KEYS = {"kld_mean", "same_top_pct", "min_reps", "confidence_pct", "max_accuracy_loss"}
# The most steady reps a plan may ask for (agent/plan/bounds.py MAX_STEADY): a larger min_reps could never
# be met.
MAX_MIN_REPS = 1_000


def _number(raw: dict[str, Any], key: str, problems: list[str]) -> float | None:
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        problems.append(f"quality_budget.{key}: expected a number, got {value!r}")
        return None
    if not math.isfinite(value):  # nan passes every comparison with a bound; inf is no budget
        problems.append(f"quality_budget.{key}: must be a finite number, got {value!r}")
        return None
    return float(value)


def _check(raw: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    """The valid values of the table, each invalid one appended to ``problems``."""
    values: dict[str, Any] = {}
    bounds = (("kld_mean", 0.0, None), ("same_top_pct", 0.0, 100.0), ("max_accuracy_loss", 0.0, 100.0))
    for key, lo, hi in bounds:
        if key not in raw or (value := _number(raw, key, problems)) is None:
            continue
        if value < lo or (hi is not None and value > hi):
            bound = f"between {lo:g} and {hi:g}" if hi is not None else f">= {lo:g}"
            problems.append(f"quality_budget.{key}: must be {bound}, got {raw[key]}")
        else:
            values[key] = value
    if "min_reps" in raw:
        reps = raw["min_reps"]
        if isinstance(reps, bool) or not isinstance(reps, int):
            problems.append(f"quality_budget.min_reps: expected a whole number, got {reps!r}")
        elif not 2 <= reps <= MAX_MIN_REPS:
            problems.append(f"quality_budget.min_reps: must be between 2 and {MAX_MIN_REPS}, got {reps}")
        else:
            values["min_reps"] = reps
    if "confidence_pct" in raw and (level := _number(raw, "confidence_pct", problems)) is not None:
        # 100 % would be an interval without bounds: no variant could ever be faster
        if not 50.0 <= level < 100.0:
            problems.append(
                "quality_budget.confidence_pct: must be at least 50 and below 100, "
                f"got {raw['confidence_pct']}"
            )
        else:
            values["confidence_pct"] = level
    return values


def parse_budget(raw: Any, problems: list[str]) -> QualityBudget:
    """Validate a plan's ``[quality_budget]`` table; each problem is appended as 'place: what is wrong'."""
    if raw is None:
        return QualityBudget()
    if not isinstance(raw, dict):
        problems.append("quality_budget: expected a table")
        return QualityBudget()
    for key in sorted(set(raw) - BUDGET_KEYS):
        allowed = ", ".join(sorted(BUDGET_KEYS))
        problems.append(f"quality_budget.{key}: unknown key (expected one of {allowed})")
    return QualityBudget(**_check(raw, problems))


def budget_from_plan_text(text: str | None) -> QualityBudget:
    """The budget a stored sweep's plan set (its text is stored with the sweep); the default otherwise."""
    if not text:
        return QualityBudget()
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return QualityBudget()
    problems: list[str] = []
    budget = parse_budget(doc.get("quality_budget"), problems)
    return budget if not problems else QualityBudget()


# Which configs compete for one answer: the files of a model group (its quants) and, within a file, the
# llama.cpp parameters a user tunes for speed alone (threads, batch, offload, ...). One rule, used where the
# sweep orders the reps of rivals in time (agent/sweep/interleave.py) and where the report ranks them
# (agent/report/recommend.py), so what is measured side by side is what is compared.
#
# Held fixed (part of the condition, never a rival): the workload, the runner and the serving load, ``ctx``
# and ``depth`` (they are the question asked, not an answer to it), the KV cache types (they change the
# output, which no quality figure of the recommendation covers), and the knobs that change what a request
# may hold (``swa_full``, ``kv_unified``, ``n_seq_max``) or the device itself (the power mode).

# Report names of the parameters that compete within a model file, in the order the lines name them.
RIVAL_PARAMS = (
    "ngl", "threads", "n_batch", "n_ubatch", "flash_attn", "mmap", "poll", "offload_kqv", "op_offload",
)  # fmt: skip

# Report name -> the RunSpec.params field of the same value.
PARAM_FIELDS: dict[str, str] = {
    "ctx": "n_ctx",
    "ngl": "n_gpu_layers",
    "threads": "n_threads",
    "n_batch": "n_batch",
    "n_ubatch": "n_ubatch",
    "flash_attn": "flash_attn",
    "type_k": "type_k",
    "type_v": "type_v",
    "mmap": "use_mmap",
    "depth": "depth",
    "swa_full": "swa_full",
    "kv_unified": "kv_unified",
    "offload_kqv": "offload_kqv",
    "op_offload": "op_offload",
    "poll": "poll",
    "n_seq_max": "n_seq_max",
}
HELD_PARAMS = tuple(k for k in PARAM_FIELDS if k not in RIVAL_PARAMS)


def held_values(params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The held parameters of a row (report names; a missing depth is depth 0)."""
    return tuple((k, (params.get(k) or 0) if k == "depth" else params.get(k)) for k in HELD_PARAMS)


def rival_values(params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The competing parameters of a row (report names)."""
    return tuple((k, params.get(k)) for k in RIVAL_PARAMS)


def spec_params(spec: Any) -> dict[str, Any]:
    """A RunSpec's parameters under their report names (the spec is duck-typed: plan.model imports this
    module)."""
    return {name: getattr(spec.params, field) for name, field in PARAM_FIELDS.items()}


def spec_condition(spec: Any, group: str) -> tuple[Any, ...]:
    """The condition a spec's config competes in: its group, workload, runner, serving load, power mode and
    held parameters. Specs with equal conditions are rivals."""
    p = spec.params
    return (
        group,
        spec.workload.name,
        p.runner,
        p.concurrency,
        p.request_rate,
        p.power_mode,
        held_values(spec_params(spec)),
    )


# How many steady reps a group of rivals may take, as a multiple of ``[repeat] steady`` (where it starts).
DEFAULT_BUDGET_FACTOR = 4
OFF_STATE_CHOICES = ("mark", "keep", "drop")
DECIDE_KEYS = {"sequential", "max_steady", "group_minutes", "sweep_minutes", "tie_pct", "off_state"}


@dataclass(frozen=True)
class Decide:
    """Plan table ``[decide]``: how a group of rivals is settled (agent/sweep/interleave.py).

    ``sequential`` (default on): after ``[repeat] steady`` reps each, the rivals still open go on, one block
    pair (one rep each, in fresh children) per round, until each comparison with the leader is decided,
    a tie within ±``tie_pct`` % (None: twice the block pairs' own spread, 1–10 %), or the group's budget is
    spent: ``max_steady`` reps (None: ``DEFAULT_BUDGET_FACTOR`` × steady), ``group_minutes`` per group,
    ``sweep_minutes`` of such extra rounds over the whole sweep. Off: exactly ``steady`` reps, as before.
    ``off_state``: a rep taken throttled or in another device state is ``mark``-ed and left out of the
    comparison (default), ``keep``-t in it (still marked), or ``drop``-ped from the row's figures too."""

    sequential: bool = True
    max_steady: int | None = None
    group_minutes: float | None = None
    sweep_minutes: float | None = None
    tie_pct: float | None = None
    off_state: str = "mark"

    def max_reps(self, steady: int) -> int:
        return max(steady, self.max_steady if self.max_steady is not None else DEFAULT_BUDGET_FACTOR * steady)

    def describe(self, steady: int) -> str:
        if not self.sequential:
            return f"fixed: {steady} steady reps"
        parts = [f"from {steady} to {self.max_reps(steady)} reps a rival"]
        if self.group_minutes is not None:
            parts.append(f"{self.group_minutes:g} min a group")
        if self.sweep_minutes is not None:
            parts.append(f"{self.sweep_minutes:g} min a sweep")
        return "sequential, " + ", ".join(parts)


def _positive(raw: dict[str, Any], key: str, problems: list[str], whole: bool = False) -> Any:
    value = raw[key]
    kind_ok = isinstance(value, int) if whole else isinstance(value, (int, float))
    if isinstance(value, bool) or not kind_ok or not math.isfinite(value) or value <= 0:
        what = "a whole number" if whole else "a number"
        problems.append(f"decide.{key}: expected {what} > 0, got {value!r}")
        return None
    return value


def parse_decide(raw: Any, problems: list[str]) -> Decide:
    """Validate a plan's ``[decide]`` table; each problem is appended as 'place: what is wrong'."""
    if raw is None:
        return Decide()
    if not isinstance(raw, dict):
        problems.append("decide: expected a table")
        return Decide()
    for key in sorted(set(raw) - DECIDE_KEYS):
        problems.append(f"decide.{key}: unknown key (expected one of {', '.join(sorted(DECIDE_KEYS))})")
    values: dict[str, Any] = {}
    if "sequential" in raw:
        if isinstance(raw["sequential"], bool):
            values["sequential"] = raw["sequential"]
        else:
            problems.append(f"decide.sequential: expected true or false, got {raw['sequential']!r}")
    for key, whole in (("max_steady", True), ("group_minutes", False), ("sweep_minutes", False)):
        if key in raw and (value := _positive(raw, key, problems, whole)) is not None:
            values[key] = value
    if "max_steady" in values and values["max_steady"] > MAX_MIN_REPS:
        problems.append(f"decide.max_steady: must be at most {MAX_MIN_REPS}, got {values.pop('max_steady')}")
    if "tie_pct" in raw and (tie := _positive(raw, "tie_pct", problems)) is not None:
        if tie >= 50:
            problems.append(f"decide.tie_pct: must be below 50, got {tie}")
        else:
            values["tie_pct"] = float(tie)
    if "off_state" in raw:
        if raw["off_state"] in OFF_STATE_CHOICES:
            values["off_state"] = raw["off_state"]
        else:
            problems.append(f'decide.off_state: expected "mark", "keep" or "drop", got {raw["off_state"]!r}')
    return Decide(**values)


def decide_from_plan_text(text: str | None) -> Decide:
    """The ``[decide]`` table a stored sweep's plan set; the default otherwise."""
    try:
        doc = tomllib.loads(text or "")
    except tomllib.TOMLDecodeError:
        return Decide()
    problems: list[str] = []
    decide = parse_decide(doc.get("decide"), problems)
    return decide if not problems else Decide()
