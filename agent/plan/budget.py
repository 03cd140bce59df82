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
