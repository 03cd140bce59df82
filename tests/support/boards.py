"""SYNTHETIC boards for the Raspberry Pi firmware and Jetson GPU devfreq collectors, and a live telemetry
run over them. Not captures: every file and every answer is made here from the values a test gives, in the
kernel's and the firmware's formats (``get_throttled`` in hex without ``0x``, devfreq in Hz, ``vcgencmd``'s
``frequency(48)=<Hz>`` / ``temp=<C>'C`` / ``throttled=0x<hex>``).

- ``SyntheticPi``: a fake root with the firmware's sysfs ``get_throttled`` (optional), a ``cpu-thermal``
  zone and a cpufreq policy that keeps the clock Linux asked for, plus a ``vcgencmd`` the collector calls
  through its runner (a Python function: no process per reading) or, with ``executable``, a real script in
  the root's ``usr/bin`` reading the board's state file.
- ``SyntheticOrin``: a fake root with the GPU's devfreq node ``17000000.ga10b`` (its ``of_node`` named
  ``ga10b``, beside a memory-controller node that must not be taken for it) and a ``gpu-thermal`` zone with
  a passive trip. Its frequency steps are the AGX Orin's GPU range of the real ``jetson_clocks --show``
  capture (tests/fixtures/captures/sysfs/jetson_clocks-show_agx-orin_jp5.1.txt: 306000000-1300500000 Hz);
  the steps between are made up.
- ``live_run``: the real ``Sampler`` polling the real collectors over such a root on the simulation's time
  (one tick per simulated second, the board set before each), then the throttle verdict's inputs as a
  sweep stores them: the series, the roles the collectors declared, the zones' trip points, and one
  steady rep per 10 s whose speed follows the clock that ran.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from edgeprof.collectors import Collector, roles_for
from edgeprof.collectors.rpi_firmware import GET_THROTTLED_SYSFS
from edgeprof.telemetry.sampler import Sampler, SampleRow
from edgeprof.verdicts import RepSample, ThrottleInputs, trip_points_from
from support.fakes import FakeRoot

KHZ, HZ_PER_MHZ = 1000, 1_000_000


@dataclass
class PiState:
    arm_mhz: float = 1500.0
    temp_c: float = 60.0
    throttled: int = 0x0
    requested_mhz: float = 1500.0  # what cpufreq reads: the clock Linux asked for


class SyntheticPi:
    """SYNTHETIC Raspberry Pi 4 (1500 MHz): a fake root plus its firmware's ``vcgencmd``."""

    def __init__(
        self, root: FakeRoot, *, sysfs: bool = True, executable: bool = False, jitter_hz: int = 0
    ) -> None:
        """``jitter_hz``: every other ``measure_clock`` reads this much above the set clock, as a real
        firmware's measurement wanders (1500398464, 1500345728 Hz ...)."""
        self.root, self.sysfs, self.jitter_hz = root, sysfs, jitter_hz
        self.state = PiState()
        self.calls: list[list[str]] = []
        root.value("proc/device-tree/model", "Raspberry Pi 4 Model B Rev 1.4 (synthetic)")
        root.thermal_zone(0, "cpu-thermal", 60000)
        # cpufreq: what Linux asked for, which the firmware may overrule
        root.cpufreq_policy(0, "0-3", 1_500_000, 1_500_000, 1_500_000, "ondemand", driver="cpufreq-dt")
        self.state_file = root.path("run/synthetic-pi.json")
        if executable:
            script = root.write(
                "usr/bin/vcgencmd",
                f"#!{sys.executable}\n" + _VCGENCMD_SCRIPT.replace("STATE", str(self.state_file)),
            )
            script.chmod(0o755)
        self.set()

    def set(
        self,
        arm_mhz: float | None = None,
        temp_c: float | None = None,
        throttled: int | None = None,
        requested_mhz: float | None = None,
    ) -> None:
        if requested_mhz is not None:
            self.state.requested_mhz = requested_mhz
        if arm_mhz is not None:
            self.state.arm_mhz = arm_mhz
        if temp_c is not None:
            self.state.temp_c = temp_c
        if throttled is not None:
            self.state.throttled = throttled
        self.root.replace("sys/class/thermal/thermal_zone0/temp", round(self.state.temp_c * 1000))
        policy = "sys/devices/system/cpu/cpufreq/policy0/scaling_cur_freq"
        self.root.replace(policy, round(self.state.requested_mhz * KHZ))
        if self.sysfs:
            self.root.path(GET_THROTTLED_SYSFS).parent.mkdir(parents=True, exist_ok=True)
            self.root.replace(GET_THROTTLED_SYSFS, f"{self.state.throttled:x}")
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        self.state_file.write_text(json.dumps(self.state.__dict__))

    def vcgencmd(self, argv: list[str], timeout_s: float) -> str | None:
        """The firmware's answer to ``vcgencmd <command>`` (the collector's runner)."""
        self.calls.append(argv[1:])
        clock_reads = sum(1 for c in self.calls if c == ["measure_clock", "arm"])
        jitter = self.jitter_hz * (clock_reads % 2) / HZ_PER_MHZ
        return _answer(argv[1:], {**self.state.__dict__, "arm_mhz": self.state.arm_mhz + jitter})


def _answer(command: Sequence[str], state: dict[str, float]) -> str | None:
    if list(command) == ["measure_clock", "arm"]:
        return f"frequency(48)={round(state['arm_mhz'] * HZ_PER_MHZ)}\n"
    if list(command) == ["measure_temp"]:
        return f"temp={state['temp_c']:.1f}'C\n"
    if list(command) == ["get_throttled"]:
        return f"throttled={int(state['throttled']):#x}\n"
    return None


_VCGENCMD_SCRIPT = '''# SYNTHETIC vcgencmd: answers from the test board's state file, in vcgencmd's formats
import json, sys
state = json.load(open("STATE"))
cmd = sys.argv[1:]
if cmd == ["measure_clock", "arm"]:
    print(f"frequency(48)={round(state['arm_mhz'] * 1000000)}")
elif cmd == ["measure_temp"]:
    print(f"temp={state['temp_c']:.1f}'C")
elif cmd == ["get_throttled"]:
    print(f"throttled={int(state['throttled']):#x}")
else:
    print('error=2 error_msg="Command not registered"')
    sys.exit(2)
'''

ORIN_GPU_NODE = "17000000.ga10b"
# 306000000 and 1300500000 Hz: the AGX Orin capture's GPU MinFreq/MaxFreq; the steps between: synthetic
ORIN_GPU_STEPS_HZ = (306000000, 612000000, 930750000, 1134750000, 1300500000)


class SyntheticOrin:
    """SYNTHETIC Jetson AGX Orin: the GPU's devfreq node and a ``gpu-thermal`` zone with a passive trip."""

    def __init__(self, root: FakeRoot, *, trip_c: float = 95.0, of_node: bool = True) -> None:
        self.root = root
        self.node = root.path(f"sys/class/devfreq/{ORIN_GPU_NODE}")
        # the memory controller's devfreq node sits in the same folder: found by name, never by position
        emc = root.path("sys/class/devfreq/bpmp-emc")
        root.value(emc / "cur_freq", 2133000000)
        root.value(emc / "device/of_node/name", "external-memory-controller")
        if of_node:
            root.value(self.node / "device/of_node/name", "ga10b")
        root.value(self.node / "available_frequencies", " ".join(str(f) for f in ORIN_GPU_STEPS_HZ))
        root.value(self.node / "governor", "nvhost_podgov")
        root.value(self.node / "min_freq", ORIN_GPU_STEPS_HZ[0])
        root.thermal_zone(0, "gpu-thermal", 50000, mode="enabled", trips=[("passive", round(trip_c * 1000))])
        self.set(1300.5, 50.0)

    def set(self, gpu_mhz: float, temp_c: float, cap_mhz: float | None = None) -> None:
        self.root.replace(self.node / "cur_freq", round(gpu_mhz * HZ_PER_MHZ))
        self.root.replace(self.node / "max_freq", round((cap_mhz or 1300.5) * HZ_PER_MHZ))
        self.root.replace("sys/class/thermal/thermal_zone0/temp", round(temp_c * 1000))


@dataclass
class LiveRun:
    inputs: ThrottleInputs
    rows: list[SampleRow]


def live_run(
    collectors: list[Collector],
    board: Callable[[float], float],
    *,
    seconds: int = 60,
    rep_s: float = 10.0,
    gpu_in_use: bool = False,
    t0: float = 1000.0,
) -> LiveRun:
    """Poll ``collectors`` with the real sampler once per simulated second for ``seconds``; before each
    tick ``board(t)`` sets the board for second ``t`` and returns the decode speed it allows then. One
    steady rep per ``rep_s`` whose tg_tps is the mean of those speeds."""
    rows: list[SampleRow] = []
    now = [t0]
    sampler = Sampler(collectors, 1.0, rows.extend, clock=lambda: now[0], wall=lambda: now[0])
    speeds: list[float] = []
    try:
        for second in range(seconds):
            now[0] = t0 + second
            speeds.append(board(float(second)))
            sampler.tick()
        sampler.flush()
    finally:
        sampler.stop()
    series: dict[str, list[tuple[float, float | None]]] = {}
    sources: dict[str, str] = {}
    for row in rows:
        series.setdefault(row.metric, []).append((row.t_mono, row.value))
        sources.setdefault(row.metric, row.source)
    declared = {
        m.name: m.role for c in collectors for m in c.declared_metrics() if m.role is not None
    }
    per_rep = round(rep_s)
    reps = [
        RepSample(i, t0 + i * rep_s, t0 + (i + 1) * rep_s - 0.5, sum(chunk) / len(chunk))
        for i in range(seconds // per_rep)
        if (chunk := speeds[i * per_rep : (i + 1) * per_rep])
    ]
    inputs = ThrottleInputs(
        reps=reps,
        series={m: [(t, v) for t, v in s if v is not None] for m, s in series.items()},
        load_start=t0,
        load_end=t0 + seconds,
        trip_points=trip_points_from(collectors),
        gpu_in_use=gpu_in_use,
        roles=roles_for(series, sources, declared),
    )
    return LiveRun(inputs, rows)

