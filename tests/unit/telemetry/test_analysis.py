"""Energy, aggregates and cooldown on synthetic series whose answers are known in closed form."""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import pairwise

import pytest
from support.roles import declared_roles, role

from edgeprof.telemetry import (
    AGGREGATE_STATS,
    CooldownResult,
    PhaseAggregate,
    Series,
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

RAPL_WRAP_UJ = 262143328850.0  # max_energy_range_uj of a real RAPL package domain


def sampled(f: Callable[[float], float | None], t0: float, t1: float, dt: float) -> Series:
    """f sampled at t0, t0+dt, ..., t1 (computed from an index so the grid does not drift)."""
    n = round((t1 - t0) / dt)
    return [(t0 + i * dt, f(t0 + i * dt)) for i in range(n + 1)]


# --- energy from power (trapezoid) -------------------------------------------------------------------


@pytest.mark.parametrize(("power_mw", "t_start", "t_end"), [(5000.0, 2.0, 7.0), (12345.0, 0.0, 10.0)])
def test_power_constant(power_mw: float, t_start: float, t_end: float) -> None:
    series = sampled(lambda _t: power_mw, 0.0, 10.0, 0.1)
    energy = energy_from_power_j(series, t_start, t_end)
    assert energy == pytest.approx(power_mw * (t_end - t_start) / 1000.0, rel=1e-12)


def test_power_constant_at_monotonic_clock_magnitude() -> None:
    base = 123456.789
    series = sampled(lambda _t: 7000.0, base, base + 10.0, 0.25)
    assert energy_from_power_j(series, base + 1.0, base + 9.0) == pytest.approx(56.0, rel=1e-9)


def test_power_linear_ramp_exact_area() -> None:
    # P = 1000·t mW: ∫ from 2.5 to 7.5 of t dt = (7.5² − 2.5²)/2 = 25 J; edges fall mid-step.
    series = sampled(lambda t: 1000.0 * t, 0.0, 10.0, 1.0)
    assert energy_from_power_j(series, 2.5, 7.5) == pytest.approx(25.0, rel=1e-12)


def test_power_window_inside_one_step_is_clipped() -> None:
    series = [(0.0, 0.0), (1.0, 2000.0)]  # P = 2000·t mW
    # ∫ from 0.25 to 0.75 of 2t dt = 0.75² − 0.25² = 0.5 J
    assert energy_from_power_j(series, 0.25, 0.75) == pytest.approx(0.5, rel=1e-12)


def test_power_window_clipping_ignores_outside_samples() -> None:
    series = [(0.0, 100000.0), *sampled(lambda _t: 4000.0, 1.0, 9.0, 0.5), (10.0, 100000.0)]
    assert energy_from_power_j(series, 3.3, 3.7) == pytest.approx(4000.0 * 0.4 / 1000.0, rel=1e-12)


def test_power_unsorted_input() -> None:
    series = sampled(lambda t: 1000.0 * t, 0.0, 10.0, 1.0)
    assert energy_from_power_j(list(reversed(series)), 2.5, 7.5) == pytest.approx(25.0, rel=1e-12)


def test_power_gap_longer_than_max_gap_is_none_not_zero() -> None:
    series = sampled(lambda t: None if 3.0 < t < 7.0 else 5000.0, 0.0, 10.0, 0.5)
    assert energy_from_power_j(series, 1.0, 9.0) is None


def test_power_gap_outside_window_does_not_matter() -> None:
    series = sampled(lambda t: None if 3.0 < t < 7.0 else 5000.0, 0.0, 10.0, 0.5)
    assert energy_from_power_j(series, 7.5, 9.5) == pytest.approx(10.0)


def test_power_short_gap_is_bridged_linearly() -> None:
    # One failed read in a linear ramp: bridging interpolates the same line, so the area is still exact.
    series = sampled(lambda t: None if t == 5.0 else 1000.0 * t, 0.0, 10.0, 1.0)
    assert energy_from_power_j(series, 2.5, 7.5) == pytest.approx(25.0, rel=1e-12)
    assert energy_from_power_j(series, 2.5, 7.5, max_gap_s=1.5) is None


def test_power_nan_is_missing() -> None:
    series = sampled(lambda t: math.nan if 3.0 < t < 7.0 else 5000.0, 0.0, 10.0, 0.5)
    assert energy_from_power_j(series, 1.0, 9.0) is None


@pytest.mark.parametrize(
    "series",
    [[], [(5.0, 5000.0)], [(t, None) for t in range(11)], [(0.0, 5000.0), (1.0, None), (10.0, None)]],
)
def test_power_too_few_points_is_none(series: Series) -> None:
    assert energy_from_power_j(series, 0.0, 10.0) is None


def test_power_window_beyond_samples() -> None:
    series = sampled(lambda _t: 5000.0, 0.0, 10.0, 0.5)
    assert energy_from_power_j(series, 5.0, 12.0) is None
    assert energy_from_power_j(series, -3.0, 5.0) is None
    # A small overhang (sampler and phase marks are not in step) holds the edge reading.
    assert energy_from_power_j(series, 5.0, 10.3) == pytest.approx(5.3 * 5.0, rel=1e-12)
    assert energy_from_power_j(series, -0.2, 5.0) == pytest.approx(5.2 * 5.0, rel=1e-12)
    assert energy_from_power_j(series, 5.0, 10.3, edge_tol_s=0.0) is None


def test_power_empty_window_is_none() -> None:
    series = sampled(lambda _t: 5000.0, 0.0, 10.0, 0.5)
    assert energy_from_power_j(series, 5.0, 5.0) is None
    assert energy_from_power_j(series, 6.0, 5.0) is None


# --- energy from a cumulative counter -----------------------------------------------------------------


def rapl_counter(
    watts: float, start_uj: float, wrap: float | None = RAPL_WRAP_UJ
) -> Callable[[float], float]:
    def value(t: float) -> float:
        raw = start_uj + watts * 1e6 * t
        return raw % wrap if wrap else raw

    return value


def test_counter_constant_power() -> None:
    series = sampled(rapl_counter(5.0, 1e9), 0.0, 10.0, 0.5)
    energy = energy_from_counter_j(series, 1.2, 4.7, RAPL_WRAP_UJ, 1e-6)
    assert energy == pytest.approx(5.0 * 3.5, rel=1e-9)


def test_counter_matches_trapezoid_for_same_constant_power() -> None:
    power = sampled(lambda _t: 5000.0, 0.0, 10.0, 0.5)
    counter = sampled(rapl_counter(5.0, 0.0), 0.0, 10.0, 0.5)
    from_power = energy_from_power_j(power, 2.0, 8.0)
    from_counter = energy_from_counter_j(counter, 2.0, 8.0, RAPL_WRAP_UJ, 1e-6)
    assert from_power == pytest.approx(30.0, rel=1e-12)
    assert from_counter == pytest.approx(30.0, rel=1e-9)


def test_counter_wraparound() -> None:
    # 7 J before the wrap: the counter rolls over at t = 1.4 s, inside the window.
    series = sampled(rapl_counter(5.0, RAPL_WRAP_UJ - 7e6), 0.0, 10.0, 0.5)
    values = [v for _, v in series if v is not None]
    assert any(b < a for a, b in pairwise(values))
    energy = energy_from_counter_j(series, 0.3, 6.3, RAPL_WRAP_UJ, 1e-6)
    assert energy == pytest.approx(30.0, rel=1e-6)


def test_counter_backwards_without_wrap_is_none() -> None:
    series: Series = [(0.0, 5e6), (1.0, 6e6), (2.0, 1e6), (3.0, 2e6)]
    assert energy_from_counter_j(series, 0.0, 3.0, None, 1e-6) is None


def test_counter_nvml_millijoules() -> None:
    series = sampled(lambda t: 40000.0 + 30000.0 * t, 0.0, 5.0, 0.2)  # 30 W in mJ
    assert energy_from_counter_j(series, 1.0, 4.0, None, 1e-3) == pytest.approx(90.0, rel=1e-9)


def test_counter_missing_reads_inside_window_are_exact() -> None:
    # A counter keeps counting while reads fail: a long hole wholly inside the window loses nothing.
    counter = rapl_counter(5.0, 0.0)
    series = sampled(lambda t: None if 3.0 < t < 7.0 else counter(t), 0.0, 10.0, 0.5)
    assert energy_from_counter_j(series, 1.0, 9.0, RAPL_WRAP_UJ, 1e-6) == pytest.approx(40.0, rel=1e-9)


def test_counter_long_step_across_an_edge_is_none() -> None:
    counter = rapl_counter(5.0, 0.0)
    series = sampled(lambda t: None if 3.0 < t < 7.0 else counter(t), 0.0, 10.0, 0.5)
    assert energy_from_counter_j(series, 5.0, 9.0, RAPL_WRAP_UJ, 1e-6) is None


def test_counter_not_covered_is_none() -> None:
    series = sampled(rapl_counter(5.0, 0.0), 0.0, 10.0, 0.5)
    assert energy_from_counter_j(series, 5.0, 12.0, RAPL_WRAP_UJ, 1e-6) is None
    assert energy_from_counter_j(series[:1], 0.0, 1.0, RAPL_WRAP_UJ, 1e-6) is None
    assert energy_from_counter_j([], 0.0, 1.0, RAPL_WRAP_UJ, 1e-6) is None


def test_counter_nearest_inside_extends_edge_rate() -> None:
    series = sampled(rapl_counter(5.0, 0.0), 1.0, 9.0, 0.5)
    # Readings start 0.3 s after the window and stop 0.2 s before it ends: both edges within tolerance.
    assert energy_from_counter_j(series, 0.7, 9.2, RAPL_WRAP_UJ, 1e-6) == pytest.approx(42.5, rel=1e-9)
    assert energy_from_counter_j(series, 0.7, 9.2, RAPL_WRAP_UJ, 1e-6, edge_tol_s=0.1) is None


# --- time-weighted mean, max, min --------------------------------------------------------------------


def test_mean_is_trapezoid_time_weighted() -> None:
    # Uneven spacing: a plain mean of readings would be (0 + 10 + 10) / 3; time-weighted over [0, 10]:
    # (0→10 over 1 s: area 5) + (10 for 9 s: area 90) = 95 / 10.
    series: Series = [(0.0, 0.0), (1.0, 10.0), (10.0, 10.0)]
    assert mean_over(series, 0.0, 10.0, max_gap_s=10.0) == pytest.approx(9.5)


def test_mean_times_duration_is_energy() -> None:
    series = sampled(lambda t: 1000.0 * t, 0.0, 10.0, 1.0)
    mean = mean_over(series, 2.5, 7.5)
    energy = energy_from_power_j(series, 2.5, 7.5)
    assert mean is not None and energy is not None
    assert mean * 5.0 / 1000.0 == pytest.approx(energy)


def test_mean_between_two_readings_is_interpolated() -> None:
    assert mean_over([(0.0, 40.0), (1.0, 50.0)], 0.2, 0.4) == pytest.approx(43.0)


def test_mean_skips_long_gaps_and_uses_covered_time() -> None:
    series: Series = [(0.0, 10.0), (1.0, 10.0), (2.0, None), (5.0, 30.0), (6.0, 30.0)]
    # The 1 → 5 s step is longer than max_gap_s: only [0, 1] and [5, 6] count.
    assert mean_over(series, 0.0, 6.0) == pytest.approx(20.0)


def test_mean_single_reading_and_nothing() -> None:
    assert mean_over([(5.0, 42.0)], 0.0, 10.0) == 42.0
    assert mean_over([(5.0, None)], 0.0, 10.0) is None
    assert mean_over([(20.0, 42.0)], 0.0, 10.0) is None
    assert mean_over([], 0.0, 10.0) is None


def test_max_min_ignore_none_and_outside_readings() -> None:
    series: Series = [(0.0, 99.0), (1.0, 40.0), (2.0, None), (3.0, 55.0), (4.0, 45.0), (5.0, -5.0)]
    assert max_over(series, 1.0, 4.0) == 55.0
    assert min_over(series, 1.0, 4.0) == 40.0
    assert max_over(series, 1.5, 2.5) is None
    assert min_over([(2.0, None)], 0.0, 4.0) is None


# --- per-phase aggregates ----------------------------------------------------------------------------


def test_stats_for_rules() -> None:
    # by the roles the built-in collectors declare for these names
    assert stats_for(role("temp.cpu_c")) == ("max", "mean")
    assert stats_for(role("temp.pmic_die_c")) == ()
    assert stats_for(role("cpufreq.policy4.cur_mhz")) == ("mean", "min")
    assert stats_for(role("cpufreq.policy4.max_mhz")) == ()
    assert stats_for(role("cpu3.freq_mhz")) == ("mean", "min")
    assert stats_for(role("gpu.util_pct")) == ("mean",)
    assert stats_for(role("cpu3.util_pct")) == ("mean",)
    assert stats_for(role("power.vdd_in_mw")) == ("mean",)
    assert stats_for(role("proc.rss_mb")) == ("max",)
    assert stats_for(role("mem.ram_used_mb")) == ("max",)
    assert stats_for(role("energy.package_uj")) == ()
    # JetPack 7's undocumented second value: stored, not judged
    assert stats_for(role("temp.cpu_2nd_c")) == ()
    assert stats_for(role("not.a_known_metric")) == ()
    assert all(stats for stats in AGGREGATE_STATS.values())


def test_stats_follow_the_declared_role_not_the_name() -> None:
    from edgeprof.collectors import MetricRole

    # A name no collector claims still aggregates by the role given for it (as stored with a sweep) ...
    junction = {"amdgpu0.junction_c": sampled(lambda _t: 70.0, 0.0, 10.0, 1.0)}
    roles = {"amdgpu0.junction_c": MetricRole("temperature", "C", "gpu")}
    assert stats_for(roles["amdgpu0.junction_c"]) == ("max", "mean")
    assert [r.stat for r in aggregate_phase(junction, 2.0, 8.0, roles=roles)] == ["max", "mean"]
    # ... a name a collector claims goes by the role given, not by its name ...
    assert stats_for(MetricRole("other", "C")) == ()
    cpu = {"temp.cpu_c": sampled(lambda _t: 50.0, 0.0, 10.0, 1.0)}
    assert aggregate_phase(cpu, 2.0, 8.0, roles={"temp.cpu_c": MetricRole("other", "C")}) == []
    # ... and a metric without a role is not aggregated.
    assert aggregate_phase(cpu, 2.0, 8.0, roles={}) == []


def test_aggregate_phase_known_values() -> None:
    samples: dict[str, Series] = {
        "temp.cpu_c": sampled(lambda t: 40.0 + 2.0 * t, 0.0, 10.0, 1.0),  # 40 → 60
        "temp.pmic_die_c": sampled(lambda _t: 100.0, 0.0, 10.0, 1.0),
        "cpufreq.policy0.cur_mhz": sampled(lambda t: 800.0 if t == 5.0 else 1500.0, 0.0, 10.0, 1.0),
        "cpu0.util_pct": sampled(lambda _t: 75.0, 0.0, 10.0, 1.0),
        "power.vdd_in_mw": sampled(lambda t: 1000.0 * t, 0.0, 10.0, 1.0),
        "proc.rss_mb": sampled(lambda t: 100.0 + t, 0.0, 10.0, 1.0),
        "mem.ram_used_mb": sampled(lambda t: None if t > 8 else 2000.0 + t, 0.0, 10.0, 1.0),
        "energy.package_uj": sampled(rapl_counter(5.0, 0.0), 0.0, 10.0, 1.0),
        "gpu.util_pct": [(t, None) for t in range(11)],
    }
    rows = aggregate_phase(
        samples, 2.0, 8.0, roles=declared_roles(samples), phase="decode", kind="steady", rep=3
    )
    got = {(r.metric, r.stat): r.value for r in rows}
    assert got == pytest.approx(
        {
            ("cpu0.util_pct", "mean"): 75.0,
            ("cpufreq.policy0.cur_mhz", "mean"): 1500.0 - 700.0 / 6.0,  # a 2 s-wide triangle of −700 MHz
            ("cpufreq.policy0.cur_mhz", "min"): 800.0,
            ("gpu.util_pct", "mean"): None,
            ("mem.ram_used_mb", "max"): 2008.0,
            ("power.vdd_in_mw", "mean"): 5000.0,
            ("proc.rss_mb", "max"): 108.0,
            ("temp.cpu_c", "max"): 56.0,
            ("temp.cpu_c", "mean"): 50.0,
        }
    )
    assert all((r.phase, r.kind, r.rep) == ("decode", "steady", 3) for r in rows)
    assert [r.metric for r in rows] == sorted(r.metric for r in rows)
    assert rows[-2] == PhaseAggregate("decode", "steady", 3, "temp.cpu_c", "max", 56.0)


# --- net energy, J/token, slope ------------------------------------------------------------------------


def test_net_energy() -> None:
    assert net_energy_j(30.0, 2000.0, 5.0) == pytest.approx(20.0)
    # Idle measured higher than the phase: kept negative rather than clamped to 0.
    assert net_energy_j(5.0, 2000.0, 5.0) == pytest.approx(-5.0)
    assert net_energy_j(None, 2000.0, 5.0) is None
    assert net_energy_j(30.0, None, 5.0) is None
    assert net_energy_j(30.0, 2000.0, None) is None


def test_energy_per_token() -> None:
    assert energy_per_token(30.0, 120) == pytest.approx(0.25)
    assert energy_per_token(-6.0, 3) == pytest.approx(-2.0)
    assert energy_per_token(None, 120) is None
    assert energy_per_token(30.0, None) is None
    assert energy_per_token(30.0, 0) is None


def test_slope_per_s() -> None:
    assert slope_per_s([(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]) == pytest.approx(2.0)
    assert slope_per_s([(0.0, 0.0), (1.0, 1.0), (2.0, 0.0), (3.0, 1.0)]) == pytest.approx(0.2)
    big = 1e6
    assert slope_per_s([(big + t, 70.0 - 0.5 * t) for t in range(30)]) == pytest.approx(-0.5, rel=1e-9)
    assert slope_per_s([(1.0, 5.0)]) is None
    assert slope_per_s([(1.0, 5.0), (1.0, 6.0)]) is None
    assert slope_per_s([]) is None


# --- cooldown ------------------------------------------------------------------------------------------


class FakeTime:
    """A clock that only moves when ``sleep`` is called, and a temperature scripted as a function of it."""

    def __init__(self, temp: Callable[[float], float | None], start: float = 5000.0) -> None:
        self.start = start
        self.now = start
        self.temp = temp
        self.sleeps: list[float] = []
        self.reads = 0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds

    def read_temp(self) -> float | None:
        self.reads += 1
        return self.temp(self.now - self.start)

    def wait(self, **kwargs: float | None) -> CooldownResult:
        params: dict[str, float | None] = {
            "below_c": 50.0,
            "max_wait_s": 300.0,
            "slope_c_per_min": 0.5,
            "window_s": 30.0,
            "delay_s": 0.0,
            "poll_s": 1.0,
        }
        params.update(kwargs)
        return wait_for_cooldown(self.read_temp, self.clock, self.sleep, **params)  # type: ignore[arg-type]


def test_cooldown_already_cool() -> None:
    fake = FakeTime(lambda _t: 40.0)
    result = fake.wait()
    assert result == CooldownResult(40.0, 40.0, 0.0, "below_limit")
    assert fake.sleeps == []


def test_cooldown_exponential_crosses_limit() -> None:
    # T = 30 + 50·e^(−t/60) reaches 45 °C at t = 60·ln(50/15) ≈ 72.2 s: the first poll after is t = 73.
    fake = FakeTime(lambda t: 30.0 + 50.0 * math.exp(-t / 60.0))
    result = fake.wait(below_c=45.0)
    assert result.reason == "below_limit"
    assert result.waited_s == pytest.approx(73.0)
    assert result.start_temp_c == pytest.approx(80.0)
    assert result.end_temp_c is not None and result.end_temp_c < 45.0


def test_cooldown_plateau_above_limit_stops_after_window() -> None:
    fake = FakeTime(lambda _t: 70.0)
    result = fake.wait(below_c=50.0, window_s=30.0)
    assert result == CooldownResult(70.0, 70.0, pytest.approx(30.0), "stopped_falling")  # type: ignore[arg-type]


def test_cooldown_exponential_to_plateau_above_limit() -> None:
    # T = 60 + 20·e^(−t/10): the slope falls to 1 °C/min (−2·e^(−t/10) = −1/60) at t ≈ 47.9 s; a 30 s
    # least-squares window sees about its middle, so it stops roughly 15 s later.
    fake = FakeTime(lambda t: 60.0 + 20.0 * math.exp(-t / 10.0))
    result = fake.wait(below_c=50.0, slope_c_per_min=1.0, window_s=30.0)
    assert result.reason == "stopped_falling"
    assert 55.0 <= result.waited_s <= 70.0
    assert result.end_temp_c is not None and 60.0 < result.end_temp_c < 60.1


def test_cooldown_slow_steady_fall_hits_max_wait() -> None:
    fake = FakeTime(lambda t: 80.0 - 2.0 * t / 60.0)  # 2 °C/min, steeper than the 0.5 °C/min threshold
    result = fake.wait(below_c=40.0, max_wait_s=300.0, slope_c_per_min=0.5, window_s=30.0)
    assert result.reason == "max_wait"
    assert result.waited_s == pytest.approx(300.0)
    assert result.end_temp_c == pytest.approx(70.0)
    assert sum(fake.sleeps) == pytest.approx(300.0)


def test_cooldown_max_wait_not_a_multiple_of_poll() -> None:
    fake = FakeTime(lambda t: 80.0 - t)
    result = fake.wait(below_c=40.0, max_wait_s=2.5, poll_s=1.0)
    assert result.reason == "max_wait"
    assert result.waited_s == pytest.approx(2.5)
    assert fake.sleeps == pytest.approx([1.0, 1.0, 0.5])


def test_cooldown_no_sensor() -> None:
    fake = FakeTime(lambda _t: None)
    assert fake.wait() == CooldownResult(None, None, 0.0, "no_sensor")
    assert fake.sleeps == []
    fake = FakeTime(lambda _t: None)
    assert fake.wait(delay_s=20.0) == CooldownResult(None, None, 20.0, "no_sensor")
    assert fake.sleeps == [20.0]


def test_cooldown_sensor_lost_mid_wait() -> None:
    fake = FakeTime(lambda t: 80.0 - t if t < 5.0 else None)
    result = fake.wait(below_c=40.0, max_wait_s=20.0)
    assert result.reason == "max_wait"
    assert result.end_temp_c == pytest.approx(76.0)


def test_cooldown_delay_mode() -> None:
    fake = FakeTime(lambda _t: 65.0)
    result = fake.wait(below_c=None, delay_s=10.0)
    assert result == CooldownResult(65.0, 65.0, 10.0, "delay")
    assert fake.sleeps == [10.0]


def test_cooldown_disabled() -> None:
    fake = FakeTime(lambda _t: 65.0)
    result = fake.wait(below_c=None, delay_s=0.0)
    assert result == CooldownResult(65.0, 65.0, 0.0, "disabled")
    assert fake.sleeps == []


def test_cooldown_rejects_nonpositive_poll() -> None:
    fake = FakeTime(lambda _t: 65.0)
    with pytest.raises(ValueError):
        fake.wait(poll_s=0.0)
