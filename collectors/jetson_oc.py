"""Jetson over-current and under-voltage throttle events: the ``soctherm_oc`` hwmon device.

On Orin-class boards the BPMP firmware throttles CPU and GPU clocks itself when the board's input voltage
sags or its current exceeds a limit, and counts each event. NVIDIA's tegra234 OC-event hwmon driver exposes
those counts as ``/sys/class/hwmon/hwmonN/oc{1,2,3}_event_cnt`` beside ``oc{N}_throt_en`` (whether that
alarm throttles), under a hwmon whose ``name`` is ``soctherm_oc``; jtop's sysfs page reads the same files.
NVIDIA's Orin power guide names OC1 under-voltage, OC2 average over-current and OC3 instantaneous
over-current. A soak that slows while an OC counter rises was throttled by its power supply, not by heat:
the counters say which, where the temperature cannot.

The hwmon index changes from boot to boot, so the device is found by name every time ``available`` runs.
"""

from __future__ import annotations

import re
from pathlib import Path

from edgeprof.collectors.base import (
    Availability,
    Collector,
    Metric,
    SampleValues,
    listed_names,
    read_int,
    read_text,
)
from edgeprof.collectors.roles import MetricRole

HWMON_DIR = "/sys/class/hwmon"
HWMON_NAME = "soctherm_oc"

# alarm -> what NVIDIA's Orin power guide says it watches
_ALARMS = {1: "under-voltage", 2: "average over-current", 3: "instantaneous over-current"}
_EVENT_FILE = re.compile(r"oc(\d+)_event_cnt")


class JetsonOcEventsCollector(Collector):
    name = "jetson_oc"

    @classmethod
    def role_of(cls, metric: str) -> MetricRole | None:
        return oc_event_role(metric)

    def __init__(self, root: Path | str = "/") -> None:
        super().__init__(root)
        self._device: Path | None = None
        self._alarms: list[int] = []

    def _discover(self) -> Path | None:
        self._device, self._alarms = None, []
        try:
            devices = sorted(self.path(HWMON_DIR).iterdir())
        except OSError:
            return None
        for device in devices:
            if read_text(device / "name") != HWMON_NAME:
                continue
            files = listed_names(device)
            alarms = sorted(int(m.group(1)) for f in files if (m := _EVENT_FILE.fullmatch(f)))
            if alarms:
                self._device, self._alarms = device, alarms
                return device
        return None

    def available(self) -> Availability:
        device = self._discover()
        if device is None:
            return Availability(
                False, f"no {HWMON_NAME} hwmon under {HWMON_DIR} (Jetson Orin-class boards only)"
            )
        listed = ", ".join(f"oc{n}" for n in self._alarms)
        return Availability(True, f"{HWMON_NAME} at {device.name}: {listed} event counters")

    def metrics(self) -> list[Metric]:
        out: list[Metric] = []
        for n in self._alarms:
            what = _ALARMS.get(n, "board alarm")
            out.append(
                Metric(f"oc_throttle.oc{n}.events", "count", "counter", f"OC{n} ({what}) throttle events")
            )
            out.append(Metric(f"oc_throttle.oc{n}.throttle_enabled", "bool", "gauge", f"OC{n} throttles"))
        return out

    def sample(self) -> SampleValues:
        values: SampleValues = {}
        device = self._device
        for n in self._alarms:
            events = read_int(device / f"oc{n}_event_cnt") if device is not None else None
            enabled = read_int(device / f"oc{n}_throt_en") if device is not None else None
            values[f"oc_throttle.oc{n}.events"] = None if events is None else float(events)
            values[f"oc_throttle.oc{n}.throttle_enabled"] = None if enabled is None else float(enabled)
        return values


def oc_event_role(metric: str) -> MetricRole | None:
    """``oc_throttle.ocN.events``: a throttle-event counter of the whole SoC; ``throttle_enabled`` is
    context, stored and not judged."""
    parts = metric.split(".")
    if len(parts) != 3 or parts[0] != "oc_throttle":
        return None
    if parts[2] == "events":
        return MetricRole("throttle_counter", "count", "soc")
    return MetricRole("other", "bool", "soc")
