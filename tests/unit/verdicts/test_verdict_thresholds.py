"""Every documented default of the verdicts pinned through what the verdict says: a case just inside each
threshold and one just outside it, judged with the default thresholds (never passed in), so that moving a
default fails the test named after its rule. The values and their reasons: docs/thresholds.md.

Synthetic series whose answer is known by construction (tests/support/throttle_runs.py), not captures."""

from __future__ import annotations

from typing import Any

import pytest
from support.roles import declared_roles
from support.throttle_runs import STEADY_TPS, TRIPS, cool_metrics, flat, inputs, reps_of, series

from edgeprof.verdicts.interference import Rep, interference_verdict
from edgeprof.verdicts.soak import judge_soak
from edgeprof.verdicts.soak_telemetry import WindowSpeed
from edgeprof.verdicts.stability import stability
from edgeprof.verdicts.throttle import ThrottleInputs, throttle_verdict

pytestmark = pytest.mark.timeout(60)


# -- throttle: clock drop 0.85 of the reference, near-trip within 5 °C, drift beyond 5 % --------------------
def _heating_with_clock_at(clock_mhz: float) -> dict[str, list[Any]]:
    """A CPU heating 30 °C/min whose 2000-MHz clock is at ``clock_mhz`` from t = 30 s on."""
    metrics = cool_metrics()
    metrics["temp.cpu_c"] = series(lambda t: 50.0 + 0.5 * t)
    metrics["cpufreq.policy0.cur_mhz"] = series(lambda t: 2000.0 if t < 30 else clock_mhz)
    return metrics


@pytest.mark.parametrize(
    ("fraction", "value"),
    [(0.849, "throttled"), (0.85, "not_throttled"), (0.851, "not_throttled")],
)
def test_throttle_clock_drop_counts_below_85_percent_of_the_reference(fraction: float, value: str) -> None:
    result = throttle_verdict(inputs(STEADY_TPS, _heating_with_clock_at(2000.0 * fraction)))
    assert result.value == value, result.evidence["reasons"]


def _flat_at(temp_c: float) -> dict[str, list[Any]]:
    """A board flat at ``temp_c`` (passive trip at 85 °C) whose clock sits at 70 % of its maximum."""
    metrics = cool_metrics()
    metrics["temp.cpu_c"] = series(flat(temp_c))
    metrics["cpufreq.policy0.cur_mhz"] = series(lambda t: 2000.0 if t < 30 else 1400.0)
    return metrics


@pytest.mark.parametrize(
    ("temp_c", "value"),
    [(80.1, "throttled"), (80.0, "throttled"), (79.9, "not_throttled")],
)
def test_throttle_near_trip_is_within_5_c_of_the_passive_trip(temp_c: float, value: str) -> None:
    # A clock drop counts as throttling only with heat: near the 85 °C trip (>= 80 °C) it is throttled,
    # 0.1 °C further away the same drop is a governor's or a power cap's (not_throttled, with a note).
    result = throttle_verdict(inputs(STEADY_TPS, _flat_at(temp_c)))
    assert result.value == value, result.evidence["reasons"]


@pytest.mark.parametrize(
    ("last_tps", "value"),
    [(94.9, "slowdown_not_thermal"), (95.1, "not_throttled")],
)
def test_throttle_drift_is_a_last_third_more_than_5_percent_below_the_first(
    last_tps: float, value: str
) -> None:
    tps = [100.0, 100.0, 100.0, 100.0, last_tps, last_tps]  # first third 100, last third last_tps
    result = throttle_verdict(inputs(tps, cool_metrics()))
    assert result.value == value, result.evidence["reasons"]


def _warming(c_per_min: float, rep_s: float) -> ThrottleInputs:
    """Six steady reps of ``rep_s``; a CPU warming at ``c_per_min`` from 50 °C whose 2000-MHz clock is at
    1400 MHz from half-way on: throttled exactly when the warming counts as rising."""
    reps = reps_of(STEADY_TPS, rep_s)
    end = 6 * rep_s
    metrics = {
        "temp.cpu_c": series(lambda t: 50.0 + c_per_min * t / 60.0, t_end=end),
        "cpufreq.policy0.cur_mhz": series(lambda t: 2000.0 if t < end / 2 else 1400.0, t_end=end),
        "cpufreq.policy0.max_mhz": series(flat(2000.0), t_end=end),
        "cpufreq.policy0.hw_max_mhz": series(flat(2000.0), t_end=end),
    }
    return ThrottleInputs(reps=reps, series=metrics, load_start=0.0, load_end=reps[-1].t_end,
                          trip_points=TRIPS, roles=declared_roles(metrics))  # fmt: skip


@pytest.mark.parametrize(("c_per_min", "value"), [(0.55, "throttled"), (0.45, "not_throttled")])
def test_throttle_rising_is_a_slope_above_half_a_degree_per_minute(c_per_min: float, value: str) -> None:
    # three minutes of load: 1.65 and 1.35 °C of rise, both past the 1 °C minimum; the slope decides
    assert throttle_verdict(_warming(c_per_min, rep_s=30.0)).value == value


@pytest.mark.parametrize(("c_per_min", "value"), [(1.05, "throttled"), (0.95, "not_throttled")])
def test_throttle_rising_needs_a_fitted_rise_of_1_c(c_per_min: float, value: str) -> None:
    # 59 s of readings: 1.03 and 0.93 °C of fitted rise, both slopes past 0.5 °C/min; the rise decides
    assert throttle_verdict(_warming(c_per_min, rep_s=10.0)).value == value


@pytest.mark.parametrize(
    ("tps", "value"),
    [
        ([99.0, 100.0, 91.0, 98.0, 90.0, 97.0], "throttled"),  # Spearman(tg_tps, temperature) -0.66
        ([99.0, 97.0, 98.0, 100.0, 90.0, 91.0], "inconclusive"),  # -0.54
    ],
)
def test_throttle_speed_tracking_heat_without_clocks_needs_spearman_at_most_minus_0_6(
    tps: list[float], value: str
) -> None:
    # no clock measured, the board heating 30 °C/min, the last third 8 % below the first: throttling is
    # claimed only when the speed falls as the temperature rises
    metrics: dict[str, list[Any]] = {"temp.cpu_c": series(lambda t: 50.0 + 0.5 * t)}
    result = throttle_verdict(inputs(tps, metrics))
    assert result.value == value, result.evidence["reasons"]


# -- interference: other processes above 0.25 core, steal above 5 %, one runnable task too many -----------
def _counters(other_cores: float = 0.0, steal: float = 0.0, runq: float = 2.0) -> dict[str, list[Any]]:
    """proc_stat's counters on a 2-CPU machine read once a second for 10 s: a one-thread child at one core,
    edgeprof at 0.01, ``other_cores`` of other work, ``steal`` of the machine's time stolen."""
    out: dict[str, list[Any]] = {
        k: []
        for k in ("host.cpu_busy_s", "host.cpu_total_s", "host.cpu_steal_s", "host.procs_running",
                  "proc.cpu_s", "self.cpu_s")
    }
    for i in range(11):
        t = float(i)
        out["host.cpu_total_s"].append((t, 2.0 * t))
        out["host.cpu_steal_s"].append((t, steal * 2.0 * t))
        out["host.cpu_busy_s"].append((t, (1.0 + other_cores + 0.01) * t))
        out["proc.cpu_s"].append((t, 1.0 * t))
        out["self.cpu_s"].append((t, 0.01 * t))
        out["host.procs_running"].append((t, runq))
    return out


def _interference(counters: dict[str, list[Any]]) -> str:
    value, _ = interference_verdict([Rep(0, 0.0, 10.0)], counters, declared_roles(counters), 1)
    return value


@pytest.mark.parametrize(("other_cores", "value"), [(0.24, "quiet"), (0.26, "contended")])
def test_interference_other_processes_above_a_quarter_core_contend(other_cores: float, value: str) -> None:
    assert _interference(_counters(other_cores=other_cores)) == value


@pytest.mark.parametrize(("steal", "value"), [(0.049, "quiet"), (0.051, "contended")])
def test_interference_hypervisor_steal_above_5_percent_contends(steal: float, value: str) -> None:
    assert _interference(_counters(steal=steal)) == value


@pytest.mark.parametrize(("runq", "value"), [(2.9, "quiet"), (3.0, "contended")])
def test_interference_one_runnable_task_beyond_the_benchmark_contends(runq: float, value: str) -> None:
    # the one-thread child and the sampler are the benchmark's own two; a third waits for a CPU
    assert _interference(_counters(runq=runq)) == value


# -- soak: held at 97 % of burst; steady under 0.5 °C/min over the trailing 120 s -------------------------
def _soak(
    sustained_tps: float = 100.0, slope_c_per_min: float = 0.0, n: int = 12, window_s: float = 10.0
) -> str:
    """``n`` windows of ``window_s``: the first two thirds at 100 t/s, the last third at ``sustained_tps``;
    one thermometer read every second from 60 °C at ``slope_c_per_min``."""
    speeds = [
        WindowSpeed(i, i * window_s, (i + 1) * window_s, 100, 1.0,
                    sustained_tps if i >= n - n // 3 else 100.0, None)
        for i in range(n)
    ]
    end = n * window_s
    temps = [(t, 60.0 + slope_c_per_min * t / 60.0) for t in (i * 1.0 for i in range(int(end) + 1))]
    metrics = {"temp.cpu_c": temps}
    return judge_soak(speeds, metrics, declared_roles(metrics)).value


@pytest.mark.parametrize(("sustained", "value"), [(97.1, "not_throttled"), (96.9, "slowdown_not_thermal")])
def test_soak_holds_at_97_percent_of_burst(sustained: float, value: str) -> None:
    assert _soak(sustained_tps=sustained) == value


@pytest.mark.parametrize(("slope", "value"), [(0.45, "not_throttled"), (0.55, "not_steady")])
def test_soak_steady_state_is_a_slope_under_half_a_degree_per_minute(slope: float, value: str) -> None:
    assert _soak(slope_c_per_min=slope) == value


@pytest.mark.parametrize(("window_s", "value"), [(10.1, "not_throttled"), (9.9, "not_steady")])
def test_soak_steady_state_is_judged_over_the_trailing_120_s(window_s: float, value: str) -> None:
    # 12 windows end at 121.2 s (one whole span in: flat, so steady) or at 118.8 s (no span yet)
    assert _soak(window_s=window_s) == value


@pytest.mark.parametrize(("rise_c", "value"), [(2.1, "throttled"), (1.9, "slowdown_not_thermal")])
def test_soak_a_speed_drop_is_throttling_once_the_board_heated_2_c(rise_c: float, value: str) -> None:
    # the last third 10 % below burst (beyond the 5 % noise), no clock measured; the zone steps up by
    # ``rise_c`` at 75 s: heat only from 2 °C on
    speeds = [WindowSpeed(i, i * 10.0, (i + 1) * 10.0, 100, 1.0, 90.0 if i >= 8 else 100.0, None)
              for i in range(12)]  # fmt: skip
    metrics = {"temp.cpu_c": [(float(t), 60.0 + (rise_c if t >= 75 else 0.0)) for t in range(121)]}
    result = judge_soak(speeds, metrics, declared_roles(metrics))
    assert result.value == value, result.evidence["reasons"]


# -- stability: coefficient of variation above 10 %, one rep beyond 1.25x the median ----------------------
def _with_cv(cv: float) -> list[float]:
    """Four values of mean 100 and sample stdev ``100 · cv``: 100 ± d, d = cv · 100 · sqrt(3 / 4)."""
    d = cv * 100.0 * (3.0 / 4.0) ** 0.5
    return [100.0 - d, 100.0 - d, 100.0 + d, 100.0 + d]


@pytest.mark.parametrize(("cv", "value"), [(0.099, "stable"), (0.101, "unstable")])
def test_stability_cv_above_10_percent_is_unstable(cv: float, value: str) -> None:
    result = stability(_with_cv(cv))
    assert result.value == value, result.evidence


@pytest.mark.parametrize(("top", "value"), [(124.9, "stable"), (125.1, "unstable")])
def test_stability_a_rep_beyond_1_25_times_the_median_is_unstable(top: float, value: str) -> None:
    # median 100; the outlier alone keeps the CV under 10 % (9.7 % at 125.1)
    result = stability([100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, top])
    assert result.value == value, result.evidence
