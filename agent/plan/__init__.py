"""Plans: the TOML model, its validation (every problem at once) and its expansion into run specs.

Other packages import from here, not from the modules inside:

- the plan model (``model``): Plan, RunSpec, Params, Workload, ModelEntry, Repeat, Cooldown, Collect,
  PlanError;
- reading a plan (``parse``): parse_plan, load_plan, with one module per table it calls (``tables``,
  ``matrix``, ``model_files``, ``workloads``, ``power``, ``serving``, ``budget``, ``quality``), the
  cross-field checks (``workload_checks``), the ceilings (``bounds``) and the problem collector
  (``checker``);
- expanding it (``expand``), and rendering chat workloads with a model's template (``chat``).
"""

from edgeprof.plan.bounds import MAX_PLAN_BYTES
from edgeprof.plan.budget import QualityBudget, budget_from_plan_text, parse_budget
from edgeprof.plan.chat import ChatMeta, ChatTemplateError, read_chat_meta, render_chat
from edgeprof.plan.checker import Checker
from edgeprof.plan.expand import expand
from edgeprof.plan.matrix import AXES, AXIS_ALIASES, NGL_ALL, default_threads
from edgeprof.plan.model import (
    PARITY_DEFAULTS,
    Collect,
    Cooldown,
    ModelEntry,
    Params,
    Plan,
    PlanError,
    Repeat,
    RunSpec,
    SoakSpec,
    Workload,
    estimate_prompt_tokens,
    workload_applies,
    workload_for,
)
from edgeprof.plan.parse import load_plan, parse_plan
from edgeprof.plan.power import SystemProbe
from edgeprof.plan.quality import DEFAULT_TEXT_SHA256, MAX_CHUNKS, QualitySpec, default_text, quality_params
from edgeprof.plan.serving import FOREIGN_RUNNER, Serving, is_server_entry

__all__ = [
    "AXES",
    "AXIS_ALIASES",
    "DEFAULT_TEXT_SHA256",
    "FOREIGN_RUNNER",
    "MAX_CHUNKS",
    "MAX_PLAN_BYTES",
    "NGL_ALL",
    "PARITY_DEFAULTS",
    "ChatMeta",
    "ChatTemplateError",
    "Checker",
    "Collect",
    "Cooldown",
    "ModelEntry",
    "Params",
    "Plan",
    "PlanError",
    "QualityBudget",
    "QualitySpec",
    "Repeat",
    "RunSpec",
    "Serving",
    "SoakSpec",
    "SystemProbe",
    "Workload",
    "budget_from_plan_text",
    "default_text",
    "default_threads",
    "estimate_prompt_tokens",
    "expand",
    "is_server_entry",
    "load_plan",
    "parse_budget",
    "parse_plan",
    "quality_params",
    "read_chat_meta",
    "render_chat",
    "workload_applies",
    "workload_for",
]
