"""The metric-role contract (collectors/roles.py): every built-in collector declares a role for each metric,
roles survive the JSON they are stored as, and ``declared_metrics`` fills every role in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fakes import FakeRoot

from edgeprof.collectors import MetricRole, RaplCollector, component_of_sensor, registry


@pytest.mark.parametrize(
    ("metric", "source", "role", "extra"),
    [
        ("temp.cpu_c", "sysfs_thermal", "temperature", {"component": "cpu", "thermometer": True}),
        ("temp.pmic_die_c", "sysfs_thermal", "temperature", {"thermometer": False}),
        ("cpufreq.policy0.cur_mhz", "sysfs_cpufreq", "clock", {"clock_max": "cpufreq.policy0.max_mhz"}),
        ("cpufreq.policy0.max_mhz", "sysfs_cpufreq", "clock_cap", {"domain": "policy0"}),
        ("cpufreq.policy0.hw_max_mhz", "sysfs_cpufreq", "clock_limit", {}),
        ("cpu3.freq_mhz", "psutil_host", "clock", {"per_core": True, "domain": "cpu"}),
        ("cpu.util_pct", "psutil_host", "utilization", {"unit": "pct"}),
        ("proc.rss_mb", "psutil_host", "memory", {"unit": "MB"}),
        ("energy.package_uj", "rapl", "energy", {"unit": "uJ", "scope": "device", "component": "cpu"}),
        ("energy.psys_uj", "rapl", "energy", {"whole_board": True, "scope": "board_input"}),
        ("throttle.package0.count", "x86_throttle", "throttle_counter", {}),
        ("gpu0.energy_mj", "nvml", "energy", {"unit": "mJ", "discrete": True, "instance": "gpu0"}),
        ("gpu1.power_mw", "nvml", "power", {"scope": "device", "instance": "gpu1"}),
        ("gpu0.clock_event_reasons", "nvml", "throttle_flags", {}),
        ("gpu0.sm_clock_mhz", "nvml", "clock", {"domain": "gpu"}),
        ("power.vdd_in_mw", "tegrastats", "power", {"whole_board": True, "scope": "board_input"}),
        ("power.vin_mw", "jtop", "power", {"whole_board": True}),
        ("power.vin_sys_5v0_mw", "tegrastats", "power", {"scope": "rail", "whole_board": False}),
        ("power.total_mw", "jtop", "power", {"scope": "rails_total"}),
        ("power.nc_2_mw", "tegrastats", "other", {}),
        ("gpu.freq_mhz", "tegrastats", "clock", {"domain": "gpu", "discrete": False}),
        ("emc.freq_mhz", "jtop", "clock", {"domain": None, "component": "dram"}),
        ("temp.tj_2nd_c", "tegrastats", "other", {"unit": "C"}),
    ],
)
def test_built_in_collectors_declare_roles(metric: str, source: str, role: str, extra: dict) -> None:
    found = registry.role_of(metric, source)
    assert found is not None and found.role == role, found
    for key, value in extra.items():
        assert getattr(found, key) == value, (metric, key)
    # without the source the same answer (names do not collide across collectors)
    assert registry.role_of(metric) == found


def test_unknown_names_have_no_role_and_roles_survive_json() -> None:
    assert registry.role_of("amdgpu0.junction_c") is None
    role = MetricRole("energy", "uJ", "cpu", scope="device", wrap=2.0**32, instance="package")
    assert MetricRole.from_json(json.loads(json.dumps(role.as_json()))) == role
    fixed = registry.role_of("temp.pmic_die_c")  # thermometer=False must survive the round trip
    assert fixed is not None and MetricRole.from_json(json.loads(json.dumps(fixed.as_json()))) == fixed
    assert MetricRole.from_json({"nonsense": 1}) is None
    assert component_of_sensor("x86_pkg_temp") == "cpu" and component_of_sensor("GPU-therm") == "gpu"


def test_declared_metrics_fill_every_role(tmp_path: Path) -> None:
    FakeRoot(tmp_path).rapl_zone("0", "package-0", 5, wrap=1000)
    declared = RaplCollector(tmp_path).declared_metrics()
    got = [(m.name, m.role.role if m.role else None, m.role.wrap if m.role else None) for m in declared]
    assert got == [("energy.package_uj", "energy", 1000.0)]
