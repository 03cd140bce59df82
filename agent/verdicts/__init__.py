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
"""

from edgeprof.verdicts.interference import InterferenceThresholds, Rep, interference_verdict, judge_rep
from edgeprof.verdicts.result import VerdictResult
from edgeprof.verdicts.series import spearman, value_at
from edgeprof.verdicts.serving import (
    LevelInputs,
    level_inputs,
    level_interference,
    level_stability,
    request_groups,
)
from edgeprof.verdicts.soak import SoakJudgement, SoakThresholds, SoakValue, judge_soak
from edgeprof.verdicts.soak_telemetry import SoakWindow, WindowSpeed, soak_windows
from edgeprof.verdicts.stability import StabilityThresholds, StabilityValue, stability
from edgeprof.verdicts.store import (
    LOAD_PHASES,
    VERDICT_KINDS,
    analyse_run,
    analyse_sweep,
    gpu_in_use,
    inputs_for_run,
    reference_clocks,
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
    NVML_THROTTLE_REASONS,
    THROTTLING_TRIP_TYPES,
    RepSample,
    ThrottleInputs,
    ThrottleThresholds,
    ThrottleValue,
    clock_domains,
    is_clock,
    is_temperature,
    throttle_verdict,
)

__all__ = [
    "LOAD_PHASES",
    "NVML_THROTTLE_REASONS",
    "SEVERITY",
    "THROTTLING_TRIP_TYPES",
    "VERDICT_KINDS",
    "InterferenceThresholds",
    "LevelInputs",
    "Rep",
    "RepSample",
    "SoakJudgement",
    "SoakThresholds",
    "SoakValue",
    "SoakWindow",
    "StabilityThresholds",
    "StabilityValue",
    "ThrottleInputs",
    "ThrottleThresholds",
    "ThrottleValue",
    "VerdictLikeRow",
    "VerdictResult",
    "WindowSpeed",
    "analyse_run",
    "analyse_sweep",
    "attach_verdicts",
    "clock_domains",
    "config_verdict",
    "gpu_in_use",
    "inputs_for_run",
    "interference_verdict",
    "is_clock",
    "is_temperature",
    "judge_rep",
    "judge_soak",
    "level_inputs",
    "level_interference",
    "level_stability",
    "reference_clocks",
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
