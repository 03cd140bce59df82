"""Host CPU utilisation and clocks, memory, load average, and the benchmark child's RSS and CPU use.

Per-core utilisation is computed from ``/proc/stat`` (under ``root``) rather than ``psutil.cpu_percent``:
psutil's per-CPU list is positional and skips offline cores, so on a Jetson whose nvpmodel mode parks cores
``cpu2`` would silently become the numbers of ``cpu3``; psutil's ``cpu_percent`` also keeps module-global
state that any other caller in the process would disturb. Memory is one read of ``/proc/meminfo`` (under
``root``) with psutil's definitions: psutil's ``virtual_memory`` and ``swap_memory`` read it twice and
``/proc/vmstat`` once, 0.46 ms a sample against 0.05 ms (benchmarks/self/collector_cost.py), and the
sampler's cost is taken from the decode it watches; for the same reason every kernel file is re-read through a
descriptor kept open (``KeptFiles``). Load and clocks come from psutil, and the child process from one read
of its live ``/proc/<pid>/stat`` (state, CPU times and RSS, as psutil reads them): these always describe the
live machine, whatever ``root`` is.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import psutil

from edgeprof.collectors.base import (
    Availability,
    Collector,
    KeptFiles,
    Metric,
    SampleValues,
    monotonic_s,
    read_text,
)
from edgeprof.collectors.procstat import clk_tck, parse_pid_cpu_ticks, parse_rss_pages, task_state
from edgeprof.collectors.roles import MetricRole
from edgeprof.collectors.sysfs_cpufreq import parse_cpu_list

PROC_STAT = "/proc/stat"
MEMINFO = "/proc/meminfo"
MEMINFO_FIELDS = frozenset({"MemTotal", "MemAvailable", "SwapTotal", "SwapFree"})
CPU_PRESENT = "/sys/devices/system/cpu/present"
MIB = 1024.0 * 1024.0
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
_CLK_TCK = clk_tck()


class CpuTimes:
    """Jiffies from one ``/proc/stat`` cpu line: total and idle (idle + iowait)."""

    __slots__ = ("idle", "total")

    def __init__(self, total: int, idle: int) -> None:
        self.total = total
        self.idle = idle


def parse_proc_stat(text: str) -> dict[str, CpuTimes]:
    """``cpu``/``cpuN`` lines -> times keyed ``cpu`` (aggregate) and ``cpu0``...; offline CPUs are absent."""
    result: dict[str, CpuTimes] = {}
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        fields = line.split()
        try:
            numbers = [int(x) for x in fields[1:]]
        except ValueError:
            continue
        if len(numbers) < 4:
            continue
        # user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is already counted in
        # user/nice, so only the first eight fields add up to the total.
        total = sum(numbers[:8])
        idle = numbers[3] + (numbers[4] if len(numbers) > 4 else 0)
        result[fields[0]] = CpuTimes(total, idle)
    return result


def util_pct(prev: CpuTimes | None, cur: CpuTimes | None) -> float | None:
    """Busy share between two readings; None when either is missing or no time passed."""
    if prev is None or cur is None:
        return None
    total = cur.total - prev.total
    if total <= 0:
        return None
    # iowait may step backwards on some kernels, so idle can exceed total briefly: clamp, don't invent.
    busy = total - (cur.idle - prev.idle)
    return max(0.0, min(100.0, 100.0 * busy / total))


@dataclass
class _Child:
    process: psutil.Process
    last_cpu_s: float | None
    last_t: float


class PsutilHostCollector(Collector):
    name = "psutil_host"

    @classmethod
    def role_of(cls, metric: str) -> MetricRole | None:
        return psutil_role(metric)

    def __init__(self, root: Path | str = "/", child_pid: int | None = None) -> None:
        super().__init__(root)
        self._lock = threading.Lock()
        self._prev: dict[str, CpuTimes] = {}
        self._cpus: list[int] | None = None
        self._freq_cpus: list[int] = []
        self._child: _Child | None = None
        # /proc/stat, /proc/meminfo and the child's stat, re-read without an open each time
        self._files = KeptFiles()
        self._read_pid: int | None = None  # the child whose stat the reading thread keeps open
        if child_pid is not None:
            self.set_child_pid(child_pid)

    # -- discovery -------------------------------------------------------------------------------------

    def _read_stat(self) -> dict[str, CpuTimes]:
        text = self._files.read(self.path(PROC_STAT))
        return parse_proc_stat(text) if text else {}

    def _discover(self) -> list[int]:
        # Present, not online, CPUs: a parked core stays declared and reads None until it comes back.
        cpus = parse_cpu_list(read_text(self.path(CPU_PRESENT)))
        if not cpus:
            cpus = sorted(int(key[3:]) for key in self._read_stat() if key != "cpu")
        if not cpus:
            cpus = list(range(psutil.cpu_count(logical=True) or 0))
        self._cpus = cpus
        freqs = _cpu_freqs()
        # psutil gives one entry per cpufreq policy (per cluster on ARM) or per "cpu MHz" line of online
        # CPUs; only a one-to-one match with the present CPUs can be labelled cpuN honestly. Per-cluster
        # clocks come from sysfs_cpufreq instead.
        self._freq_cpus = cpus if freqs is not None and len(freqs) == len(cpus) else []
        return cpus

    def _get_cpus(self) -> list[int]:
        return self._cpus if self._cpus is not None else self._discover()

    # -- contract --------------------------------------------------------------------------------------

    def available(self) -> Availability:
        cpus = self._discover()
        stat = self._read_stat()
        with self._lock:
            self._prev = stat  # baseline, so the first sample already has a utilisation interval
        notes = [f"psutil {psutil.__version__}", f"{len(cpus)} CPUs"]
        if not stat:
            notes.append(f"{PROC_STAT} unreadable: no utilisation")
        notes.append("per-CPU clocks" if self._freq_cpus else "no per-CPU clocks from psutil")
        return Availability(True, ", ".join(notes))

    def metrics(self) -> list[Metric]:
        cpus = self._get_cpus()
        metrics = [Metric("cpu.util_pct", "pct", "gauge", "all CPUs busy share (/proc/stat)")]
        metrics += [Metric(f"cpu{i}.util_pct", "pct", "gauge", f"cpu{i} busy share") for i in cpus]
        metrics += [
            Metric(f"cpu{i}.freq_mhz", "MHz", "gauge", f"cpu{i} clock (psutil)") for i in self._freq_cpus
        ]
        metrics += [
            Metric("mem.ram_used_mb", "MB", "gauge", "RAM used (psutil, MiB)"),
            Metric("mem.ram_available_mb", "MB", "gauge", "RAM available (MemAvailable, MiB)"),
            Metric("mem.swap_used_mb", "MB", "gauge", "swap used (MiB)"),
            Metric("load.avg1", "count", "gauge", "1-minute load average (runnable + D-state tasks)"),
            Metric("proc.rss_mb", "MB", "gauge", "benchmark child resident set (MiB)"),
            Metric("proc.cpu_pct", "pct", "gauge", "benchmark child CPU use; 100 per fully busy core"),
        ]
        return metrics

    def sample(self) -> SampleValues:
        cpus = self._get_cpus()
        values: SampleValues = {}
        stat = self._read_stat()
        with self._lock:
            prev, self._prev = self._prev, stat or self._prev
        values["cpu.util_pct"] = util_pct(prev.get("cpu"), stat.get("cpu"))
        for i in cpus:
            values[f"cpu{i}.util_pct"] = util_pct(prev.get(f"cpu{i}"), stat.get(f"cpu{i}"))
        if self._freq_cpus:
            freqs = _cpu_freqs()
            matched = freqs is not None and len(freqs) == len(self._freq_cpus)
            for n, i in enumerate(self._freq_cpus):
                mhz = freqs[n] if matched and freqs is not None else None
                values[f"cpu{i}.freq_mhz"] = mhz if mhz is not None and mhz > 0 else None
        values.update(parse_meminfo_mb(self._files.read(self.path(MEMINFO)) or "") or _memory())
        values["load.avg1"] = _load1()
        values.update(self._sample_child())
        return values

    def close(self) -> None:
        self.set_child_pid(None)
        self._files.close()

    # -- child process ---------------------------------------------------------------------------------

    def set_child_pid(self, pid: int | None) -> None:
        """Start (or with None stop) sampling ``proc.rss_mb``/``proc.cpu_pct`` for this process id.

        A pid that does not exist (any more) is accepted: its values are simply None.
        """
        child: _Child | None = None
        if pid is not None:
            try:
                process = psutil.Process(pid)
                child = _Child(process, _cpu_seconds(process), monotonic_s())
            except psutil.Error:
                child = None
        with self._lock:
            self._child = child

    def _sample_child(self) -> SampleValues:
        with self._lock:
            child = self._child
        pid = child.process.pid if child is not None else None
        if pid != self._read_pid:  # a new child: the last one's descriptor goes (on this reading thread)
            if self._read_pid is not None:
                self._files.drop(f"/proc/{self._read_pid}/stat")
            self._read_pid = pid
        if child is None:
            return {"proc.rss_mb": None, "proc.cpu_pct": None}
        # State, CPU times and RSS from one read of the live /proc/<pid>/stat, as psutil reads them
        text = self._files.read(Path(f"/proc/{pid}/stat"))
        ticks, pages = parse_pid_cpu_ticks(text), parse_rss_pages(text)
        # A zombie still answers (RSS 0) until its parent reaps it: that is "gone", not "0 MB".
        if task_state(text) in (None, "Z") or ticks is None or pages is None:
            return {"proc.rss_mb": None, "proc.cpu_pct": None}
        rss_mb = pages * _PAGE_BYTES / MIB
        cpu_s = ticks / _CLK_TCK
        now = monotonic_s()
        cpu_pct: float | None = None
        with self._lock:
            if child.last_cpu_s is not None and now > child.last_t:
                cpu_pct = max(0.0, 100.0 * (cpu_s - child.last_cpu_s) / (now - child.last_t))
            child.last_cpu_s, child.last_t = cpu_s, now
        return {"proc.rss_mb": rss_mb, "proc.cpu_pct": cpu_pct}


def _cpu_seconds(process: psutil.Process) -> float | None:
    try:
        times = process.cpu_times()
    except psutil.Error:
        return None
    return float(times.user + times.system)


def _cpu_freqs() -> list[float] | None:
    try:
        freqs = psutil.cpu_freq(percpu=True)
    except (OSError, NotImplementedError, AttributeError, ValueError):
        return None
    if not freqs:
        return None
    return [float(f.current) for f in freqs]


def parse_meminfo_mb(text: str) -> SampleValues | None:
    """RAM used and available and swap used, MiB, from ``/proc/meminfo`` as psutil 7 defines them (used =
    MemTotal - MemAvailable, available clamped to the total; swap used = SwapTotal - SwapFree). None without
    MemTotal or a positive MemAvailable (kernels before 3.14): psutil then estimates what is available."""
    kib: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in MEMINFO_FIELDS:
            fields = rest.split()
            if fields and fields[0].isdigit():
                kib[name] = int(fields[0])
                if len(kib) == len(MEMINFO_FIELDS):
                    break
    total, available = kib.get("MemTotal"), kib.get("MemAvailable")
    if not total or not available:
        return None
    available = min(available, total)
    swap_total, swap_free = kib.get("SwapTotal"), kib.get("SwapFree")
    swap_used = swap_total - swap_free if swap_total is not None and swap_free is not None else None
    return {
        "mem.ram_used_mb": (total - available) / 1024.0,
        "mem.ram_available_mb": available / 1024.0,
        "mem.swap_used_mb": swap_used / 1024.0 if swap_used is not None else None,
    }


def _memory() -> SampleValues:
    values: SampleValues = {"mem.ram_used_mb": None, "mem.ram_available_mb": None, "mem.swap_used_mb": None}
    with contextlib.suppress(OSError, RuntimeError):
        vm = psutil.virtual_memory()
        values["mem.ram_used_mb"] = vm.used / MIB
        values["mem.ram_available_mb"] = vm.available / MIB
    with contextlib.suppress(OSError, RuntimeError):
        values["mem.swap_used_mb"] = psutil.swap_memory().used / MIB
    return values


def _load1() -> float | None:
    try:
        return float(psutil.getloadavg()[0])
    except (OSError, AttributeError):
        return None


def psutil_role(metric: str) -> MetricRole | None:
    """Roles of ``PsutilHostCollector``'s metrics (see ``metrics``)."""
    head, _, leaf = metric.partition(".")
    if leaf == "util_pct" and (head == "cpu" or (head.startswith("cpu") and head[3:].isdigit())):
        return MetricRole("utilization", "pct", "cpu")
    if leaf == "freq_mhz" and head.startswith("cpu") and head[3:].isdigit():
        # One core's clock; the cpufreq policies summarise clusters where sysfs has them.
        return MetricRole("clock", "MHz", "cpu", domain="cpu", per_core=True)
    if metric in ("mem.ram_used_mb", "mem.ram_available_mb", "mem.swap_used_mb", "proc.rss_mb"):
        return MetricRole("memory", "MB", "dram")
    if metric in ("load.avg1", "proc.cpu_pct"):
        return MetricRole("other", "count" if metric == "load.avg1" else "pct", "cpu")
    return None
