"""The sweep: the loop over a plan's run specs as named steps (``loop``), the lease that makes one process the
writer of a plan's sweep (``lease``), the models step (``models``), the fit check and bandwidth figures
(``fit``), the telemetry hooks (``telemetry``), the rows it stores (``runs``) and its progress lines.

Every name is imported from its module on first use: ``edgeprof status`` reads the lease state through this
package and must not pay for the executors and telemetry (numpy) of a sweep it never runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgeprof.lazy import lazy_exports

if TYPE_CHECKING:
    from edgeprof.sweep.fit import FitChecker, record_sweep_bandwidth
    from edgeprof.sweep.lease import (
        LeaseHeld,
        Owner,
        owner_dead,
        owner_gone,
        pid_alive,
        reconcile_dead_owners,
    )
    from edgeprof.sweep.loop import SweepAborted, SweepOutcome, describe_outcome, env_without_fault, run_plan
    from edgeprof.sweep.models import get_or_create_model_file, model_group
    from edgeprof.sweep.progress import Progress, outcome_style
    from edgeprof.sweep.telemetry import Telemetry, choose_power_source

# module of this package -> the public names it defines, imported on first use
_HOMES: dict[str, tuple[str, ...]] = {
    "fit": ("FitChecker", "record_sweep_bandwidth"),
    "lease": ("LeaseHeld", "Owner", "owner_dead", "owner_gone", "pid_alive", "reconcile_dead_owners"),
    "loop": ("SweepAborted", "SweepOutcome", "describe_outcome", "env_without_fault", "run_plan"),
    "models": ("get_or_create_model_file", "model_group"),
    "progress": ("Progress", "outcome_style"),
    "telemetry": ("Telemetry", "choose_power_source"),
}

__all__ = [
    "FitChecker",
    "LeaseHeld",
    "Owner",
    "Progress",
    "SweepAborted",
    "SweepOutcome",
    "Telemetry",
    "choose_power_source",
    "describe_outcome",
    "env_without_fault",
    "get_or_create_model_file",
    "model_group",
    "outcome_style",
    "owner_dead",
    "owner_gone",
    "pid_alive",
    "reconcile_dead_owners",
    "record_sweep_bandwidth",
    "run_plan",
]

__getattr__ = lazy_exports(__name__, _HOMES)
