"""Telemetry: the sampling thread, series arithmetic, energy, tegrastats log import.

- ``analysis``: pure arithmetic on ``(t_mono, value)`` series (energy, phase aggregates, J/token, the
  cooldown wait);
- ``energy``: which metrics a run's energy comes from, chosen by their roles;
- ``sampler``: the thread that reads every collector on one grid;
- ``tegrastats_import``: a tegrastats log from elsewhere into the database.

The names below are the ones callers use; each is imported from its module on first use
(``edgeprof.lazy``), so importing the package alone costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgeprof.lazy import lazy_exports

if TYPE_CHECKING:
    from edgeprof.telemetry.analysis import (
        AGGREGATE_STATS,
        CooldownResult,
        PhaseAggregate,
        Series,
        SeriesLike,
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
    from edgeprof.telemetry.energy import EnergySource, choose_energy_source, energy_j
    from edgeprof.telemetry.sampler import Sampler, SampleRow
    from edgeprof.telemetry.tegrastats_import import TegrastatsImportError, import_log

# module of this package -> the public names it defines, imported on first use
_HOMES: dict[str, tuple[str, ...]] = {
    "analysis": (
        "AGGREGATE_STATS",
        "CooldownResult",
        "PhaseAggregate",
        "Series",
        "SeriesLike",
        "aggregate_phase",
        "energy_from_counter_j",
        "energy_from_power_j",
        "energy_per_token",
        "max_over",
        "mean_over",
        "min_over",
        "net_energy_j",
        "slope_per_s",
        "stats_for",
        "wait_for_cooldown",
    ),
    "energy": ("EnergySource", "choose_energy_source", "energy_j"),
    "sampler": ("SampleRow", "Sampler"),
    "tegrastats_import": ("TegrastatsImportError", "import_log"),
}

__all__ = [
    "AGGREGATE_STATS",
    "CooldownResult",
    "EnergySource",
    "PhaseAggregate",
    "SampleRow",
    "Sampler",
    "Series",
    "SeriesLike",
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
    "slope_per_s",
    "stats_for",
    "wait_for_cooldown",
]

__getattr__ = lazy_exports(__name__, _HOMES)
