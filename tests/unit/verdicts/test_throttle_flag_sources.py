"""Throttle flags decoded by the source that wrote them, and the GPU run whose GPU clock nobody read.

Synthetic series (tests/support/throttle_runs.py): each answer is known by construction."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.throttle_runs import FALLING_TPS, STEADY_TPS, cool_metrics, inputs, ramping, series

from edgeprof.collectors import MetricRole
from edgeprof.verdicts import throttle_verdict
from edgeprof.verdicts.hardware_signals import REQUESTED_SAME_FRACTION, requested_not_ran


def _with_word(word: int, flags: str | None, *, discrete: bool = False):
    metrics = {**cool_metrics(), "dev.flags": series(lambda t: float(word) if t >= 10 else 0.0)}
    run = inputs(STEADY_TPS, metrics, gpu=True)
    part = "gpu" if discrete else "cpu"
    role = MetricRole("throttle_flags", "bitmask", part, discrete=discrete, flags=flags)
    return replace(run, roles={**run.roles, "dev.flags": role})


@pytest.mark.parametrize(
    ("word", "flags", "value", "named"),
    [
        # bit 2: NVML's SwPowerCap, a Pi firmware's Throttled
        (0x4, "nvml", "throttled", "SwPowerCap"),
        (0x4, "rpi_firmware", "throttled", "Throttled"),
        # bit 0: NVML's GpuIdle (normal operation), a Pi's under-voltage (no throttle by itself)
        (0x1, "nvml", "not_throttled", None),
        (0x1, "rpi_firmware", "not_throttled", None),
        # a role stored before flags named their source is NVML's
        (0x20, None, "throttled", "SwThermalSlowdown"),
        # a source no decoder knows is no evidence, never NVML's bits by default
        (0x20, "someone_else", "not_throttled", None),
    ],
)
def test_each_word_is_decoded_by_its_own_source(
    word: int, flags: str | None, value: str, named: str | None
) -> None:
    result = throttle_verdict(_with_word(word, flags))
    assert result.value == value, result.evidence["reasons"]
    text = " ".join(result.evidence["reasons"])
    if named is not None:
        assert f"dev.flags: {named} during load" in text
    if flags == "rpi_firmware" and word == 0x1:
        assert any("under-voltage during load (dev.flags)" in n for n in result.evidence["notes"])


def test_a_sticky_bit_set_before_the_run_is_not_news() -> None:
    # ThrottledOccurred (bit 18) set since boot, before and through the run: this run was not throttled
    metrics = {**cool_metrics(), "dev.flags": series(lambda t: float(0x40000))}
    run = inputs(STEADY_TPS, metrics)
    role = MetricRole("throttle_flags", "bitmask", "cpu", flags="rpi_firmware")
    result = throttle_verdict(replace(run, roles={**run.roles, "dev.flags": role}))
    assert result.value == "not_throttled", result.evidence["reasons"]
    # ... but appearing during the run it is: a throttle between two readings
    metrics["dev.flags"] = series(lambda t: float(0x40000) if t >= 30 else 0.0)
    result = throttle_verdict(replace(run, series=metrics, roles={**run.roles, "dev.flags": role}))
    assert result.value == "throttled" and "ThrottledOccurred" in " ".join(result.evidence["reasons"])


def test_a_discrete_gpus_flags_say_nothing_of_a_cpu_only_run() -> None:
    run = replace(_with_word(0x20, "nvml", discrete=True), gpu_in_use=False)
    result = throttle_verdict(run)
    assert result.value == "not_throttled"
    assert result.evidence["hardware"]["detail"]["dev.flags"]["ignored"].startswith("the run did not offload")


def _gpu_run_without_gpu_clock(tps: list[float]):
    metrics = {
        "temp.cpu_c": series(lambda t: 60.0 + t / 3.0),  # heating 20 °C/min
        "cpufreq.policy0.cur_mhz": series(ramping(2000.0)),  # the CPU clock held
    }
    return inputs(tps, metrics, gpu=True)


def test_a_gpu_run_whose_gpu_clock_was_not_read_is_not_told_the_clocks_held() -> None:
    """The run offloaded to the GPU and only the CPU's clock was read: that the CPU's held says nothing of
    the GPU's, so a slowdown that tracks temperature is throttling, never "every measured clock held"."""
    result = throttle_verdict(_gpu_run_without_gpu_clock(FALLING_TPS))
    ev = result.evidence
    assert ev["clocks"]["domains"]["gpu"] == {"status": "not_measured"}
    assert ev["clocks"]["status"] == "unknown"
    assert result.value == "throttled", ev["reasons"]
    assert "clocks not measured; speed falls as temperature rises" in ev["reasons"]
    # the same run without offload: the CPU clock is the run's clock, it held, heat did not slow it
    cpu_only = replace(_gpu_run_without_gpu_clock(FALLING_TPS), gpu_in_use=False)
    assert throttle_verdict(cpu_only).value == "slowdown_not_thermal"


@pytest.mark.parametrize(("measured", "said"), [(1471.0, False), (1470.0, True)])
def test_a_requested_clock_beyond_two_percent_of_the_measured_one_is_named_not_what_ran(
    measured: float, said: bool
) -> None:
    """``REQUESTED_SAME_FRACTION`` = 2 % of the measured clock: 1500 requested differs from 1471 measured
    by 29 MHz (inside 29.42), from 1470 by 30 MHz (outside 29.4)."""
    series_ = {"cpufreq.policy0.cur_mhz": [(t, 1500.0) for t in range(10)],
               "rpi.arm_clock_mhz": [(t, measured) for t in range(10)]}
    roles = {
        "cpufreq.policy0.cur_mhz": MetricRole("clock", "MHz", "cpu", domain="cpu"),
        "rpi.arm_clock_mhz": MetricRole("clock", "MHz", "cpu", domain="cpu", measured=True),
    }
    assert REQUESTED_SAME_FRACTION == 0.02
    notes = requested_not_ran(series_, roles, 0.0, 9.0)
    assert bool(notes) is said


def test_where_the_firmware_measures_the_clock_cpufreq_never_stands_in_for_it() -> None:
    """A measured clock that holds flat is the CPU domain's clock (read from the hardware, it is observed
    holding); the kernel's requested figure, moving or not, is still not what ran."""
    metrics = {
        "temp.cpu_c": series(lambda t: 60.0 + (0.5 if int(t) % 2 else 0.0)),
        "cpufreq.policy0.cur_mhz": series(lambda t: 1500.0 if int(t) % 3 else 1400.0),
        "rpi.arm_clock_mhz": series(lambda t: 1000.0),
    }
    result = throttle_verdict(inputs(STEADY_TPS, metrics))
    assert result.evidence["clocks"]["domains"]["cpu"]["metrics"] == ["rpi.arm_clock_mhz"]
    assert "cpufreq.policy0.cur_mhz" not in str(result.evidence["clocks"]["domains"])
