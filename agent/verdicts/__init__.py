"""Verdicts on a run: throttled, stable, contended.

- ``throttle``: hardware flags, clock drops under heat and tokens/s drift -> ``throttle_verdict``;
- ``stability``: pyperf-style spread of the steady repetitions -> ``stability``;
- ``interference``: other work competing for the CPU during the steady repetitions;
- ``soak``: a long back-to-back run judged window by window (burst vs sustained speed, when it throttled,
  thermal steady state) -> ``judge_soak``; ``soak_telemetry``: its windows joined with their telemetry;
- ``serving``: the same two questions for a serving level (its requests' TPOT, its time window);
- ``store``: a stored run's inputs from the database, judged and stored as ``Verdict`` rows;
- ``summary``: stored verdicts read back for reports.

The judging functions are pure and take the roles of the metrics they read (as the collectors declared
them); ``store`` finds those roles for a stored run (``run_roles``).

The names below are the ones callers use; each is imported from its module on first use
(``edgeprof.lazy``), so importing the package alone costs nothing but the one named below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgeprof.lazy import lazy_exports

# Imported now, not on first use: the name is also its module's, and importing that module first would
# leave the module where the function should be.
from edgeprof.verdicts.stability import stability

if TYPE_CHECKING:
    from edgeprof.verdicts.interference import InterferenceThresholds, Rep, interference_verdict, judge_rep
    from edgeprof.verdicts.series import spearman, value_at
    from edgeprof.verdicts.serving import LevelInputs, level_interference, level_stability, request_groups
    from edgeprof.verdicts.soak import SoakJudgement, SoakThresholds, judge_soak
    from edgeprof.verdicts.soak_telemetry import WindowSpeed, soak_windows
    from edgeprof.verdicts.store import (
        analyse_run,
        analyse_sweep,
        gpu_in_use,
        inputs_for_run,
        run_roles,
        series_of,
        stored_roles,
        stored_trip_points,
        trip_points_from,
    )
    from edgeprof.verdicts.summary import (
        SEVERITY,
        VerdictLikeRow,
        attach_verdicts,
        config_verdict,
        summary_line,
        verdicts_by_run,
    )
    from edgeprof.verdicts.throttle import (
        RepSample,
        ThrottleInputs,
        ThrottleThresholds,
        is_temperature,
        throttle_verdict,
    )

# module of this package -> the public names it defines, imported on first use
_HOMES: dict[str, tuple[str, ...]] = {
    "interference": ("InterferenceThresholds", "Rep", "interference_verdict", "judge_rep"),
    "series": ("spearman", "value_at"),
    "serving": ("LevelInputs", "level_interference", "level_stability", "request_groups"),
    "soak": ("SoakJudgement", "SoakThresholds", "judge_soak"),
    "soak_telemetry": ("WindowSpeed", "soak_windows"),
    "store": (
        "analyse_run",
        "analyse_sweep",
        "gpu_in_use",
        "inputs_for_run",
        "run_roles",
        "series_of",
        "stored_roles",
        "stored_trip_points",
        "trip_points_from",
    ),
    "summary": (
        "SEVERITY",
        "VerdictLikeRow",
        "attach_verdicts",
        "config_verdict",
        "summary_line",
        "verdicts_by_run",
    ),
    "throttle": ("RepSample", "ThrottleInputs", "ThrottleThresholds", "is_temperature", "throttle_verdict"),
}

__all__ = [
    "SEVERITY",
    "InterferenceThresholds",
    "LevelInputs",
    "Rep",
    "RepSample",
    "SoakJudgement",
    "SoakThresholds",
    "ThrottleInputs",
    "ThrottleThresholds",
    "VerdictLikeRow",
    "WindowSpeed",
    "analyse_run",
    "analyse_sweep",
    "attach_verdicts",
    "config_verdict",
    "gpu_in_use",
    "inputs_for_run",
    "interference_verdict",
    "is_temperature",
    "judge_rep",
    "judge_soak",
    "level_interference",
    "level_stability",
    "request_groups",
    "run_roles",
    "series_of",
    "soak_windows",
    "spearman",
    "stability",
    "stored_roles",
    "stored_trip_points",
    "summary_line",
    "throttle_verdict",
    "trip_points_from",
    "value_at",
    "verdicts_by_run",
]

__getattr__ = lazy_exports(__name__, _HOMES)
