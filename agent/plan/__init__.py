"""Plans: the TOML model, its validation (every problem at once) and its expansion into run specs.

The modules:

- the plan model (``model``): Plan, RunSpec, Params, Workload, ModelEntry, Repeat, Cooldown, Collect,
  PlanError;
- reading a plan (``parse``): parse_plan, load_plan, with one module per table it calls (``tables``,
  ``matrix``, ``model_files``, ``workloads``, ``power``, ``serving``, ``budget``, ``quality``), the
  cross-field checks (``workload_checks``), the ceilings (``bounds``) and the problem collector
  (``checker``);
- expanding it (``expand``), and rendering chat workloads with a model's template (``chat``).

The names below are the ones callers use; each is imported from its module on first use
(``edgeprof.lazy``), so importing the package alone costs nothing but the one named below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgeprof.lazy import lazy_exports

# Imported now, not on first use: the name is also its module's, and importing that module first would
# leave the module where the function should be.
from edgeprof.plan.expand import expand

if TYPE_CHECKING:
    from edgeprof.plan.bounds import MAX_PLAN_BYTES
    from edgeprof.plan.budget import (
        Decide,
        QualityBudget,
        budget_from_plan_text,
        decide_from_plan_text,
        parse_budget,
    )
    from edgeprof.plan.chat import read_chat_meta, render_chat
    from edgeprof.plan.matrix import AXES, NGL_ALL, default_threads
    from edgeprof.plan.model import (
        PARITY_DEFAULTS,
        Collect,
        Cooldown,
        ModelEntry,
        Plan,
        PlanError,
        Repeat,
        RunSpec,
        Workload,
        estimate_prompt_tokens,
    )
    from edgeprof.plan.parse import load_plan, parse_plan
    from edgeprof.plan.power import SystemProbe
    from edgeprof.plan.quality import DEFAULT_TEXT_SHA256, MAX_CHUNKS, QualitySpec, default_text
    from edgeprof.plan.serving import FOREIGN_RUNNER, Serving, is_server_entry

# module of this package -> the public names it defines, imported on first use
_HOMES: dict[str, tuple[str, ...]] = {
    "bounds": ("MAX_PLAN_BYTES",),
    "budget": ("Decide", "QualityBudget", "budget_from_plan_text", "decide_from_plan_text", "parse_budget"),
    "chat": ("read_chat_meta", "render_chat"),
    "matrix": ("AXES", "NGL_ALL", "default_threads"),
    "model": (
        "PARITY_DEFAULTS",
        "Collect",
        "Cooldown",
        "ModelEntry",
        "Plan",
        "PlanError",
        "Repeat",
        "RunSpec",
        "Workload",
        "estimate_prompt_tokens",
    ),
    "parse": ("load_plan", "parse_plan"),
    "power": ("SystemProbe",),
    "quality": ("DEFAULT_TEXT_SHA256", "MAX_CHUNKS", "QualitySpec", "default_text"),
    "serving": ("FOREIGN_RUNNER", "Serving", "is_server_entry"),
}

__all__ = [
    "AXES",
    "DEFAULT_TEXT_SHA256",
    "FOREIGN_RUNNER",
    "MAX_CHUNKS",
    "MAX_PLAN_BYTES",
    "NGL_ALL",
    "PARITY_DEFAULTS",
    "Collect",
    "Cooldown",
    "Decide",
    "ModelEntry",
    "Plan",
    "PlanError",
    "QualityBudget",
    "QualitySpec",
    "Repeat",
    "RunSpec",
    "Serving",
    "SystemProbe",
    "Workload",
    "budget_from_plan_text",
    "decide_from_plan_text",
    "default_text",
    "default_threads",
    "estimate_prompt_tokens",
    "expand",
    "is_server_entry",
    "load_plan",
    "parse_budget",
    "parse_plan",
    "read_chat_meta",
    "render_chat",
]

__getattr__ = lazy_exports(__name__, _HOMES)
