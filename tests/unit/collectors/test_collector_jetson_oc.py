"""JetsonOcEventsCollector on SYNTHETIC hwmon trees built in tmp_path.

No public capture of a ``soctherm_oc`` hwmon listing with its source could be found for
tests/fixtures/captures, so every tree here is synthetic; the file names follow NVIDIA's tegra234 OC-event
hwmon driver (``oc{N}_event_cnt``, ``oc{N}_throt_en``, hwmon ``name`` = ``soctherm_oc``), the files jtop's
sysfs page reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from edgeprof.collectors.jetson_oc import JetsonOcEventsCollector
from edgeprof.collectors.registry import role_of

pytestmark = pytest.mark.timeout(30)


def hwmon(root: Path, index: int, name: str, files: dict[str, str]) -> Path:
    device = root / "sys/class/hwmon" / f"hwmon{index}"
    device.mkdir(parents=True)
    (device / "name").write_text(name + "\n")
    for file_name, value in files.items():
        (device / file_name).write_text(value + "\n")
    return device


def test_the_soctherm_oc_device_is_found_by_name_whatever_its_index(tmp_path: Path) -> None:
    hwmon(tmp_path, 0, "other_chip", {"oc1_event_cnt": "99"})  # the same file name on another device
    hwmon(tmp_path, 1, "ina3221", {"in1_input": "4984", "curr1_input": "1856"})
    oc = {f"oc{n}_{kind}": v for n in (1, 2, 3) for kind, v in (("event_cnt", str(n * 5)), ("throt_en", "1"))}
    hwmon(tmp_path, 3, "soctherm_oc", oc)
    collector = JetsonOcEventsCollector(tmp_path)
    ok, reason = collector.available()
    assert ok and reason == "soctherm_oc at hwmon3: oc1, oc2, oc3 event counters"
    metrics = {m.name: m for m in collector.declared_metrics()}
    assert metrics["oc_throttle.oc3.events"].kind == "counter"
    assert metrics["oc_throttle.oc3.events"].role is not None
    assert metrics["oc_throttle.oc3.events"].role.role == "throttle_counter"
    assert metrics["oc_throttle.oc1.throttle_enabled"].role is not None
    assert metrics["oc_throttle.oc1.throttle_enabled"].role.role == "other"
    assert collector.sample() == {
        "oc_throttle.oc1.events": 5.0,
        "oc_throttle.oc1.throttle_enabled": 1.0,
        "oc_throttle.oc2.events": 10.0,
        "oc_throttle.oc2.throttle_enabled": 1.0,
        "oc_throttle.oc3.events": 15.0,
        "oc_throttle.oc3.throttle_enabled": 1.0,
    }
    # stored samples are classified without the hardware
    assert role_of("oc_throttle.oc2.events") == role_of("oc_throttle.oc2.events", "jetson_oc")


def test_no_device_is_unavailable_with_a_reason_and_an_unreadable_count_is_none(tmp_path: Path) -> None:
    collector = JetsonOcEventsCollector(tmp_path)
    ok, reason = collector.available()
    assert not ok and "no soctherm_oc hwmon" in reason
    device = hwmon(tmp_path, 0, "soctherm_oc", {"oc1_event_cnt": "2", "oc1_throt_en": "1"})
    assert collector.available().ok
    (device / "oc1_event_cnt").unlink()  # a read that fails (the firmware did not answer) is no reading
    assert collector.sample() == {"oc_throttle.oc1.events": None, "oc_throttle.oc1.throttle_enabled": 1.0}
