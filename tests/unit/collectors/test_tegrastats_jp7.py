"""JetPack 7 tegrastats forms (Thor; AGX Orin on JetPack 7.2) from the real captures in
tests/fixtures/captures/tegrastats_jp7 (sources in its README). Every field of each first line is compared
with values transcribed by hand from the capture text, never produced by running the parser."""

from __future__ import annotations

import dataclasses

import pytest
from support.paths import CAPTURES

from edgeprof.collectors import role_of
from edgeprof.collectors.tegrastats_parse import (
    CpuCore,
    EmcInfo,
    GpuEntry,
    Rail,
    RamInfo,
    TegrastatsRecord,
    parse_line,
    record_to_json,
    record_to_metrics,
)
from edgeprof.telemetry import choose_energy_source, energy_j

pytestmark = pytest.mark.timeout(60)

FIXTURES = CAPTURES / "tegrastats_jp7"
C = CpuCore

EXPECTED: dict[str, TegrastatsRecord] = {
    "agx-orin_jp7.2-r39.2.txt": TegrastatsRecord(
        timestamp="07-25-2026 09:08:28",
        ram=RamInfo(20642, 62817, 1, 2),
        swap=None,
        iram=None,
        cpus=(
            C(23, 2201),
            C(10, 2201),
            C(4, 2201),
            C(14, 2201),
            C(30, 2201),
            C(18, 2201),
            C(10, 2201),
            C(10, 2201),
            C(33, 2201),
            C(7, 2201),
            C(5, 2201),
            C(27, 2201),
        ),
        emc=EmcInfo(3, 3199),
        gpu=(GpuEntry("GR3D_FREQ", 12, (1300, 1300)),),
        temps_c={"cpu": 52.968, "soc2": 48.406, "soc0": 49.531, "gpu": 47.625},
        temps_second_c={"cpu": 52.968, "soc2": 48.406, "soc0": 49.531, "gpu": 47.625},
        rails=(
            Rail("VDD_GPU_SOC", 5139, 5139, 5139),
            Rail("VDD_CPU_CV", 3268, 3268, 3268),
            Rail("VIN_SYS_5V0", 5500, 5500, 5500),
        ),
        engines={
            "NVENC0": "off",
            "NVDEC0": "off",
            "NVJPG0": "off",
            "NVJPG1": "off",
            "VIC": "off",
            "OFA": "off",
            "NVDLA0": "off",
            "NVDLA1": "off",
            "PVA0_FREQ": "off",
            "APE": "174",
        },
        unknown=(),
    ),
    "thor-no-gpu-emc.txt": TegrastatsRecord(
        timestamp="06-12-2026 13:04:13",
        ram=RamInfo(9038, 125772, 62, 4),
        swap=None,
        iram=None,
        cpus=(
            C(40, 972),
            C(0, 972),
            C(0, 972),
            C(0, 972),
            C(1, 2601),
            C(96, 2601),
            C(2, 972),
            C(2, 972),
            C(0, 972),
            C(0, 972),
            C(7, 1620),
            C(22, 1620),
            C(0, 972),
            C(0, 972),
        ),
        emc=None,
        gpu=(),
        temps_c={"cpu": 35.468, "tj": 37.062, "soc012": 34.968, "gpu": 37.062, "soc345": 34.687},
        temps_second_c={},
        rails=(
            Rail("VDD_GPU", 2371, 2371),
            Rail("VDD_CPU_SOC_MSS", 8299, 8299),
            Rail("VIN_SYS_5V0", 7044, 7044),
            Rail("VIN", 24830, 24830),
        ),
        engines={},
        unknown=(),
    ),
    "thor-frequency.txt": TegrastatsRecord(
        timestamp=None,
        ram=RamInfo(3429, 125773, 12, 4),
        swap=None,
        iram=None,
        cpus=(
            C(0, 2601),
            C(100, 2601),
            C(0, 972),
            C(0, 972),
            C(100, 2601),
            C(0, 2601),
            C(1, 972),
            C(0, 972),
            C(0, 972),
            C(0, 972),
            C(0, 972),
            C(0, 972),
            C(0, 972),
            C(0, 972),
        ),
        emc=EmcInfo(0, 2750),
        gpu=(GpuEntry("GR3D_FREQ", None, (494, 494, 494)),),
        temps_c={"cpu": 35.875, "tj": 35.875, "soc012": 32.562, "gpu": 34.562, "soc345": 33.531},
        temps_second_c={},
        rails=(
            Rail("VDD_GPU", 3132, 3132),
            Rail("VDD_CPU_SOC_MSS", 9397, 9397),
            Rail("VIN_SYS_5V0", 5680, 5680),
        ),
        engines={
            "NVENC0_FREQ": "@665",
            "NVENC1_FREQ": "@666",
            "NVDEC0_FREQ": "@665",
            "NVDEC1_FREQ": "@665",
            "NVJPG0_FREQ": "@665",
            "VIC": "off",
            "OFA_FREQ": "@665",
            "PVA0_FREQ": "off",
            "APE": "300",
        },
        unknown=(),
    ),
}


def _first_line(name: str) -> str:
    lines = [ln for ln in (FIXTURES / name).read_text(encoding="utf-8").splitlines() if ln.strip()]
    assert lines, f"{name} is empty"
    return lines[0]


def test_every_fixture_has_an_expectation_and_a_source() -> None:
    on_disk = {p.name for p in FIXTURES.glob("*.txt")}
    assert on_disk == set(EXPECTED)
    readme = (FIXTURES / "README.md").read_text(encoding="utf-8")
    for name in on_disk:
        assert name in readme, f"{name}: record its source in the README"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_first_line_every_field(name: str) -> None:
    got = parse_line(_first_line(name))
    want = EXPECTED[name]
    for f in dataclasses.fields(TegrastatsRecord):
        assert getattr(got, f.name) == getattr(want, f.name), f"{name}: field {f.name}"
    assert list(got.temps_c) == list(want.temps_c)  # line order decides metric names


def test_two_value_temperature_keeps_both_values_under_separate_names() -> None:
    metrics = record_to_metrics(parse_line(_first_line("agx-orin_jp7.2-r39.2.txt")))
    assert metrics["temp.cpu_c"] == 52.968
    assert metrics["temp.cpu_2nd_c"] == 52.968
    assert metrics["temp.gpu_2nd_c"] == 47.625
    # the first value is the zone's temperature; the undocumented second one is stored, never judged
    first, second = role_of("temp.cpu_c", "tegrastats"), role_of("temp.cpu_2nd_c", "tegrastats")
    assert first is not None and first.role == "temperature"
    assert second is not None and second.role == "other" and second.unit == "C"
    assert metrics["power.vdd_gpu_soc_mw"] == 5139  # the current value of a three-value rail
    doc = record_to_json(parse_line(_first_line("agx-orin_jp7.2-r39.2.txt")))
    assert doc["rails_mw"][0] == {"name": "VDD_GPU_SOC", "cur": 5139, "avg": 5139, "third": 5139}
    assert doc["temps_second_c"]["soc0"] == 49.531


def test_a_two_value_temperature_with_differing_values_keeps_each() -> None:
    # Synthetic edge case (not a capture): the two values differ, and an offline second value is None.
    rec = parse_line("cpu@52.5C/51.25C gpu@40C/-256C")
    assert rec.temps_c == {"cpu": 52.5, "gpu": 40.0}
    assert rec.temps_second_c == {"cpu": 51.25, "gpu": None}
    assert rec.unknown == ()


def _constant_series(values: dict[str, float | None], t0: float = 0.0, t1: float = 2.0) -> dict:
    return {m: [(t0, v), (t1, v)] for m, v in values.items() if v is not None}


def test_tegrastats_rails_alone_thor_vin_is_the_whole_board() -> None:
    metrics = record_to_metrics(parse_line(_first_line("thor-no-gpu-emc.txt")))
    src = choose_energy_source({m: r for m in metrics if (r := role_of(m, "tegrastats")) is not None})
    assert src is not None
    assert (src.name, src.basis, src.whole_board) == ("power.vin_mw", "board_input", True)
    assert energy_j(src, _constant_series(metrics), 0.0, 2.0) == pytest.approx(24.830 * 2)


def test_tegrastats_rails_alone_without_an_input_rail_sums_the_rails() -> None:
    metrics = record_to_metrics(parse_line(_first_line("agx-orin_jp7.2-r39.2.txt")))
    src = choose_energy_source({m: r for m in metrics if (r := role_of(m, "tegrastats")) is not None})
    assert src is not None and src.basis == "rails_sum" and src.whole_board is False
    assert sorted(src.metrics) == ["power.vdd_cpu_cv_mw", "power.vdd_gpu_soc_mw", "power.vin_sys_5v0_mw"]
    # 5139 + 3268 + 5500 mW for 2 s
    assert energy_j(src, _constant_series(metrics), 0.0, 2.0) == pytest.approx(13.907 * 2)
