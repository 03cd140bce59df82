"""Which metrics a run's energy comes from, and the energy over a window from them.

The choice reads only metric roles (``edgeprof.collectors.roles``), so a new collector's power gauges and
energy counters are used as soon as its module declares them. Precedence, best first (docs/telemetry.md):

1. ``board_input``: what the whole board draws -- a Jetson's input rail (VDD_IN, POM_5V_IN, VIN) or RAPL
   ``psys``. One metric covers everything: ``whole_board`` is true.
2. ``rails_sum``: a board with rails but no input rail (AGX Orin, AGX Xavier, Thor without VIN): the sum of
   its rails, as jtop computes its total (jtop's own total where it gives one, so nothing is counted twice).
   The module's rails, not the carrier board: ``whole_board`` is false.
3. ``gpu+cpu``: a dGPU box: every GPU's own figure (NVML energy counter, else its power gauge) plus every
   CPU package counter (RAPL). Either alone is ``gpu`` or ``cpu``. Not the whole board (fans, disks, RAM
   and the PSU's loss are outside both).
4. ``partial``: whatever else measures power or energy, one metric.

Counters beat gauges for the same thing: a counter integrates exactly, a gauge is a trapezoid over samples.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from edgeprof.collectors import MetricRole
from edgeprof.telemetry.analysis import SeriesLike, energy_from_counter_j, energy_from_power_j

EnergyBasis = Literal["board_input", "rails_sum", "gpu+cpu", "gpu", "cpu", "partial"]
# The longest ``power_source`` the run table holds (VARCHAR(96)); the full list is in ``energy_sources``.
POWER_SOURCE_CHARS = 96


@dataclass(frozen=True)
class EnergyPart:
    """One metric summed into a run's energy: a counter (``scale`` = J per unit) or a gauge (mW per unit)."""

    metric: str
    kind: Literal["counter", "gauge"]
    scale: float
    wrap: float | None = None


@dataclass(frozen=True)
class EnergySource:
    parts: tuple[EnergyPart, ...]
    basis: EnergyBasis
    whole_board: bool

    @property
    def metrics(self) -> list[str]:
        return [p.metric for p in self.parts]

    @property
    def name(self) -> str:
        """The metrics, ``+``-joined: what the report prints as the energy source."""
        return "+".join(self.metrics)

    @property
    def short_name(self) -> str:
        """``name`` where it fits ``run.power_source``; else a count pointing at ``energy_sources``."""
        if len(self.name) <= POWER_SOURCE_CHARS:
            return self.name
        return f"{len(self.parts)} metrics ({self.basis}); see energy_sources"


def _part(metric: str, role: MetricRole, wraps: Mapping[str, float | None]) -> EnergyPart | None:
    if role.role == "energy" and role.to_j is not None:
        wrap = wraps.get(metric)
        return EnergyPart(metric, "counter", role.to_j, wrap if wrap is not None else role.wrap)
    if role.role == "power" and role.to_mw is not None:
        return EnergyPart(metric, "gauge", role.to_mw)
    return None


def _best(candidates: list[tuple[str, MetricRole]], wraps: Mapping[str, float | None]) -> EnergyPart | None:
    """A counter before a gauge, then by name (deterministic)."""
    ordered = sorted(candidates, key=lambda mr: (mr[1].role != "energy", mr[0]))
    for metric, role in ordered:
        part = _part(metric, role, wraps)
        if part is not None:
            return part
    return None


def choose_energy_source(
    roles: Mapping[str, MetricRole], wraps: Mapping[str, float | None] | None = None
) -> EnergySource | None:
    """The run's energy source among the metrics in ``roles`` (metric -> role); None where none measures
    power or energy. ``wraps`` gives counters' live wrap values (``Metric.wrap``)."""
    wraps = wraps or {}
    usable = [(m, r) for m, r in sorted(roles.items()) if _part(m, r, wraps) is not None]
    board = [(m, r) for m, r in usable if r.scope == "board_input"]
    if board:
        best = _best(board, wraps)
        if best is not None:
            return EnergySource((best,), "board_input", True)
    totals = [(m, r) for m, r in usable if r.scope == "rails_total"]
    if totals:
        best = _best(totals, wraps)
        if best is not None:
            return EnergySource((best,), "rails_sum", False)
    rails = [_part(m, r, wraps) for m, r in usable if r.scope == "rail"]
    rail_parts = tuple(p for p in rails if p is not None)
    if rail_parts:
        return EnergySource(rail_parts, "rails_sum", False)
    # One figure per device: a GPU's counter or else its gauge, never both (they measure the same draw).
    devices: dict[tuple[str, str], list[tuple[str, MetricRole]]] = {}
    for m, r in usable:
        if r.scope == "device" and r.component in ("gpu", "cpu"):
            devices.setdefault((r.component, r.instance or m), []).append((m, r))
    picked = {key: _best(group, wraps) for key, group in sorted(devices.items())}
    gpu = tuple(p for (component, _), p in picked.items() if component == "gpu" and p is not None)
    cpu = tuple(p for (component, _), p in picked.items() if component == "cpu" and p is not None)
    if gpu and cpu:
        return EnergySource(gpu + cpu, "gpu+cpu", False)
    if gpu:
        return EnergySource(gpu, "gpu", False)
    if cpu:
        return EnergySource(cpu, "cpu", False)
    best = _best(usable, wraps)
    return EnergySource((best,), "partial", False) if best is not None else None


def energy_j(
    source: EnergySource | None, series: Mapping[str, SeriesLike], t_start: float, t_end: float
) -> float | None:
    """Joules in [t_start, t_end]: the sum over the source's parts; None when any part cannot say (a sum
    missing one rail would understate the draw, and an understated figure is worse than none)."""
    if source is None:
        return None
    total = 0.0
    for part in source.parts:
        points = series.get(part.metric)
        if points is None:
            return None
        if part.kind == "counter":
            value = energy_from_counter_j(points, t_start, t_end, part.wrap, part.scale)
        else:
            scaled = [(t, v * part.scale if v is not None else None) for t, v in points]
            value = energy_from_power_j(scaled, t_start, t_end)
        if value is None:
            return None
        total += value
    return total
