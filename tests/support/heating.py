"""A simulated device for the soak verdict's tests. Synthetic, not a capture: every answer is known by
construction.

The board's hottest zone follows a first-order heating model, ``T' = (T_amb + k·P - T) / tau``, stepped
exactly once per sample; the power ``P`` is an idle floor plus a share per busy core, scaled by the CPU
clock (the child's CPU time drives the heat). A cpufreq cap drops from ``max_mhz`` to ``capped_mhz`` the
first time the zone reaches ``trip_c`` and stays there (the step-wise governor's first step, latched), and
the worker's decode speed falls in proportion to the cap (the test fault that slows it when the cap
drops). A CPU hog can start at ``hog_from_s``: it takes ``hog_cores`` of other processes' CPU time and
``hog_slowdown`` of the speed, and heats nothing unless told to.

The readings carry the names the built-in collectors give them (``temp.zone0_c``,
``cpufreq.policy0.cur_mhz`` / ``max_mhz``, the proc_stat CPU-time counters), so that their roles come from
the collectors' declarations (``support.roles.declared_roles``). Readings fall half a sample period off
the window edges, so that no reading belongs to two windows.

``LiveDevice`` plays the same model live, in a fake sysfs root, while a real soak runs (on the simulation's
time, read by the real collectors): tests/integration/test_soak_simulated.py.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.verdicts import WindowSpeed
from support.fakes import CPU, THERMAL, FakeRoot

Series = dict[str, list[tuple[float, float | None]]]


@dataclass(frozen=True)
class Device:
    ambient_c: float = 25.0
    k_c_per_w: float = 8.0  # °C per W above ambient at equilibrium
    tau_s: float = 60.0
    idle_w: float = 1.0
    w_per_core: float = 3.0  # at the full clock
    child_cores: float = 2.0  # llama.cpp's decode threads, always busy
    cpus: int = 4
    start_c: float | None = None  # None: the cooled, idle equilibrium (ambient + k · idle)
    max_mhz: float = 1510.0
    trip_c: float | None = None  # None: no trip point the soak can reach
    capped_mhz: float = 1190.0
    tps: float = 20.0  # decode speed at max_mhz
    hog_from_s: float | None = None
    hog_cores: float = 1.0
    hog_slowdown: float = 0.3
    hog_w: float = 0.0  # the hog's heat (none: "a CPU hog and no heat")
    noise: float = 0.005  # a deterministic +-0.5 % window-to-window flicker of the speed
    duration_s: float = 600.0
    window_s: float = 10.0
    sample_s: float = 1.0
    t0: float = 1000.0  # the monotonic clock at the soak's start

    def power_w(self, cap_mhz: float, hog: bool) -> float:
        return (
            self.idle_w
            + self.w_per_core * self.child_cores * cap_mhz / self.max_mhz
            + (self.hog_w if hog else 0.0)
        )

    def equilibrium_c(self, cap_mhz: float | None = None, hog: bool = False) -> float:
        return self.ambient_c + self.k_c_per_w * self.power_w(cap_mhz or self.max_mhz, hog)

    def cooled_c(self) -> float:
        return self.start_c if self.start_c is not None else self.ambient_c + self.k_c_per_w * self.idle_w

    def temp_at(self, t_s: float) -> float:
        """The model's temperature ``t_s`` into the soak while the cap is up (the analytic solution)."""
        target = self.equilibrium_c()
        return target + (self.cooled_c() - target) * math.exp(-t_s / self.tau_s)

    def slope_c_per_min_at(self, t_s: float) -> float:
        return (self.equilibrium_c() - self.temp_at(t_s)) / self.tau_s * 60.0


@dataclass
class Soak:
    device: Device
    series: Series = field(default_factory=dict)
    speeds: list[WindowSpeed] = field(default_factory=list)
    trip_t: float | None = None  # seconds into the soak at which the cap dropped

    def trip_window(self) -> int | None:
        return None if self.trip_t is None else int(self.trip_t // self.device.window_s)

    def without(self, prefix: str) -> Series:
        return {m: s for m, s in self.series.items() if not m.startswith(prefix)}


def _record(series: Series, t: float, values: dict[str, float]) -> None:
    for metric, value in values.items():
        series.setdefault(metric, []).append((t, value))


def simulate(dev: Device) -> Soak:
    """Run the model over the soak: readings every ``sample_s`` and one ``WindowSpeed`` per window."""
    soak = Soak(dev)
    temp, cap = dev.cooled_c(), dev.max_mhz
    busy = child = own = 0.0
    per_window: dict[int, list[float]] = {}
    n = round(dev.duration_s / dev.sample_s)
    for i in range(n):
        t_s = (i + 0.5) * dev.sample_s
        if dev.trip_c is not None and soak.trip_t is None and temp >= dev.trip_c:
            cap, soak.trip_t = dev.capped_mhz, t_s
        hog = dev.hog_from_s is not None and t_s >= dev.hog_from_s
        _record(
            soak.series,
            dev.t0 + t_s,
            {
                "temp.zone0_c": round(temp, 3),  # sysfs thermal zones read in millidegrees
                # the busy policy runs at its cap, read with the 1-MHz jitter of a real clock (the Orin
                # capture's 1189-1190): a clock that never moves would be no evidence at all
                "cpufreq.policy0.cur_mhz": cap - (i % 2),
                "cpufreq.policy0.max_mhz": cap,
                "host.cpu_busy_s": busy,
                "host.cpu_total_s": dev.cpus * t_s,
                "proc.cpu_s": child,
                "self.cpu_s": own,
            },
        )
        speed = dev.tps * cap / dev.max_mhz * (1.0 - dev.hog_slowdown if hog else 1.0)
        per_window.setdefault(int(t_s // dev.window_s), []).append(speed)
        target = dev.ambient_c + dev.k_c_per_w * dev.power_w(cap, hog)
        temp = target + (temp - target) * math.exp(-dev.sample_s / dev.tau_s)
        busy += (dev.child_cores + 0.01 + (dev.hog_cores if hog else 0.0)) * dev.sample_s
        child += dev.child_cores * dev.sample_s
        own += 0.01 * dev.sample_s
    for k, speeds in sorted(per_window.items()):
        tps = sum(speeds) / len(speeds) * (1.0 + dev.noise * ((k % 3) - 1))
        tokens = round(tps * dev.window_s)
        start = dev.t0 + k * dev.window_s
        soak.speeds.append(
            WindowSpeed(k, start, start + dev.window_s, tokens, tokens / tps, tps, 50.0 if k == 0 else None)
        )
    return soak


# -- a live simulated device, for a real soak --------------------------------------------------------------
ZONE_TYPE = "cpu-thermal"
KHZ = 1000


class LiveDevice:
    """Synthetic: a board played in a ``FakeRoot`` while a real soak runs, for the real ThermalZones and
    cpufreq collectors to read. Not a capture: every answer is known by construction.

    Everything it does is a function of the simulation's time ``t``: seconds since the soak's start on
    CLOCK_MONOTONIC (the clock the worker cuts its windows on and the sampler stamps its readings with),
    never of how fast this machine happens to run. Its one zone follows the first-order model of ``Device``,
    ``T' = (T_amb + k·P - T) / tau``, in closed form, for a constant load of ``load_cores`` from the soak's
    start (``P``: those cores scaled by the CPU clock, cap / hardware maximum): the zone reaches its passive
    trip ``trip_c`` at the same ``t`` on an idle machine and at load 10, and ``trip_t`` is that moment (not
    when this thread noticed). Then the policy's ``scaling_max_freq`` (and its current clock) drops to
    ``capped_khz`` and stays there. The worker books every decode step at ``step_ms`` of the simulation's
    time (its test fault reads ``sim <ms>`` from the slow file), stretched by ``slowdown`` once the cap
    dropped, so every window's speed is the simulation's too. What stays real: llama.cpp decoding the
    tokens, the windows, the collectors reading the root, the /proc/stat counters. ``k_c_per_core = 0`` is a
    board that does not heat at all."""

    def __init__(
        self,
        root: FakeRoot,
        slow_file: Path,
        *,
        ambient_c: float = 40.0,
        k_c_per_core: float = 40.0,
        tau_s: float = 4.0,
        trip_c: float | None = None,
        max_khz: int = 1_510_000,
        capped_khz: int = 1_190_000,
        slowdown: float = 0.4,
        load_cores: float = 0.5,
        step_ms: float = 5.0,
        tick_s: float = 0.02,
    ) -> None:
        self.root, self.slow_file = root, slow_file
        self.ambient_c, self.k, self.tau_s, self.trip_c = ambient_c, k_c_per_core, tau_s, trip_c
        self.max_khz, self.capped_khz, self.slowdown, self.tick_s = max_khz, capped_khz, slowdown, tick_s
        self.load_cores, self.step_ms = load_cores, step_ms
        self.temp_c = ambient_c
        self.pid: int | None = None
        self.soak_t0: float | None = None
        self.trip_t: float | None = None  # CLOCK_MONOTONIC of the simulation's trip
        self.hottest_c = ambient_c
        self._steps = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="simulated-device", daemon=True)
        trips = [("passive", round(trip_c * 1000))] if trip_c is not None else []
        root.thermal_zone(0, ZONE_TYPE, round(ambient_c * 1000), mode="enabled", trips=trips)
        root.cpufreq_policy(0, "0-1", max_khz, max_khz, max_khz, "schedutil")
        self.slow_by(0.0)

    def trip_after_s(self) -> float | None:
        """When the zone reaches its trip, in seconds into the soak; None where it settles below it."""
        rise = self.k * self.load_cores
        if self.trip_c is None or rise <= self.trip_c - self.ambient_c:
            return None
        return -self.tau_s * math.log(1.0 - (self.trip_c - self.ambient_c) / rise)

    def settled_c(self, capped: bool = False) -> float:
        """Where the zone settles at full clock, or at the capped one."""
        clock = self.capped_khz / self.max_khz if capped else 1.0
        return self.ambient_c + self.k * self.load_cores * clock

    def temp_at(self, t: float) -> float:
        """The zone's temperature ``t`` seconds into the soak (ambient before it)."""
        if t <= 0.0:
            return self.ambient_c
        t_trip = self.trip_after_s()
        if t_trip is None or t < t_trip or self.trip_c is None:
            full = self.settled_c()
            return full + (self.ambient_c - full) * math.exp(-t / self.tau_s)
        capped = self.settled_c(capped=True)
        return capped + (self.trip_c - capped) * math.exp(-(t - t_trip) / self.tau_s)

    def slow_by(self, fraction: float) -> None:
        """The worker's decode steps from now on: ``step_ms`` stretched so the speed falls by ``fraction``."""
        self.slow_file.write_text(f"sim {self.step_ms / (1.0 - fraction)!r}\n")

    def on_event(self, event: Mapping[str, Any]) -> None:
        """The child's events as the sweep sees them: its pid at start, the soak's t0 on the shared clock."""
        if event.get("event") == "start" and isinstance(event.get("pid"), int):
            self.pid = int(event["pid"])
        elif event.get("event") == "soak_start":
            self.soak_t0 = float(event["t"])

    def __enter__(self) -> LiveDevice:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(self.tick_s):
            self.step(time.monotonic())

    def step(self, now: float) -> None:
        """The files as the simulation has them at ``now`` (CLOCK_MONOTONIC)."""
        t0 = self.soak_t0
        t = now - t0 if t0 is not None else 0.0
        self.temp_c = self.temp_at(t)
        self.hottest_c = max(self.hottest_c, self.temp_c)
        self.root.replace(THERMAL / "thermal_zone0" / "temp", round(self.temp_c * 1000))
        # the current clock at its cap with the 1-MHz jitter of a real one (a clock that never moves is no
        # evidence that it held: edgeprof.collectors.evidence)
        self._steps += 1
        cap_khz = self.capped_khz if self.trip_t is not None else self.max_khz
        cur_khz = cap_khz - 1000 * (self._steps % 2)
        self.root.replace(CPU / "cpufreq" / "policy0" / "scaling_cur_freq", cur_khz)
        t_trip = self.trip_after_s()
        if t0 is not None and t_trip is not None and self.trip_t is None and t >= t_trip:
            self.trip_t = t0 + t_trip
            policy = CPU / "cpufreq" / "policy0"
            self.root.replace(policy / "scaling_max_freq", self.capped_khz)
            self.root.replace(policy / "scaling_cur_freq", self.capped_khz)
            self.slow_by(self.slowdown)
