"""JtopCollector against a fake jtop client, plus the real jetson-stats module on this machine (no
jtop.service here, so it must report itself unavailable).

The fake mirrors the client properties of jetson-stats 4.x as documented in the docstrings of
``jtop/jtop.py`` (``memory``, ``cpu``, ``gpu``, ``temperature``, ``power``, ``fan``): memory in kB with
RAM ``shared`` = NvMapMemUsed, EMC and clocks in kHz, ``temp`` -256 for an offline sensor, power per rail in
mW with the board input rail moved to ``tot`` (with its ``name``), and ``gpu``/``memory``/``fan`` as
read-only dict-like views (jtop's ``GenericInterface``: ``items``/``get``/``[]``, not a ``Mapping``). The
numbers are synthetic, shaped like an AGX Orin with one core parked; they were not captured on a device.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import edgeprof.collectors.jtop as jtop_collector
from edgeprof.collectors.jtop import INSTALL_HINT, JtopCollector, jtop_access_problems

SERVICE_DOWN = "The jtop.service is not active. Please run:\nsudo systemctl restart jtop.service"


class DictView:
    """Like jtop's GenericInterface: dict-shaped reads, but not a ``collections.abc.Mapping``."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def items(self) -> Any:
        return self._data.items()

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)


def orin_memory() -> DictView:
    return DictView(
        {
            "RAM": {"tot": 31_765_000, "used": 4_194_304, "free": 20_000_000, "shared": 1_048_576, "lfb": 12},
            "SWAP": {"tot": 15_882_000, "used": 102_400, "cached": 0, "table": {}},
            "EMC": {"online": True, "val": 17, "cur": 3_199_000, "max": 3_199_000, "min": 204_000},
        }
    )


def orin_cpu() -> dict[str, Any]:
    def core(idle: float, khz: int) -> dict[str, Any]:
        freq = {"min": 115_200, "max": 2_201_600, "cur": khz}
        return {"online": True, "governor": "schedutil", "freq": freq, "user": 100 - idle, "idle": idle}

    return {
        "total": {"user": 30.0, "nice": 0.0, "system": 5.0, "idle": 65.0},
        "cpu": [core(10.0, 2_201_600), core(60.0, 1_497_600), {"online": False}, core(100.0, 729_600)],
    }


def orin_gpu() -> DictView:
    return DictView(
        {
            "gpu": {
                "type": "integrated",
                "status": {"railgate": False, "tpc_pg_mask": False, "3d_scaling": True, "load": 87.5},
                "freq": {"governor": "nvhost_podgov", "cur": 1_300_500, "max": 1_300_500, "min": 306_000},
            }
        }
    )


def orin_temperature() -> dict[str, Any]:
    return {
        "CPU": {"online": True, "temp": 52.3},
        "GPU": {"online": True, "temp": 49.8},
        "SOC0": {"online": True, "temp": 47.1},
        "Tj": {"online": True, "temp": 52.3},
        "CV0": {"online": False, "temp": -256},
    }


def orin_power() -> dict[str, Any]:
    def rail(mw: int) -> dict[str, Any]:
        return {"online": True, "type": "INA3221", "status": "ok", "volt": 5000, "curr": mw // 5, "power": mw}

    return {
        "rail": {"VDD_GPU_SOC": rail(7_153), "VDD_CPU_CV": rail(1_987), "VIN_SYS_5V0": rail(4_012)},
        "tot": {**rail(18_432), "name": "VDD_IN"},
    }


def orin_fan() -> DictView:
    return DictView({"pwmfan": {"speed": [42.0], "rpm": [2180], "profile": "quiet"}})


class FakeJtop:
    """A started-or-not jtop client; counts start/close/ok calls."""

    def __init__(self, start_error: Exception | None = None) -> None:
        self.start_error = start_error
        self.started = 0
        self.closed = 0
        self.ok_calls: list[dict[str, Any]] = []
        self.ok_result = True
        self.ok_error: Exception | None = None
        self.interval = 1.0
        self.memory: Any = orin_memory()
        self.cpu: Any = orin_cpu()
        self.gpu: Any = orin_gpu()
        self.temperature: Any = orin_temperature()
        self.power: Any = orin_power()
        self.fan: Any = orin_fan()

    def start(self) -> None:
        if self.start_error is not None:
            raise self.start_error
        self.started += 1

    def ok(self, spin: bool = False) -> bool:
        self.ok_calls.append({"spin": spin})
        if self.ok_error is not None:
            raise self.ok_error
        return self.ok_result

    def close(self) -> None:
        self.closed += 1


class JtopException(Exception):
    """Stands in for ``jtop.core.exceptions.JtopException``."""


def started(client: FakeJtop) -> JtopCollector:
    collector = JtopCollector(jtop_factory=lambda: client)
    availability = collector.available()
    assert availability.ok, availability.reason
    return collector


def test_values_are_mapped_to_tegrastats_names() -> None:
    client = FakeJtop()
    collector = started(client)
    values = collector.sample()
    expected = {
        "mem.ram_used_mb": 4096.0,
        "mem.ram_total_mb": 31_765_000 / 1024,
        "mem.swap_used_mb": 100.0,
        "mem.shared_mb": 1024.0,
        "emc.util_pct": 17.0,
        "emc.freq_mhz": 3199.0,
        "cpu.util_pct": 35.0,
        "cpu0.util_pct": 90.0,
        "cpu0.freq_mhz": 2201.6,
        "cpu1.util_pct": 40.0,
        "cpu1.freq_mhz": 1497.6,
        "cpu2.util_pct": None,
        "cpu2.freq_mhz": None,
        "cpu3.util_pct": 0.0,
        "cpu3.freq_mhz": 729.6,
        "gpu.util_pct": 87.5,
        "gpu.freq_mhz": 1300.5,
        "temp.cpu_c": 52.3,
        "temp.gpu_c": 49.8,
        "temp.soc0_c": 47.1,
        "temp.tj_c": 52.3,
        "temp.cv0_c": None,
        "power.vdd_gpu_soc_mw": 7153.0,
        "power.vdd_cpu_cv_mw": 1987.0,
        "power.vin_sys_5v0_mw": 4012.0,
        "power.vdd_in_mw": 18432.0,
        "fan.pwmfan_pct": 42.0,
        "fan.pwmfan_rpm": 2180.0,
    }
    assert values == pytest.approx(expected)
    assert client.ok_calls[-1] == {"spin": True}  # never blocks the sampler waiting for fresh data


def test_metric_declarations_and_summary() -> None:
    client = FakeJtop()
    collector = JtopCollector(jtop_factory=lambda: client)
    availability = collector.available()
    assert availability.ok
    assert availability.reason == (
        "jtop.service connected, 4 CPUs, 4 power readings, 5 temperatures, service interval 1 s"
    )
    metrics = {m.name: m for m in collector.metrics()}
    assert set(metrics) == set(collector.sample())
    units = {name: m.unit for name, m in metrics.items()}
    assert units["mem.shared_mb"] == "MB"
    assert units["power.vdd_in_mw"] == "mW"
    assert units["temp.tj_c"] == "C"
    assert units["cpu3.freq_mhz"] == "MHz"
    assert units["gpu.util_pct"] == "pct"
    assert units["fan.pwmfan_rpm"] == "rpm"
    assert all(m.kind == "gauge" for m in metrics.values())


def test_total_without_input_rail_is_power_total() -> None:
    client = FakeJtop()
    client.power = {
        "rail": {"VDD_CPU": {"online": True, "power": 1200}, "VDD_GPU": {"online": False, "power": 0}},
        "tot": {"power": 1200, "avg": 1100},  # jtop's sum of rails: no 'name'
    }
    values = started(client).sample()
    assert values["power.vdd_cpu_mw"] == 1200
    assert values["power.vdd_gpu_mw"] is None  # offline rail: no reading, not 0 mW
    assert values["power.total_mw"] == 1200


def test_start_failure_reports_jtops_message() -> None:
    client = FakeJtop(start_error=JtopException(SERVICE_DOWN))
    collector = JtopCollector(jtop_factory=lambda: client)
    availability = collector.available()
    assert not availability.ok
    assert availability.reason.startswith(
        "jtop: The jtop.service is not active. Please run: sudo systemctl restart jtop.service"
    )
    assert client.closed == 1  # the half-made client is not left behind
    assert collector.sample() == {}
    assert collector.metrics() == []


def test_factory_failure_is_unavailable() -> None:
    def factory() -> Any:
        raise PermissionError(13, "Permission denied", "/run/jtop.sock")

    availability = JtopCollector(jtop_factory=factory).available()
    assert not availability.ok
    assert availability.reason.startswith("jtop: [Errno 13] Permission denied: '/run/jtop.sock'")


def test_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jtop", None)  # makes `import jtop` raise ImportError
    availability = JtopCollector().available()
    assert availability == (False, INSTALL_HINT)
    assert "pip install edgeprof[jetson]" in availability.reason


def junk_client() -> FakeJtop:
    client = FakeJtop()
    client.memory = DictView(
        {"RAM": "lots", "SWAP": None, "EMC": {"online": True, "val": "17%", "cur": None}}
    )
    client.cpu = {"total": [1, 2], "cpu": [None, 7, {"online": True, "idle": float("nan"), "freq": "fast"}]}
    client.gpu = DictView({"gpu": {"status": None, "freq": {"cur": True}}})
    client.temperature = {"CPU": "hot", 3: {"temp": float("inf")}, "": {"temp": -300.0}, None: None}
    client.power = {"rail": ["VDD_IN"], "tot": 5}
    client.fan = {"pwmfan": {"speed": "max", "rpm": [None, "x"]}}
    return client


def test_sample_never_raises_on_junk() -> None:
    client = FakeJtop()
    collector = started(client)
    junk = junk_client()
    for name in ("memory", "cpu", "gpu", "temperature", "power", "fan"):
        setattr(client, name, getattr(junk, name))
    values = collector.sample()
    assert all(v is None for v in values.values()), {k: v for k, v in values.items() if v is not None}
    assert "mem.shared_mb" in values  # the fixed names stay, with None
    assert "cpu2.util_pct" in values  # 'fast' clock, NaN idle: declared, not a number


def test_sample_never_raises_when_properties_raise() -> None:
    class Broken(FakeJtop):
        @property
        def power(self) -> Any:  # the real property is self._stats['power']: KeyError before data
            raise KeyError("power")

        @power.setter
        def power(self, value: Any) -> None:
            pass

        @property
        def cpu(self) -> Any:
            raise RuntimeError("boom")

        @cpu.setter
        def cpu(self, value: Any) -> None:
            pass

    client = Broken()
    collector = started(client)
    values = collector.sample()
    assert values["gpu.util_pct"] == 87.5  # the other sections still read
    assert values["cpu.util_pct"] is None
    assert not any(name.startswith("power.") for name in values)


def test_lost_connection_and_stale_data_read_none() -> None:
    client = FakeJtop()
    collector = started(client)
    client.ok_error = JtopException("Lost connection with jtop server")
    values = collector.sample()
    assert values and all(v is None for v in values.values())
    assert collector.safe_sample().error is None
    client.ok_error = None
    client.ok_result = False  # no fresh data within the client's timeout
    assert all(v is None for v in collector.sample().values())
    client.ok_result = True
    assert collector.sample()["gpu.util_pct"] == 87.5


def test_client_ok_without_spin_parameter() -> None:
    client = SimpleNamespace(**{k: v for k, v in vars(FakeJtop()).items() if not k.startswith("ok")})
    calls: list[int] = []

    def ok() -> bool:
        calls.append(1)
        return True

    client.ok = ok
    client.start = lambda: None
    client.close = lambda: None
    collector = JtopCollector(jtop_factory=lambda: client)
    assert collector.available().ok
    assert collector.sample()["temp.tj_c"] == 52.3
    assert calls == [1]


def test_close_stops_the_client_once() -> None:
    client = FakeJtop()
    collector = started(client)
    collector.close()
    collector.close()
    assert client.closed == 1
    assert collector.sample() == {}


def test_available_twice_does_not_leak_a_client() -> None:
    clients: list[FakeJtop] = []

    def factory() -> FakeJtop:
        clients.append(FakeJtop())
        return clients[-1]

    collector = JtopCollector(jtop_factory=factory)
    assert collector.available().ok
    assert collector.available().ok
    assert [c.closed for c in clients] == [1, 0]


# -- access diagnosis ----------------------------------------------------------------------------------


@pytest.fixture
def as_user(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend to be uid 1000 'nvidia' with only its own group, whatever runs the tests."""
    monkeypatch.setattr(jtop_collector.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(jtop_collector.os, "getegid", lambda: 1000)
    monkeypatch.setattr(jtop_collector.os, "getgroups", lambda: [1000, 27])
    monkeypatch.setattr(jtop_collector.getpass, "getuser", lambda: "nvidia")


def fake_group(monkeypatch: pytest.MonkeyPatch, members: list[str] | None) -> None:
    def getgrnam(name: str) -> Any:
        if members is None or name != "jtop":
            raise KeyError(name)
        return SimpleNamespace(gr_name="jtop", gr_gid=998, gr_mem=members)

    monkeypatch.setattr(jtop_collector.grp, "getgrnam", getgrnam)


def make_socket(root: Path) -> None:
    (root / "run").mkdir()
    (root / "run" / "jtop.sock").touch()


@pytest.mark.usefixtures("as_user")
def test_access_problems_service_not_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_group(monkeypatch, ["nvidia"])
    monkeypatch.setattr(jtop_collector.os, "getgroups", lambda: [1000, 998])
    assert jtop_access_problems(tmp_path) == [
        "/run/jtop.sock is missing, so jtop.service is not running (sudo systemctl enable --now jtop.service)"
    ]


@pytest.mark.usefixtures("as_user")
def test_access_problems_not_in_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_socket(tmp_path)
    fake_group(monkeypatch, ["someone"])
    assert jtop_access_problems(tmp_path)[-1] == (
        "user nvidia is not in group 'jtop': sudo usermod -aG jtop nvidia, then log out and back in"
    )


@pytest.mark.usefixtures("as_user")
def test_access_problems_added_but_not_logged_in_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_socket(tmp_path)
    fake_group(monkeypatch, ["nvidia"])
    assert "this session started before that: log out and back in" in jtop_access_problems(tmp_path)[-1]


@pytest.mark.usefixtures("as_user")
def test_access_problems_no_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_socket(tmp_path)
    fake_group(monkeypatch, None)
    assert jtop_access_problems(tmp_path)[-1].startswith("group 'jtop' does not exist")


def test_start_failure_reason_includes_diagnosis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_group(monkeypatch, [])
    collector = JtopCollector(
        tmp_path, jtop_factory=lambda: FakeJtop(start_error=JtopException(SERVICE_DOWN))
    )
    reason = collector.available().reason
    assert reason.startswith("jtop: The jtop.service is not active.")
    assert "[/run/jtop.sock is missing" in reason


@pytest.mark.skipif(importlib.util.find_spec("jtop") is None, reason="jetson-stats is not installed")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # jetson-stats' own use of distro
def test_real_jtop_on_this_machine_is_unavailable_and_never_raises() -> None:
    collector = JtopCollector()
    availability = collector.available()
    if availability.ok:
        collector.close()
        pytest.skip(f"this machine runs jtop.service: {availability.reason}")
    assert availability.reason.startswith("jtop: ")
    assert len(availability.reason) > len("jtop: ")
    assert collector.sample() == {}
    assert collector.safe_sample().error is None
    collector.close()
