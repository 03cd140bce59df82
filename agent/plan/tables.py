"""The plan's small tables, one function each: the name, ``[repeat]``, ``[run]``, ``[quality_budget]``,
``[cooldown]``, ``[collect]`` and ``[schedule]``.

A ``[run]`` key is read by the step it serves: ``allow_power_mode_change`` with the power-mode axis
(agent/plan/power.py), ``allow_ctx_beyond_train`` and ``max_configs`` with the ceilings
(agent/plan/bounds.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgeprof.plan.budget import Decide, QualityBudget, parse_budget, parse_decide
from edgeprof.plan.checker import Checker
from edgeprof.plan.model import Collect, Cooldown, Repeat

REPEAT_KEYS = {"cold", "warmup", "steady"}
RUN_KEYS = {"timeout_s", "cold_cache", "allow_power_mode_change", "allow_ctx_beyond_train", "max_configs"}
RUN_KEYS |= {"reserve_mb"}  # memory the fit check leaves to the rest of the system
COOLDOWN_KEYS = {"below_c", "max_wait_s", "delay_s", "slope_c_per_min", "window_s", "per_rep"}
COLLECT_KEYS = {"interval_ms", "idle_s", "collectors"}
SCHEDULE_KEYS = {"until"}


def parse_name(chk: Checker, doc: dict[str, Any], source: str) -> str:
    """The plan's name: ``name = ...``, else the plan file's stem."""
    return chk.string(doc.get("name", Path(source).stem), "name") or "plan"


def parse_repeat(chk: Checker, doc: dict[str, Any]) -> Repeat:
    rep_t = chk.table(doc, "repeat", "repeat")
    chk.unknown_keys(rep_t, REPEAT_KEYS, "repeat")
    cold = chk.integer(rep_t.get("cold", 1), "repeat.cold", minimum=1)
    warmup = chk.integer(rep_t.get("warmup", 1), "repeat.warmup", minimum=0)
    steady = chk.integer(rep_t.get("steady", 5), "repeat.steady", minimum=1)
    return Repeat(cold=cold or 1, warmup=warmup if warmup is not None else 1, steady=steady or 5)


def parse_run(chk: Checker, run_t: dict[str, Any]) -> tuple[float, float]:
    """``[run]``'s own limits: (timeout_s per child process, reserve_mb kept back by the fit check)."""
    chk.unknown_keys(run_t, RUN_KEYS, "run")
    timeout_s = chk.number(run_t.get("timeout_s", 600), "run.timeout_s", minimum=1) or 600.0
    reserve_mb = chk.number(run_t.get("reserve_mb", 0), "run.reserve_mb", minimum=0) or 0.0
    return timeout_s, reserve_mb


def parse_cold_cache(chk: Checker, run_t: dict[str, Any]) -> str:
    """``drop``: each cold run reads the model from storage (the page cache evicted first); ``keep``: not."""
    cold_cache = run_t.get("cold_cache", "drop")
    if cold_cache not in ("drop", "keep"):
        chk.add("run.cold_cache", f'expected "drop" or "keep", got {cold_cache!r}')
        cold_cache = "drop"
    return str(cold_cache)


def parse_quality_budget(chk: Checker, doc: dict[str, Any]) -> QualityBudget:
    """The recommendation's quality budget (agent/report/recommend.py); its parser reports as text lines,
    so that a stored sweep's plan can be read again without a checker."""
    problems: list[str] = []
    budget = parse_budget(doc.get("quality_budget"), problems)
    for problem in problems:
        place, _, message = problem.partition(": ")
        chk.add(place, message)
    return budget


def parse_decide_table(chk: Checker, doc: dict[str, Any]) -> Decide:
    """How a group of rivals is settled (agent/plan/budget.py ``Decide``), read again by the report."""
    problems: list[str] = []
    decide = parse_decide(doc.get("decide"), problems)
    for problem in problems:
        place, _, message = problem.partition(": ")
        chk.add(place, message)
    return decide


def parse_cooldown(chk: Checker, doc: dict[str, Any]) -> Cooldown:
    cd_t = chk.table(doc, "cooldown", "cooldown")
    chk.unknown_keys(cd_t, COOLDOWN_KEYS, "cooldown")
    below_c = chk.number(cd_t["below_c"], "cooldown.below_c") if "below_c" in cd_t else None
    return Cooldown(
        below_c=below_c,
        max_wait_s=chk.number(cd_t.get("max_wait_s", 300), "cooldown.max_wait_s", minimum=0) or 0.0,
        delay_s=chk.number(cd_t.get("delay_s", 0), "cooldown.delay_s", minimum=0) or 0.0,
        slope_c_per_min=chk.number(cd_t.get("slope_c_per_min", 0.5), "cooldown.slope_c_per_min", minimum=0)
        or 0.0,
        window_s=chk.number(cd_t.get("window_s", 30), "cooldown.window_s", minimum=1) or 30.0,
        per_rep=bool(chk.boolean(cd_t.get("per_rep", False), "cooldown.per_rep")),
    )


def parse_collect(chk: Checker, doc: dict[str, Any]) -> Collect:
    co_t = chk.table(doc, "collect", "collect")
    chk.unknown_keys(co_t, COLLECT_KEYS, "collect")
    interval = chk.integer(co_t.get("interval_ms", 200), "collect.interval_ms", minimum=50) or 200
    collectors_raw = co_t.get("collectors")
    collectors: tuple[str, ...] | None = None
    if collectors_raw is not None:
        if isinstance(collectors_raw, list) and all(isinstance(c, str) for c in collectors_raw):
            collectors = tuple(collectors_raw)
            from edgeprof.collectors.registry import collector_names

            known = collector_names()
            unknown = [c for c in collectors if c not in known]
            if unknown:  # a typo ("psutil") once passed the check and crashed the run
                chk.add(
                    "collect.collectors",
                    f"unknown collector(s) {', '.join(map(repr, unknown))}; known: {', '.join(known)}",
                )
        else:
            chk.add("collect.collectors", "expected an array of collector names")
    return Collect(
        interval_ms=interval,
        idle_s=chk.number(co_t.get("idle_s", 3.0), "collect.idle_s", minimum=0) or 0.0,
        collectors=collectors,
    )


def parse_schedule(chk: Checker, doc: dict[str, Any]) -> None:
    """``[schedule]``: only its keys are checked, so that a misspelt key is a problem as anywhere else."""
    sched_t = chk.table(doc, "schedule", "schedule")
    chk.unknown_keys(sched_t, SCHEDULE_KEYS, "schedule")
