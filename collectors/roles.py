"""The metric-role contract: what each stored metric *is*, declared by the collector that produces it.

Telemetry (energy, J/token, phase aggregates), verdicts (throttle evidence) and plots (timeline panels) ask
this contract what a metric is, never its name. A collector states the role of each metric it can emit in
its ``role_of`` classmethod (a pure function of the name, so stored samples of a sweep measured elsewhere
can still be classified without that hardware). A sweep stores the roles with its collector status; the
one way to a metric -> role mapping is ``edgeprof.collectors.registry.roles_for``: the stored roles first,
then the declaring collector class. The judging and aggregating functions take that mapping and import no
driver. Adding a source is therefore one module in ``collectors/``, one registry line and its test; nothing
in ``agent/`` changes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

Role = Literal[
    "temperature",  # °C of a sensor
    "clock",  # a clock's current frequency (MHz)
    "clock_cap",  # the current upper limit of a clock (cpufreq scaling_max_freq): a kernel decision
    "clock_limit",  # a clock's fixed hardware maximum: context for a cap, never a reading under load
    "utilization",  # busy share (pct)
    "power",  # an instantaneous power gauge (mW)
    "energy",  # a cumulative energy counter (uJ, mJ)
    "memory",  # memory in use / available (MB)
    "throttle_flags",  # a bitmask of hardware throttle reasons, decoded by its source (``flags``)
    "throttle_counter",  # a monotonic count of throttle events (x86 thermal_throttle)
    "cpu_time",  # cumulative CPU seconds; ``domain``: host_busy, host_steal, host_total, child, self
    "run_queue",  # runnable tasks at the reading (/proc/stat procs_running)
    "other",  # anything else: stored and shown by doctor, not judged
]
Component = Literal["cpu", "gpu", "soc", "board", "dram", "other"]
# What part of the board's draw a power/energy metric covers:
#   board_input: everything the board takes in (Jetson VDD_IN/POM_5V_IN/VIN, RAPL psys) -> whole board;
#   rails_total: a sum of the module's rails computed by the source (jtop's total without an input rail);
#   rail: one module rail (summed with the other rails when the board has no input rail);
#   device: one device's own draw (a dGPU board via NVML, a CPU package via RAPL).
PowerScope = Literal["board_input", "rails_total", "rail", "device"]

# Joules per unit of an energy counter / milliwatts per unit of a gauge.
_TO_J: dict[str, float] = {"uJ": 1e-6, "mJ": 1e-3, "J": 1.0}
_TO_MW: dict[str, float] = {"mW": 1.0, "W": 1000.0, "uW": 1e-3}


@dataclass(frozen=True)
class MetricRole:
    """The role of one metric. Only the fields that matter for its role need to be set.

    - ``clock_max``: for a clock, the metric holding its current cap (``cpufreq.policyN.max_mhz``); for a
      cap, the metric holding the hardware maximum.
    - ``domain``: which clock domain a clock belongs to for the throttle verdict (``"cpu"``, ``"gpu"``;
      None: not judged, e.g. the memory controller) and the instance a cap limits (``"policy0"``).
    - ``per_core``: a single core's reading, used only where no per-cluster (cpufreq policy) clock exists.
    - ``discrete``: measured on a separate device (a dGPU): says nothing about a run that did not offload.
    - ``thermometer``: False for a sensor that reports a fixed value (Tegra PMIC-Die at 100 °C); the rule
      is ``edgeprof.collectors.evidence``.
    - ``observable``: False for a clock whose readings never moved over a run that worked (a static
      ``/proc/cpuinfo`` figure): set by ``evidence.judge_evidence``, never by a collector.
    - ``instance``: which device of several the metric belongs to (``gpu0``): one figure per device is
      summed into a run's energy, never a device's counter and its gauge together.
    - ``flags``: for a throttle-flag word, the decoder of its source's bits (``edgeprof.collectors.flags``;
      None: a role stored before flags named their source, NVML's).
    - ``measured``: a clock read from the hardware as it runs (tegrastats, NVML, a Pi's firmware
      ``measure_clock``): flat under load it *held*, never "not observable"; where one is read in a clock
      domain it is that domain's clock, and the kernel's requested figure (cpufreq) is not.
    - ``wrap``: the value at which an energy counter rolls over (None: never, or known only per device,
      in which case the live ``Metric.wrap`` carries it).
    """

    role: Role
    unit: str = ""
    component: Component = "other"
    whole_board: bool = False
    scope: PowerScope | None = None
    clock_max: str | None = None
    domain: str | None = None
    per_core: bool = False
    discrete: bool = False
    thermometer: bool = True
    observable: bool = True
    wrap: float | None = None
    instance: str | None = None
    flags: str | None = None
    measured: bool = False

    @property
    def to_j(self) -> float | None:
        """Joules per counter unit (energy counters), None for an unknown unit."""
        return _TO_J.get(self.unit)

    @property
    def to_mw(self) -> float | None:
        """Milliwatts per gauge unit (power gauges), None for an unknown unit."""
        return _TO_MW.get(self.unit)

    def as_json(self) -> dict[str, Any]:
        """The fields that differ from their defaults (what ``from_json`` needs), always with ``role``."""
        defaults = {f.name: f.default for f in fields(self)}
        return {k: v for k, v in asdict(self).items() if v != defaults[k]} | {"role": self.role}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MetricRole | None:
        """Inverse of ``as_json`` (as stored with a sweep's collector status); None for junk."""
        try:
            known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
            return cls(**known)
        except (TypeError, KeyError):
            return None


OTHER = MetricRole("other")


def temperature(component: Component, *, discrete: bool = False, thermometer: bool = True) -> MetricRole:
    return MetricRole("temperature", "C", component, discrete=discrete, thermometer=thermometer)


def component_of_sensor(name: str) -> Component:
    """Which part of the board a sensor/zone/rail name refers to (``cpu``, ``gpu``, ``soc`` ...), from the
    words sensor names use on x86, Arm and Jetson boards; ``other`` where the name says nothing."""
    lowered = name.lower()
    for words, component in (
        (("gpu", "gr3d", "gpc"), "gpu"),
        (("cpu", "x86_pkg", "coretemp", "package", "core", "tctl", "tdie", "k10temp"), "cpu"),
        (("dram", "emc", "vddq", "ddr", "mem"), "dram"),
        (("soc", "tj", "cv", "ao", "aux", "tboard", "tdiode", "pmic"), "soc"),
        (("board", "vin", "vdd_in", "pom_5v_in", "psys", "acpitz"), "board"),
    ):
        if any(w in lowered for w in words):
            return component  # type: ignore[return-value]
    return "other"
