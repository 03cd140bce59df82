"""The throttle verdict (agent/verdicts/throttle.py) on synthetic series whose answers are known: hardware
flags, clock drops under heat, tokens/s drift, and the boundaries of each rule."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from support.throttle_runs import FALLING_TPS, STEADY_TPS, cool_metrics, flat, inputs, ramping, series

from edgeprof.verdicts import ThrottleInputs, ThrottleThresholds, throttle_verdict


def test_clean_run_is_not_throttled() -> None:
    result = throttle_verdict(inputs(STEADY_TPS, cool_metrics()))
    assert result.value == "not_throttled", result.evidence["reasons"]
    ev = result.evidence
    assert ev["clocks"]["status"] == "steady"
    assert ev["temperature"]["status"] == "flat"
    assert ev["drift"]["status"] == "steady"
    assert ev["hardware"]["flags"] == []
    assert ev["signals"] == []
    json.dumps(ev, allow_nan=False)  # storable as evidence_json


def test_rising_temperature_clock_drop_and_falling_tps_is_throttled_with_all_three_evidences() -> None:
    metrics = cool_metrics()
    metrics["temp.cpu_c"] = series(lambda t: 50.0 + 0.5 * t)  # 30 °C/min up to 79.5 °C
    metrics["cpufreq.policy0.cur_mhz"] = series(lambda t: 2000.0 if t < 30 else 1400.0)
    result = throttle_verdict(inputs(FALLING_TPS, metrics))
    assert result.value == "throttled"
    ev = result.evidence
    assert set(ev["signals"]) >= {"clock", "temperature", "drift"}
    cpu = ev["clocks"]["domains"]["cpu"]
    assert cpu["status"] == "dropped" and cpu["fraction"] == pytest.approx(0.7)
    assert cpu["reference_mhz"] == 2000.0 and cpu["first_below_t"] == 30.0
    zone = ev["temperature"]["zones"]["temp.cpu_c"]
    assert zone["rising"] and zone["slope_c_per_min"] == pytest.approx(30.0)
    assert zone["trip"] == {"type": "passive", "c": 85.0} and not zone["near_trip"]
    assert ev["drift"]["status"] == "falling"
    assert ev["drift"]["drop_fraction"] == pytest.approx(1 - 84.5 / 99.5, abs=1e-4)
    assert ev["drift"]["spearman_tps_vs_temp"] == pytest.approx(-1.0)
    assert any("cpu clock 1400 MHz" in r for r in ev["reasons"])


def test_falling_tps_with_flat_temperatures_and_steady_clocks_is_not_thermal() -> None:
    result = throttle_verdict(inputs(FALLING_TPS, cool_metrics()))
    assert result.value == "slowdown_not_thermal"
    assert result.evidence["drift"]["status"] == "falling"
    assert result.evidence["temperature"]["status"] == "flat"
    assert result.evidence["clocks"]["status"] == "steady"


def test_too_few_samples_or_reps_is_inconclusive() -> None:
    few = {
        "temp.cpu_c": [(0.0, 50.0), (5.0, 50.0), (10.0, 50.0)],
        "cpufreq.policy0.cur_mhz": [(0.0, 2000.0), (5.0, 2000.0), (10.0, 2000.0)],
    }
    result = throttle_verdict(inputs([100.0, 100.0], few))
    assert result.value == "inconclusive"
    assert result.evidence["samples_under_load"] == 3
    assert any("need 3" in r for r in result.evidence["reasons"])
    assert any("need 5" in r for r in result.evidence["reasons"])
    # Plenty of reps but no telemetry at all: still inconclusive, never "fine".
    assert throttle_verdict(inputs(STEADY_TPS, {})).value == "inconclusive"
    # Nothing to place the run in time.
    assert throttle_verdict(ThrottleInputs()).value == "inconclusive"


def test_nvml_thermal_reason_alone_is_throttled() -> None:
    metrics = cool_metrics()
    # GpuIdle (0x1) then SwThermalSlowdown (0x20) for a few readings under load
    metrics["gpu0.clock_event_reasons"] = series(lambda t: 0x20 if 5 <= t <= 8 else 0x1)
    result = throttle_verdict(inputs([100.0, 100.0], metrics, gpu=True))  # even with too few reps
    assert result.value == "throttled"
    assert result.evidence["signals"] == ["hardware"]
    detail = result.evidence["hardware"]["detail"]["gpu0.clock_event_reasons"]
    assert detail["throttle_reasons"] == ["SwThermalSlowdown"]
    assert "GpuIdle" in detail["reasons_seen"]
    # The same flag on a GPU the run did not use (ngl=0) says nothing about the run.
    ignored = throttle_verdict(inputs(STEADY_TPS, metrics, gpu=False))
    assert ignored.value == "not_throttled"
    assert "ignored" in ignored.evidence["hardware"]["detail"]["gpu0.clock_event_reasons"]
    # Idle and application-clock reasons are normal operation.
    metrics["gpu0.clock_event_reasons"] = series(flat(0x1 | 0x2))
    metrics["gpu.freq_mhz"] = series(flat(1300.0))
    assert throttle_verdict(inputs(STEADY_TPS, metrics, gpu=True)).value == "not_throttled"


def test_x86_throttle_counter_delta_alone_is_throttled() -> None:
    metrics = cool_metrics()
    metrics["throttle.package0.count"] = series(lambda t: 10.0 if t < 40 else 14.0)
    metrics["throttle.cpu0.core_count"] = series(flat(3.0))
    result = throttle_verdict(inputs(STEADY_TPS, metrics))
    assert result.value == "throttled"
    assert result.evidence["hardware"]["detail"]["throttle.package0.count"]["delta"] == 4.0
    assert result.evidence["hardware"]["detail"]["throttle.cpu0.core_count"]["delta"] == 0.0
    assert result.evidence["hardware"]["flags"] == ["throttle.package0.count: +4 throttle events during load"]


def test_clock_drop_without_heat_is_a_note_or_a_non_thermal_slowdown() -> None:
    metrics = cool_metrics()
    metrics["cpufreq.policy0.cur_mhz"] = series(lambda t: 2000.0 if t < 30 else 1200.0)
    quiet = throttle_verdict(inputs(STEADY_TPS, metrics))
    assert quiet.value == "not_throttled"
    assert quiet.evidence["clocks"]["status"] == "dropped"
    assert any("without heat" in n for n in quiet.evidence["notes"])
    slowed = throttle_verdict(inputs(FALLING_TPS, metrics))
    assert slowed.value == "slowdown_not_thermal"
    assert any("power cap or governor" in r for r in slowed.evidence["reasons"])


def test_near_trip_without_throttling_is_noted() -> None:
    metrics = cool_metrics()
    metrics["temp.cpu_c"] = series(flat(82.0))
    result = throttle_verdict(inputs(STEADY_TPS, metrics))
    assert result.value == "not_throttled"
    assert result.evidence["temperature"]["status"] == "near_trip"
    assert result.evidence["temperature"]["zones"]["temp.cpu_c"]["margin_c"] == 3.0
    assert any("close to a trip point" in n for n in result.evidence["notes"])
    # Without trip points the same flat 82 °C is just flat.
    assert throttle_verdict(inputs(STEADY_TPS, metrics, trips={})).evidence["temperature"]["status"] == "flat"


def test_hot_and_slow_from_the_start_is_caught_by_the_sweep_reference() -> None:
    metrics = cool_metrics()
    metrics["temp.cpu_c"] = series(lambda t: 70.0 + 0.2 * t)
    metrics["cpufreq.policy0.cur_mhz"] = series(flat(1500.0))
    # Compared with itself the clock never moved ...
    assert throttle_verdict(inputs(STEADY_TPS, metrics)).evidence["clocks"]["status"] == "steady"
    # ... but an earlier, cooler run of the same shape reached 2000 MHz.
    result = throttle_verdict(inputs(STEADY_TPS, metrics, max_freq={"cpu": 2000.0}))
    assert result.value == "throttled"
    assert result.evidence["clocks"]["domains"]["cpu"]["reference_source"] == "comparable runs of the sweep"


def test_lowered_cpufreq_cap_counts_as_a_clock_drop() -> None:
    metrics = cool_metrics()
    metrics["temp.cpu_c"] = series(lambda t: 60.0 + 0.4 * t)
    metrics["cpufreq.policy0.max_mhz"] = series(lambda t: 2000.0 if t < 45 else 1200.0)
    result = throttle_verdict(inputs(STEADY_TPS, metrics))
    assert result.value == "throttled"
    cap = result.evidence["clocks"]["domains"]["cpu_cap.policy0"]
    assert cap["status"] == "dropped" and cap["observed_mhz"] == 1200.0


def test_an_idle_cluster_at_a_low_clock_is_not_a_drop() -> None:
    metrics = cool_metrics()
    metrics["temp.cpu_c"] = series(lambda t: 50.0 + 0.5 * t)  # heating, as any loaded board does
    metrics["cpufreq.policy0.cur_mhz"] = series(ramping(2000.0))  # a real clock: the governor ramps up
    metrics["cpufreq.policy4.cur_mhz"] = series(ramping(600.0))  # the other cluster, idle all along
    result = throttle_verdict(inputs(STEADY_TPS, metrics))
    assert result.value == "not_throttled"
    assert result.evidence["clocks"]["domains"]["cpu"]["observed_mhz"] == 2000.0


def test_a_dgpu_run_is_judged_on_the_gpu_sensor_and_sm_clock() -> None:
    metrics = {
        "gpu0.temp_c": series(lambda t: 60.0 + 0.3 * t),  # NVML's own sensor, no thermal zone
        "gpu0.sm_clock_mhz": series(lambda t: 1800.0 if t < 30 else 1300.0),
        "cpufreq.policy0.cur_mhz": series(ramping(3000.0)),
    }
    result = throttle_verdict(inputs(STEADY_TPS, metrics, gpu=True))
    assert result.value == "throttled"
    assert result.evidence["clocks"]["domains"]["gpu"]["status"] == "dropped"
    assert result.evidence["clocks"]["domains"]["cpu"]["status"] == "steady"
    assert result.evidence["temperature"]["zones"]["gpu0.temp_c"]["rising"]
    # A CPU-only run (ngl=0) on the same box: the GPU's sensor and clock say nothing about it.
    cpu_only = throttle_verdict(inputs(STEADY_TPS, metrics, gpu=False))
    assert cpu_only.value == "not_throttled"
    assert "gpu" not in cpu_only.evidence["clocks"]["domains"]
    assert cpu_only.evidence["temperature"]["status"] == "unknown"
    assert any("no temperature sensor" in n for n in cpu_only.evidence["notes"])


def test_heat_with_unmeasured_clocks_needs_tps_to_track_temperature() -> None:
    hot = {"temp.cpu_c": series(lambda t: 50.0 + 0.5 * t)}
    result = throttle_verdict(inputs(FALLING_TPS, hot))
    assert result.value == "throttled"
    assert result.evidence["clocks"]["status"] == "unknown"
    assert set(result.evidence["signals"]) == {"drift", "temperature"}
    # Falling speed but no temperature sensor: nothing to attribute it to.
    no_temp = {"cpufreq.policy0.cur_mhz": series(flat(2000.0))}
    assert throttle_verdict(inputs(FALLING_TPS, no_temp)).value == "inconclusive"


def test_thresholds_are_honoured() -> None:
    metrics = cool_metrics()
    metrics["temp.cpu_c"] = series(lambda t: 50.0 + 0.5 * t)
    metrics["cpufreq.policy0.cur_mhz"] = series(lambda t: 2000.0 if t < 30 else 1800.0)  # 0.9
    assert throttle_verdict(inputs(STEADY_TPS, metrics)).value == "not_throttled"
    strict = ThrottleThresholds(clock_drop_fraction=0.95)
    assert throttle_verdict(inputs(STEADY_TPS, metrics), strict).value == "throttled"


def test_the_clock_reference_is_at_least_what_the_run_itself_reached() -> None:
    # The sweep's reference (1500 MHz) is below what this run's own clock reached before it fell (2000 ->
    # 1400 MHz while heating): measured against 1500 the fall would look like 93 %, against 2000 it is 70 %.
    metrics = cool_metrics()
    metrics["temp.cpu_c"] = series(lambda t: 50.0 + 0.5 * t)
    metrics["cpufreq.policy0.cur_mhz"] = series(lambda t: 2000.0 if t < 30 else 1400.0)
    result = throttle_verdict(inputs(STEADY_TPS, metrics, max_freq={"cpu": 1500.0}))
    cpu = result.evidence["clocks"]["domains"]["cpu"]
    assert cpu["reference_mhz"] == 2000.0 and cpu["reference_source"] == "comparable runs of the sweep"
    assert cpu["status"] == "dropped" and cpu["fraction"] == pytest.approx(0.7)
    assert result.value == "throttled"


def test_a_drop_of_exactly_the_drift_threshold_is_not_a_drift() -> None:
    # First third 100 t/s, last third 75 t/s: a drop of exactly 0.25, the limit given here (exact in binary
    # floating point, unlike the default 5 %). "More than" the limit is a drift; the limit itself is not.
    th = ThrottleThresholds(tps_drop_fraction=0.25)
    at_limit = throttle_verdict(inputs([100.0, 100.0, 100.0, 100.0, 75.0, 75.0], cool_metrics()), th)
    assert at_limit.evidence["drift"]["drop_fraction"] == 0.25
    assert at_limit.evidence["drift"]["status"] == "steady"
    assert at_limit.value == "not_throttled"
    beyond = throttle_verdict(inputs([100.0, 100.0, 100.0, 100.0, 74.9, 74.9], cool_metrics()), th)
    assert beyond.evidence["drift"]["status"] == "falling"
    assert beyond.value == "slowdown_not_thermal"


def test_a_metric_without_a_role_is_no_evidence() -> None:
    # The same hot, throttled series, but nothing says what its metrics are: nothing to judge them by.
    metrics = cool_metrics()
    metrics["temp.cpu_c"] = series(lambda t: 50.0 + 0.5 * t)
    metrics["cpufreq.policy0.cur_mhz"] = series(lambda t: 2000.0 if t < 30 else 1400.0)
    judged = inputs(FALLING_TPS, metrics)
    assert throttle_verdict(judged).value == "throttled"
    unknown = throttle_verdict(replace(judged, roles={}))
    assert unknown.evidence["clocks"]["status"] == "unknown"
    assert unknown.evidence["temperature"]["status"] == "unknown"
    assert unknown.value == "inconclusive"
