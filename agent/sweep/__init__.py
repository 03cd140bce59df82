"""The sweep: the loop over a plan's run specs as named steps (``loop``), the lease that makes one process the
writer of a plan's sweep (``lease``), the models step (``models``), the fit check and bandwidth figures
(``fit``), the telemetry hooks (``telemetry``), the rows it stores (``runs``) and its progress lines.

Every name is imported from its module on first use: ``edgeprof status`` reads the lease state through this
package and must not pay for the executors and telemetry (numpy) of a sweep it never runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgeprof.sweep.fit import FitChecker, record_sweep_bandwidth
    from edgeprof.sweep.lease import (
        Lease,
        LeaseHeld,
        Owner,
        lease_key,
        mark_interrupted,
        owner_dead,
        owner_gone,
        pid_alive,
        reconcile_dead_owners,
        reconcile_plan,
    )
    from edgeprof.sweep.lease import acquire as acquire_lease
    from edgeprof.sweep.loop import (
        ConfigLoop,
        SweepAborted,
        SweepHooks,
        SweepOptions,
        SweepOutcome,
        describe_outcome,
        env_without_fault,
        find_resumable_sweep,
        run_plan,
        sigterm_as_interrupt,
    )
    from edgeprof.sweep.models import ModelRows, get_or_create_model_file, hash_models, model_group
    from edgeprof.sweep.progress import Progress, outcome_style
    from edgeprof.sweep.telemetry import Telemetry, choose_power_source

# public name -> (module of this package, its name there)
_HOMES: dict[str, tuple[str, str]] = {
    "ConfigLoop": ("loop", "ConfigLoop"),
    "FitChecker": ("fit", "FitChecker"),
    "Lease": ("lease", "Lease"),
    "LeaseHeld": ("lease", "LeaseHeld"),
    "ModelRows": ("models", "ModelRows"),
    "Owner": ("lease", "Owner"),
    "Progress": ("progress", "Progress"),
    "SweepAborted": ("loop", "SweepAborted"),
    "SweepHooks": ("loop", "SweepHooks"),
    "SweepOptions": ("loop", "SweepOptions"),
    "SweepOutcome": ("loop", "SweepOutcome"),
    "Telemetry": ("telemetry", "Telemetry"),
    "acquire_lease": ("lease", "acquire"),
    "choose_power_source": ("telemetry", "choose_power_source"),
    "describe_outcome": ("loop", "describe_outcome"),
    "env_without_fault": ("loop", "env_without_fault"),
    "find_resumable_sweep": ("loop", "find_resumable_sweep"),
    "get_or_create_model_file": ("models", "get_or_create_model_file"),
    "hash_models": ("models", "hash_models"),
    "lease_key": ("lease", "lease_key"),
    "mark_interrupted": ("lease", "mark_interrupted"),
    "model_group": ("models", "model_group"),
    "outcome_style": ("progress", "outcome_style"),
    "owner_dead": ("lease", "owner_dead"),
    "owner_gone": ("lease", "owner_gone"),
    "pid_alive": ("lease", "pid_alive"),
    "reconcile_dead_owners": ("lease", "reconcile_dead_owners"),
    "reconcile_plan": ("lease", "reconcile_plan"),
    "record_sweep_bandwidth": ("fit", "record_sweep_bandwidth"),
    "run_plan": ("loop", "run_plan"),
    "sigterm_as_interrupt": ("loop", "sigterm_as_interrupt"),
}

__all__ = [
    "ConfigLoop",
    "FitChecker",
    "Lease",
    "LeaseHeld",
    "ModelRows",
    "Owner",
    "Progress",
    "SweepAborted",
    "SweepHooks",
    "SweepOptions",
    "SweepOutcome",
    "Telemetry",
    "acquire_lease",
    "choose_power_source",
    "describe_outcome",
    "env_without_fault",
    "find_resumable_sweep",
    "get_or_create_model_file",
    "hash_models",
    "lease_key",
    "mark_interrupted",
    "model_group",
    "outcome_style",
    "owner_dead",
    "owner_gone",
    "pid_alive",
    "reconcile_dead_owners",
    "reconcile_plan",
    "record_sweep_bandwidth",
    "run_plan",
    "sigterm_as_interrupt",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home[0]}"), home[1])
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
