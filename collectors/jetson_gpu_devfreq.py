"""A Jetson's integrated GPU clock from its devfreq node, with no jtop and on every JetPack.

JetPack 5 and later print ``GR3D_FREQ 99%`` in tegrastats with no clock, so without jtop's service the GPU
clock of the unit llama.cpp runs on was not seen. The kernel's devfreq framework has it for every Jetson:
``/sys/class/devfreq/<node>/`` with ``cur_freq``, ``min_freq``, ``max_freq`` and ``available_frequencies``,
all in Hz (devfreq's unit; cpufreq's is kHz), stored here in MHz like every clock.

The node is named after the GPU's device-tree node, which differs per module (the names jetson-stats
matches, ``device/of_node/name``): ``17000000.ga10b`` on Orin, ``17000000.gv11b`` on Xavier,
``17000000.gp10b`` on TX2, ``57000000.gpu`` on Nano and TX1 (and ``17000000.gpu`` where a newer GPU driver
names it so). The node is found by that name, never by position: the same folder lists the memory
controller's and other engines' devfreq nodes.

``max_freq`` is the current upper limit (nvpmodel, a thermal cooling device or a user can lower it): a
cap, like cpufreq's ``scaling_max_freq``; the highest available frequency is the hardware's maximum.
"""

from __future__ import annotations

from pathlib import Path

from edgeprof.collectors.base import Availability, Collector, Metric, SampleValues, read_int, read_text
from edgeprof.collectors.roles import MetricRole

DEVFREQ_DIR = "/sys/class/devfreq"

# device-tree name of the GPU (``device/of_node/name``) -> the modules that carry it
GPU_NODE_NAMES: dict[str, str] = {
    "ga10b": "Orin (tegra234)",
    "gv11b": "Xavier (tegra194)",
    "gp10b": "TX2 (tegra186)",
    "gpu": "Nano / TX1 (tegra210)",
}
# devfreq node names known per module, for a root whose nodes carry no ``device/of_node/name``
KNOWN_NODES: dict[str, str] = {
    "17000000.ga10b": "ga10b",
    "17000000.gv11b": "gv11b",
    "17000000.gp10b": "gp10b",
    "57000000.gpu": "gpu",
    "17000000.gpu": "gpu",
}

PREFIX = "devfreq.gpu"
CUR, CAP = f"{PREFIX}.cur_mhz", f"{PREFIX}.max_mhz"
FLOOR, HW_MAX = f"{PREFIX}.min_mhz", f"{PREFIX}.hw_max_mhz"


def hz_to_mhz(hz: int | None) -> float | None:
    """A devfreq figure (Hz) in MHz; None for a missing or zero reading (no clock runs at 0 Hz)."""
    return hz / 1e6 if hz is not None and hz > 0 else None


def parse_available_frequencies(text: str | None) -> list[float]:
    """``available_frequencies`` (Hz, space separated) -> sorted MHz; junk entries are left out."""
    out = []
    for part in (text or "").split():
        if part.isdigit() and int(part) > 0:
            out.append(int(part) / 1e6)
    return sorted(set(out))


def find_gpu_node(devfreq_dir: Path) -> tuple[Path, str] | None:
    """(node folder, GPU name) of the integrated GPU's devfreq node, found by the GPU's device-tree name
    (or, where that file is absent, by the node names known per module); None where there is none."""
    try:
        nodes = sorted(devfreq_dir.iterdir())
    except OSError:
        return None
    for node in nodes:
        of_name = (read_text(node / "device" / "of_node" / "name") or "").rstrip("\x00")
        if of_name in GPU_NODE_NAMES:
            return node, of_name
    for node in nodes:
        if node.name in KNOWN_NODES:
            return node, KNOWN_NODES[node.name]
    return None


class JetsonGpuDevfreqCollector(Collector):
    name = "jetson_gpu_devfreq"

    @classmethod
    def role_of(cls, metric: str) -> MetricRole | None:
        return devfreq_gpu_role(metric)

    def __init__(self, root: Path | str = "/") -> None:
        super().__init__(root)
        self._node: Path | None = None
        self._gpu = ""

    def _discover(self) -> Path | None:
        found = find_gpu_node(self.path(DEVFREQ_DIR))
        self._node, self._gpu = found if found is not None else (None, "")
        return self._node

    def node(self) -> Path | None:
        """The devfreq node this collector reads (found on first use)."""
        return self._node if self._node is not None else self._discover()

    def available(self) -> Availability:
        node = self._discover()
        if node is None:
            return Availability(
                False,
                f"no GPU devfreq node under {DEVFREQ_DIR} (looked for {', '.join(sorted(KNOWN_NODES))}: "
                "not a Jetson)",
            )
        if hz_to_mhz(read_int(node / "cur_freq")) is None:
            return Availability(False, f"{DEVFREQ_DIR}/{node.name}: cur_freq unreadable")
        steps = self.available_frequencies_mhz()
        span = f", {len(steps)} steps {steps[0]:g}-{steps[-1]:g} MHz" if steps else ""
        governor = read_text(node / "governor")
        how = f", governor {governor}" if governor else ""
        return Availability(
            True,
            f"GPU {self._gpu} ({GPU_NODE_NAMES[self._gpu]}) at {DEVFREQ_DIR}/{node.name}: cur/min/max_freq "
            f"in Hz{span}{how}",
        )

    def available_frequencies_mhz(self) -> list[float]:
        node = self.node()
        return [] if node is None else parse_available_frequencies(read_text(node / "available_frequencies"))

    def metrics(self) -> list[Metric]:
        node = self.node()
        if node is None:
            return []
        out = [
            Metric(CUR, "MHz", "gauge", f"GPU clock ({node.name}/cur_freq, Hz in sysfs)"),
            Metric(CAP, "MHz", "gauge", "GPU clock limit now (max_freq: nvpmodel, thermal, user)"),
            Metric(FLOOR, "MHz", "gauge", "GPU clock floor now (min_freq)"),
        ]
        if self.available_frequencies_mhz():
            out.append(Metric(HW_MAX, "MHz", "gauge", "highest of available_frequencies"))
        return out

    def sample(self) -> SampleValues:
        node = self.node()
        if node is None:
            return {}
        values: SampleValues = {
            CUR: hz_to_mhz(read_int(node / "cur_freq")),
            CAP: hz_to_mhz(read_int(node / "max_freq")),
            FLOOR: hz_to_mhz(read_int(node / "min_freq")),
        }
        steps = self.available_frequencies_mhz()
        if steps:
            values[HW_MAX] = steps[-1]
        return values


def devfreq_gpu_role(metric: str) -> MetricRole | None:
    """The GPU clock (capped by ``max_mhz``), its cap (bounded by the highest available step), its floor."""
    if metric == CUR:
        return MetricRole("clock", "MHz", "gpu", clock_max=CAP, domain="gpu")
    if metric == CAP:
        return MetricRole("clock_cap", "MHz", "gpu", clock_max=HW_MAX, domain="gpu_devfreq")
    if metric == HW_MAX:
        return MetricRole("clock_limit", "MHz", "gpu", domain="gpu_devfreq")
    if metric == FLOOR:
        return MetricRole("other", "MHz", "gpu")
    return None
