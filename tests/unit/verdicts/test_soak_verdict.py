"""Soak verdict (agent/verdicts/soak.py, soak_telemetry.py) on a SIMULATED device: synthetic series from a
first-order heating model with a cpufreq cap that drops at a trip point (tests/support/heating.py), whose
answer is known by construction. Not captures."""

from __future__ import annotations

import json
import math

import pytest
from support.heating import Device, Soak, simulate
from support.roles import declared_roles

from edgeprof.verdicts import SoakJudgement, SoakThresholds, judge_soak, soak_windows

TH = SoakThresholds()
# The cooled board (33 °C) heats towards 81 °C with tau = 60 s; the trip at 70 °C is reached after
# 60 s · ln(48 / 11) = 88 s, in window 8 of 10 s; the cap then takes 1510 -> 1190 MHz and the speed with it.
HOT = Device(trip_c=70.0)


def _judge(dev: Device, drop: str | None = None) -> tuple[Soak, SoakJudgement]:
    """The simulated soak and its judgement, leaving out the metrics whose names start with ``drop``."""
    soak = simulate(dev)
    series = soak.without(drop) if drop else soak.series
    return soak, judge_soak(soak.speeds, series, declared_roles(series))


def test_throttled_at_the_window_the_cap_dropped_with_the_injected_slowdown() -> None:
    soak, j = _judge(HOT)
    assert j.value == "throttled", j.evidence["reasons"]
    expected = soak.trip_window()
    assert expected == int(HOT.tau_s * math.log(48.0 / 11.0) // HOT.window_s) == 8
    assert j.first_throttle_window is not None and abs(j.first_throttle_window - expected) <= 1
    assert soak.trip_t is not None and j.first_throttle_s == pytest.approx(soak.trip_t, abs=HOT.window_s)
    assert j.first_throttle_what == "cpu clock cap 1510 -> 1190 MHz"
    assert j.burst_tps == pytest.approx(HOT.tps, rel=0.01)
    assert j.sustained_tps == pytest.approx(HOT.tps * HOT.capped_mhz / HOT.max_mhz, rel=0.01)
    assert j.sustained_ratio == pytest.approx(HOT.capped_mhz / HOT.max_mhz, rel=0.01)
    assert j.stability_ratio is not None and j.stability_ratio < 0.8
    assert j.evidence["first_throttle"] == {"s": 89.5, "window": 8, "what": j.first_throttle_what}
    assert json.loads(json.dumps(j.evidence)) == j.evidence  # stored as JSON like every verdict's evidence
    assert "after 90 s (window 8)" in j.evidence["reasons"][0]
    assert "78.8 % of burst" in j.evidence["reasons"][0]
    window = j.windows[expected]
    assert window.throttle_signals == ["cpu cap 1510->1190 MHz"] and window.cpu_cap_mhz is not None
    assert all(not w.throttle_signals for w in j.windows[:expected])


def test_a_speed_drop_while_heating_is_throttling_where_no_clock_was_read() -> None:
    # The same board without its cpufreq readings: no cap to see drop, only the speed falling as it heats.
    soak, j = _judge(HOT, drop="cpufreq.")
    assert j.value == "throttled", j.evidence["reasons"]
    expected = soak.trip_window()
    assert j.first_throttle_window is not None and expected is not None
    assert abs(j.first_throttle_window - expected) <= 1
    # the cap takes 21 % off (1190 / 1510), and the window's own flicker another half percent
    w = j.windows[j.first_throttle_window]
    assert w.tg_tps is not None and w.temp_max_c is not None and j.burst_tps is not None
    assert 1.0 - w.tg_tps / j.burst_tps == pytest.approx(1.0 - HOT.capped_mhz / HOT.max_mhz, abs=0.01)
    assert (
        j.first_throttle_what == f"speed -{100 * (1 - w.tg_tps / j.burst_tps):.0f} % at {w.temp_max_c:.1f} °C"
    )
    assert HOT.trip_c is not None and w.temp_max_c >= HOT.trip_c - 1.0


def test_steady_state_is_found_when_the_model_settles() -> None:
    dev = Device()
    _, j = _judge(dev)
    # The model's own slope falls under 0.5 °C/min at tau · ln(48 °C / 0.5 °C) = 274 s; a slope fitted over
    # the trailing 120 s lags it by up to the span (and a window).
    settles = dev.tau_s * math.log((dev.equilibrium_c() - dev.cooled_c()) / TH.steady_c_per_min)
    assert j.steady_state_s is not None
    assert settles <= j.steady_state_s <= settles + TH.steady_span_s + dev.window_s
    assert j.steady_temp_c == pytest.approx(dev.equilibrium_c(), abs=0.5)
    assert j.end_slope_c_per_min is not None and abs(j.end_slope_c_per_min) < TH.steady_c_per_min
    # after a cap drop the board settles again, lower (cap 1190 MHz: 70.8 °C)
    _, hot = _judge(HOT)
    assert hot.steady_temp_c == pytest.approx(HOT.equilibrium_c(HOT.capped_mhz), abs=0.5)


def test_not_throttled_without_the_slowdown_and_with_settled_temperature() -> None:
    dev = Device(trip_c=90.0)  # a trip point above where the board settles (81 °C): never reached
    soak, j = _judge(dev)
    assert soak.trip_t is None
    assert j.value == "not_throttled", j.evidence["reasons"]
    assert j.first_throttle_s is None and j.first_throttle_what is None
    assert j.sustained_ratio is not None and j.sustained_ratio >= TH.hold_fraction
    assert j.stability_ratio == pytest.approx(1.0, abs=0.011)  # the model's +-0.5 % flicker
    assert "held 100.0 % of burst" in j.evidence["reasons"][0]
    assert "steady at 81.0 °C" in j.evidence["reasons"][0]


def test_a_cpu_hog_halfway_without_heat_is_a_slowdown_not_thermal_naming_contention() -> None:
    settled = Device().equilibrium_c()
    dev = Device(start_c=settled, hog_from_s=300.0)  # a board already at steady state; the hog heats nothing
    _, j = _judge(dev)
    assert j.value == "slowdown_not_thermal", j.evidence["reasons"]
    assert j.sustained_ratio == pytest.approx(1.0 - dev.hog_slowdown, rel=0.01)
    assert j.evidence["cause"] == "contention" and j.evidence["clocks"] == "held"
    assert any("contention: other processes used 1.00 cores" in r for r in j.evidence["reasons"])
    assert any("temperatures flat" in r for r in j.evidence["reasons"])
    assert j.windows[45].other_cores == pytest.approx(1.0, abs=0.01)
    assert j.windows[10].other_cores == pytest.approx(0.0, abs=0.01)
    # each window's own CPU time: the hog shows from the window it started in (300 s: window 30) on
    assert j.windows[29].other_cores == pytest.approx(0.0, abs=0.01)
    assert j.windows[30].other_cores is not None and j.windows[30].other_cores > 0.8
    # the same slowdown with nobody else on the CPU: not thermal, and not contention either
    _, alone = _judge(Device(start_c=settled, hog_from_s=300.0, hog_cores=0.0))
    assert alone.value == "slowdown_not_thermal" and alone.evidence["cause"] == "other"
    # a hog that heats the board: the temperature rises but the clocks held, so still not thermal
    _, warm = _judge(Device(start_c=settled, hog_from_s=300.0, hog_w=3.0))
    assert warm.value == "slowdown_not_thermal", warm.evidence["reasons"]
    assert any("every measured clock held" in r for r in warm.evidence["reasons"])


def test_no_temperature_metrics_say_the_temperature_is_not_measured() -> None:
    _, j = _judge(Device(), drop="temp.")
    assert j.value == "not_steady", j.evidence["reasons"]
    assert "temperature not measured" in j.evidence["reasons"][0]
    assert j.steady_state_s is None and j.steady_temp_c is None and j.end_slope_c_per_min is None
    assert all(w.temp_max_c is None and w.temps_c == {} for w in j.windows)
    assert j.evidence["thermal"] == {"measured": False}
    # a slowdown with other processes on the CPU is still contention; without them nothing can be said
    settled = Device().equilibrium_c()
    _, hog = _judge(Device(start_c=settled, hog_from_s=300.0), drop="temp.")
    assert hog.value == "slowdown_not_thermal" and "temperature not measured" in hog.evidence["reasons"]
    _, alone = _judge(Device(start_c=settled, hog_from_s=300.0, hog_cores=0.0), drop="temp.")
    assert alone.value == "inconclusive"
    assert any("neither shown nor ruled out" in r for r in alone.evidence["reasons"])


def test_still_rising_at_the_end_is_not_steady_with_the_slope() -> None:
    dev = Device(tau_s=600.0, duration_s=300.0)  # a slow heatsink: 5 minutes are half of tau
    _, j = _judge(dev)
    assert j.value == "not_steady", j.evidence["reasons"]
    assert j.steady_state_s is None and j.end_slope_c_per_min is not None
    # the slope fitted over the last 120 s lies between the model's own at its two ends
    assert dev.slope_c_per_min_at(300.0) <= j.end_slope_c_per_min <= dev.slope_c_per_min_at(180.0)
    assert f"run longer; still +{j.end_slope_c_per_min:.1f} °C/min" in j.evidence["reasons"][0]
    # a soak shorter than the span is not steady either, whatever its slope
    _, short = _judge(Device(duration_s=100.0, start_c=Device().equilibrium_c()))
    assert short.value == "not_steady" and "shorter than the 120-s span" in short.evidence["reasons"][0]


def test_too_few_windows_are_inconclusive_with_the_reason() -> None:
    _, two = _judge(Device(duration_s=20.0))
    assert two.value == "inconclusive" and two.burst_tps is None
    assert "2 window(s) with a decode speed; need 3 for a burst speed" in two.evidence["reasons"][0]
    _, five = _judge(Device(duration_s=50.0, trip_c=35.0))  # even a cap that dropped
    assert five.value == "inconclusive" and five.burst_tps is not None and five.sustained_tps is None
    assert "need 6" in five.evidence["reasons"][0]


def test_an_nvml_heat_flag_is_throttling_only_with_the_gpu_in_use() -> None:
    soak = simulate(Device(trip_c=90.0))
    # HwThermalSlowdown (0x40) with GpuIdle (0x1) from 200 s on, GpuIdle alone before
    soak.series["gpu0.clock_event_reasons"] = [
        (t, 0x41 if t >= Device().t0 + 200.0 else 0x1) for t, _ in soak.series["temp.zone0_c"]
    ]
    roles = declared_roles(soak.series)
    j = judge_soak(soak.speeds, soak.series, roles)
    assert j.value == "throttled" and j.first_throttle_what == "HwThermalSlowdown flag"
    assert j.first_throttle_window == 20 and j.first_throttle_s == pytest.approx(200.5)
    assert j.windows[20].throttle_signals == ["HwThermalSlowdown"]
    assert judge_soak(soak.speeds, soak.series, roles, gpu_in_use=False).value == "not_throttled"


def test_each_window_carries_its_temperature_clocks_energy_and_interference() -> None:
    soak = simulate(HOT)
    soak.series["power.vdd_in_mw"] = [(t, 5000.0) for t, _ in soak.series["temp.zone0_c"]]
    windows = soak_windows(soak.speeds, soak.series, declared_roles(soak.series))
    assert [w.index for w in windows] == list(range(60))
    first, last = windows[0], windows[-1]
    assert first.temps_c == {"temp.zone0_c": first.temp_max_c} and first.temp_max_c is not None
    assert first.temp_max_c < last.temp_max_c
    assert (first.cpu_mhz, first.cpu_cap_mhz, last.cpu_mhz, last.cpu_cap_mhz) == (
        1509.5,  # the median of a clock read with a 1-MHz jitter
        1510.0,
        1189.5,
        1190.0,
    )
    assert first.gpu_mhz is None and first.emc_mhz is None
    assert first.power_mw == pytest.approx(5000.0) and first.energy_j == pytest.approx(50.0)
    assert first.j_per_token == pytest.approx(50.0 / first.tokens)
    assert first.pp_tps == 50.0 and windows[1].pp_tps is None
    assert first.other_cores == pytest.approx(0.0, abs=0.01)


def test_an_x86_thermal_throttle_counter_that_went_up_is_throttling() -> None:
    soak = simulate(Device(trip_c=90.0))
    start = Device().t0
    # the package's thermal_throttle count: 7 before the soak's 300th second, 10 after
    soak.series["throttle.cpu0.core_count"] = [
        (t, 7.0 if t < start + 300.0 else 10.0) for t, _ in soak.series["temp.zone0_c"]
    ]
    j = judge_soak(soak.speeds, soak.series, declared_roles(soak.series))
    assert j.value == "throttled" and j.first_throttle_window == 30
    assert j.first_throttle_what == "throttle.cpu0.core_count +3 throttle events"
    assert j.windows[30].throttle_signals == ["throttle.cpu0.core_count +3"]
    assert not j.windows[29].throttle_signals and not j.windows[31].throttle_signals


def test_a_jetson_over_current_counter_that_went_up_is_throttling_by_the_supply() -> None:
    # no heat at all (trip never reached): the supply, not the temperature, throttled the board
    soak = simulate(Device(trip_c=90.0))
    start = Device().t0
    soak.series["oc_throttle.oc3.events"] = [
        (t, 12.0 if t < start + 200.0 else 19.0) for t, _ in soak.series["temp.zone0_c"]
    ]
    j = judge_soak(soak.speeds, soak.series, declared_roles(soak.series))
    assert j.value == "throttled" and j.first_throttle_window == 20
    assert j.windows[20].throttle_signals == ["oc_throttle.oc3.events +7"]
