"""The evidence rule (collectors/evidence.py): which zones are thermometers and which clocks can be
observed, and the verdicts that must not claim "not throttled" or "not thermal" without either. Series are
SYNTHETIC (answers known by construction) unless they come from a capture named in the test."""

from __future__ import annotations

import pytest
from support.heating import Device, simulate
from support.roles import declared_roles
from support.throttle_runs import FALLING_TPS, STEADY_TPS, inputs, series

from edgeprof.collectors.evidence import (
    FIXED_RANGE_C,
    MIN_READINGS,
    MOVED_RANGE_C,
    celsius_or_none,
    clock_unobservable_reason,
    hottest_c,
    judge_evidence,
    pseudo_sensor_reason,
)
from edgeprof.collectors.registry import roles_for
from edgeprof.verdicts.soak import judge_soak
from edgeprof.verdicts.throttle import throttle_verdict

# psutil's "CPU clock" on this VM and on any machine without cpufreq: /proc/cpuinfo's figure, every sample.
STATIC_CPUINFO_MHZ = 2445.412


@pytest.mark.parametrize(
    "name", ["PMIC", "pmic", "PMIC-Die", "pmic_die", "temp.pmic_c", "temp.pmic_die_zone4_c", "temp.pmic_2_c"]
)
def test_the_pmic_zone_is_no_thermometer_in_every_spelling(name: str) -> None:
    assert pseudo_sensor_reason(name) is not None


@pytest.mark.parametrize(
    "name", ["temp.cpu_c", "temp.tj_c", "temp.gpu_c", "temp.ao_c", "CPU-therm", "gpu0.temp_c"]
)
def test_real_zones_are_thermometers(name: str) -> None:
    assert pseudo_sensor_reason(name) is None


def test_every_collector_declares_pmic_no_thermometer() -> None:
    # tegrastats and jtop name it PMIC (``temp.pmic_c``), sysfs PMIC-Die (``temp.pmic_die_c``)
    roles = roles_for(["temp.pmic_c", "temp.pmic_die_c", "temp.cpu_c"])
    assert not roles["temp.pmic_c"].thermometer and not roles["temp.pmic_die_c"].thermometer
    assert roles["temp.cpu_c"].thermometer


def test_minus_256_is_sensor_off_and_never_the_hottest() -> None:
    assert celsius_or_none(-256.0) is None and celsius_or_none(-255.5) == -255.5
    assert hottest_c({"temp.gpu_c": -256.0, "temp.cpu_c": 41.0, "temp.pmic_c": 100.0}) == 41.0
    assert hottest_c({"temp.pmic_c": 100.0}) is None


def _zones(fixed: list[float], other_range_c: float, n: int = 10) -> dict[str, list[tuple[float, float]]]:
    return {
        "temp.soc_c": [(float(i), fixed[i % len(fixed)]) for i in range(n)],
        "temp.cpu_c": [(float(i), 40.0 + other_range_c * i / (n - 1)) for i in range(n)],
    }


def test_a_zone_fixed_while_another_moved_is_excluded_just_at_the_threshold() -> None:
    moved = judge_evidence(z := _zones([60.0], MOVED_RANGE_C), declared_roles(z))
    assert "temp.soc_c" in moved.excluded_zones and moved.thermometers == ("temp.cpu_c",)
    assert "fixed value" in moved.excluded_zones["temp.soc_c"]
    # the other zone moved less than 1 °C: nothing proves the fixed one false
    still = judge_evidence(z := _zones([60.0], MOVED_RANGE_C - 0.5), declared_roles(z))
    assert still.excluded_zones == {} and set(still.thermometers) == {"temp.cpu_c", "temp.soc_c"}


def test_a_zone_that_flickers_by_one_step_is_a_thermometer() -> None:
    assert FIXED_RANGE_C == 0.0
    found = judge_evidence(z := _zones([60.0, 60.5], 5.0), declared_roles(z))
    assert found.excluded_zones == {}


def test_too_few_readings_prove_no_zone_fixed() -> None:
    few = judge_evidence(z := _zones([60.0], 5.0, n=MIN_READINGS - 1), declared_roles(z))
    assert few.excluded_zones == {}
    enough = judge_evidence(z := _zones([60.0], 5.0, n=MIN_READINGS), declared_roles(z))
    assert "temp.soc_c" in enough.excluded_zones


def test_a_clock_that_never_moves_is_not_observable() -> None:
    static = [STATIC_CPUINFO_MHZ] * MIN_READINGS
    reason = clock_unobservable_reason("cpu0.freq_mhz", static)
    assert reason is not None and "not observable" in reason and "2445.41" in reason
    assert clock_unobservable_reason("cpu0.freq_mhz", static[:-1]) is None  # too few to tell
    assert clock_unobservable_reason("cpu0.freq_mhz", [*static, STATIC_CPUINFO_MHZ - 1.0]) is None
    # flat here but seen elsewhere in the sweep at another value: a real clock, held in this run
    assert clock_unobservable_reason("cpu0.freq_mhz", static, reference_mhz=3000.0) is None


def _vm_run() -> dict[str, list[tuple[float, float | None]]]:
    """A VM: no thermal zone, psutil's static cpuinfo figure as the only clock."""
    return {
        "cpu0.freq_mhz": series(lambda _t: STATIC_CPUINFO_MHZ),
        "cpu0.util_pct": series(lambda t: 90.0 + t % 3),
    }


def test_no_thermometer_and_a_static_clock_never_give_not_throttled() -> None:
    result = throttle_verdict(inputs(STEADY_TPS, _vm_run()))
    assert result.value == "inconclusive", result.evidence["reasons"]
    assert "no thermometer and no observable clock on this machine" in result.evidence["reasons"]
    assert "cpu0.freq_mhz" in result.evidence["evidence"]["unobservable_clocks"]
    slow = throttle_verdict(inputs(FALLING_TPS, _vm_run()))
    assert slow.value == "inconclusive" and not any("not thermal" in r for r in slow.evidence["reasons"])
    # the same clock moving by one MHz is a clock: then "not throttled" has evidence
    moving = _vm_run() | {"cpu0.freq_mhz": series(lambda t: STATIC_CPUINFO_MHZ - (int(t) % 2))}
    assert throttle_verdict(inputs(STEADY_TPS, moving)).value == "not_throttled"


def test_a_clock_read_from_the_hardware_is_observable_however_flat() -> None:
    flat = [1510.0] * (MIN_READINGS * 2)
    assert clock_unobservable_reason("cpu0.freq_mhz", flat, measured=True) is None
    # tegrastats and NVML read their clocks from the hardware; psutil's figure may be /proc/cpuinfo's
    run = {f"cpu{i}.freq_mhz": series(lambda _t: 1510.0) for i in range(6)}
    assert judge_evidence(run, roles_for(run, dict.fromkeys(run, "tegrastats"))).unobservable_clocks == {}
    psutil = judge_evidence(run, roles_for(run, dict.fromkeys(run, "psutil_host")))
    assert len(psutil.unobservable_clocks) == 6


def test_clocks_not_observable_are_said_once_per_domain() -> None:
    run = {f"cpu{i}.freq_mhz": series(lambda _t: STATIC_CPUINFO_MHZ) for i in range(6)}
    found = judge_evidence(run, roles_for(run, dict.fromkeys(run, "psutil_host")))
    assert list(found.unobservable_domains) == ["cpu"]
    [said] = found.unobservable_domains.values()
    assert said.startswith("cpu0.freq_mhz … cpu5.freq_mhz (6 clocks)") and "2445.41 MHz" in said
    result = throttle_verdict(inputs(STEADY_TPS, _vm_run() | run))
    assert sum("not observable" in r for r in result.evidence["reasons"]) == 1


def test_a_pmic_zone_at_100_c_is_never_the_hottest_in_a_verdict() -> None:
    metrics = {
        "temp.pmic_c": series(lambda _t: 100.0),
        "temp.cpu_c": series(lambda t: 40.0 + (0.5 if int(t) % 2 else 0.0)),
        "cpu0.freq_mhz": series(lambda t: 2035.0 - (int(t) % 3)),
    }
    result = throttle_verdict(inputs(STEADY_TPS, metrics, trips={"temp.pmic_c": [("passive", 97.0)]}))
    assert result.value == "not_throttled", result.evidence["reasons"]
    assert set(result.evidence["temperature"]["zones"]) == {"temp.cpu_c"}
    assert "temp.pmic_c" in result.evidence["evidence"]["excluded_zones"]
    assert any(n.startswith("temp.pmic_c is no thermometer: Tegra's PMIC") for n in result.evidence["notes"])


def test_a_soak_without_thermometer_and_clock_is_inconclusive_naming_the_contention() -> None:
    settled = Device().equilibrium_c()
    soak = simulate(Device(start_c=settled, hog_from_s=300.0))
    vm = {m: s for m, s in soak.series.items() if not m.startswith("temp.")}
    vm["cpufreq.policy0.cur_mhz"] = [(t, STATIC_CPUINFO_MHZ) for t, _ in vm["cpufreq.policy0.cur_mhz"]]
    vm["cpufreq.policy0.max_mhz"] = vm["cpufreq.policy0.cur_mhz"]
    del vm["cpufreq.policy0.max_mhz"]
    j = judge_soak(soak.speeds, vm, declared_roles(vm))
    assert j.value == "inconclusive", j.evidence["reasons"]
    text = " ".join(j.evidence["reasons"])
    assert "no thermometer and no observable clock on this machine" in text
    assert "the slowdown coincides with 1.00 cores of other work" in text
    assert "not thermal" not in text and "held" not in text.replace("hold mark", "")
