"""Synthetic runs for the throttle verdict: steady reps back to back from t=0 and series sampled once a
second, with the roles the built-in collectors declare for their names. Not captures: each answer is known
by construction."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from edgeprof.verdicts import RepSample, ThrottleInputs
from support.roles import declared_roles

TRIPS = {"temp.cpu_c": [("active", 50.0), ("passive", 85.0), ("critical", 105.0)]}
STEADY_TPS = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0]
FALLING_TPS = [100.0, 99.0, 95.0, 90.0, 85.0, 84.0]


def reps_of(tps: Sequence[float | None], rep_s: float = 10.0) -> list[RepSample]:
    """Steady reps back to back from t=0, each ``rep_s`` long."""
    return [RepSample(i, i * rep_s, i * rep_s + rep_s - 0.5, v) for i, v in enumerate(tps)]


def series(fn: Callable[[float], float | None], t_end: float = 60.0, step: float = 1.0) -> list[Any]:
    n = round(t_end / step)
    return [(i * step, fn(i * step)) for i in range(n + 1)]


def flat(value: float) -> Callable[[float], float]:
    return lambda _t: value


def ramping(value: float) -> Callable[[float], float]:
    """A real clock held at ``value``: one lower reading at t=0 while the governor ramps up. A clock that
    never moves at all is no evidence (``edgeprof.collectors.evidence``)."""
    return lambda t: value - 100.0 if t == 0 else value


def inputs(
    tps: Sequence[float | None],
    metrics: dict[str, list[Any]],
    *,
    trips: dict[str, list[tuple[str, float]]] | None = None,
    max_freq: dict[str, float] | None = None,
    gpu: bool = False,
) -> ThrottleInputs:
    reps = reps_of(tps)
    return ThrottleInputs(
        reps=reps,
        series=metrics,
        load_start=0.0,
        load_end=reps[-1].t_end if reps else 60.0,
        trip_points=trips if trips is not None else TRIPS,
        max_freq_mhz=max_freq or {},
        gpu_in_use=gpu,
        roles=declared_roles(metrics),
    )


def cool_metrics() -> dict[str, list[Any]]:
    """A cool, steady CPU: 50 °C with a 0.3 °C flicker, one cpufreq policy at its 2000 MHz cap."""
    return {
        "temp.cpu_c": series(lambda t: 50.0 + (0.3 if int(t) % 2 else 0.0)),
        "cpufreq.policy0.cur_mhz": series(flat(2000.0)),
        "cpufreq.policy0.max_mhz": series(flat(2000.0)),
        "cpufreq.policy0.hw_max_mhz": series(flat(2000.0)),
    }
