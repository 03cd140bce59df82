"""Telemetry: the sampling thread, series arithmetic, energy, tegrastats log import.

- ``analysis``: pure arithmetic on ``(t_mono, value)`` series (energy, phase aggregates, J/token, the
  cooldown wait);
- ``energy``: which metrics a run's energy comes from, chosen by their roles;
- ``sampler``: the thread that reads every collector on one grid;
- ``tegrastats_import``: a tegrastats log from elsewhere into the database.
"""

from edgeprof.telemetry.analysis import (
    AGGREGATE_STATS,
    DEFAULT_EDGE_TOL_S,
    DEFAULT_MAX_GAP_S,
    CooldownReason,
    CooldownResult,
    PhaseAggregate,
    Series,
    SeriesLike,
    Stat,
    aggregate_phase,
    energy_from_counter_j,
    energy_from_power_j,
    energy_per_token,
    max_over,
    mean_over,
    min_over,
    net_energy_j,
    slope_per_s,
    stats_for,
    wait_for_cooldown,
)
from edgeprof.telemetry.energy import (
    POWER_SOURCE_CHARS,
    EnergyBasis,
    EnergyPart,
    EnergySource,
    choose_energy_source,
    energy_j,
)
from edgeprof.telemetry.sampler import CollectorState, Sampler, SampleRow, SamplerStats
from edgeprof.telemetry.tegrastats_import import (
    EXIT_BAD_INPUT,
    ImportCounts,
    TegrastatsImportError,
    import_log,
    parse_timestamp,
)

__all__ = [
    "AGGREGATE_STATS",
    "DEFAULT_EDGE_TOL_S",
    "DEFAULT_MAX_GAP_S",
    "EXIT_BAD_INPUT",
    "POWER_SOURCE_CHARS",
    "CollectorState",
    "CooldownReason",
    "CooldownResult",
    "EnergyBasis",
    "EnergyPart",
    "EnergySource",
    "ImportCounts",
    "PhaseAggregate",
    "SampleRow",
    "Sampler",
    "SamplerStats",
    "Series",
    "SeriesLike",
    "Stat",
    "TegrastatsImportError",
    "aggregate_phase",
    "choose_energy_source",
    "energy_from_counter_j",
    "energy_from_power_j",
    "energy_j",
    "energy_per_token",
    "import_log",
    "max_over",
    "mean_over",
    "min_over",
    "net_energy_j",
    "parse_timestamp",
    "slope_per_s",
    "stats_for",
    "wait_for_cooldown",
]
