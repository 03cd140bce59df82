"""CPU time the machine spent on others' work: ``/proc/stat`` and the benchmark child's ``/proc/<pid>/stat``.

The interference verdict (``edgeprof.verdicts.interference``) needs, per steady repetition, how much CPU
time went to processes other than the llama.cpp child (and other than edgeprof itself), how much the
hypervisor stole, and how many tasks were waiting to run. This collector samples the cumulative counters
those come from:

- ``host.cpu_busy_s``: all CPUs' non-idle time (user, nice, system, irq, softirq; guest time is already
  inside user/nice), in seconds -- idle, iowait and steal excluded;
- ``host.cpu_steal_s``: time the hypervisor ran something else while a vCPU wanted to run (0 on bare metal;
  the kernel prints the field on every architecture since 2.6.11, so a missing field is None, never 0);
- ``host.cpu_total_s``: every CPU's time of all kinds, so capacity = delta / wall time;
- ``host.procs_running``: runnable tasks at the reading (the reader itself included), a gauge;
- ``host.procs_running_others``: the same count less the runnable threads of this process and of the child,
  read just before and just after it (``/proc/<pid>/task/*/stat``, state ``R`` at either read), so what
  waits for a CPU is told apart from
  edgeprof's own threads handling the child's last event and from the child's compute threads, whatever
  their number; None where neither task list is readable;
- ``proc.cpu_s``: the child's own utime + stime (all its threads), and ``self.cpu_s`` the same for this
  process (the sampler's own cost is not "other processes").

Everything is read under ``root`` (``/`` on a real machine, a fixture tree in tests). Jiffies are
``USER_HZ`` (``os.sysconf('SC_CLK_TCK')``, 100 on every mainstream kernel build).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from edgeprof.collectors.base import Availability, Collector, KeptFiles, Metric, SampleValues, read_text
from edgeprof.collectors.roles import MetricRole

PROC_STAT = "/proc/stat"
SELF_STAT = "/proc/self/stat"


def clk_tck() -> float:
    """USER_HZ, the unit of /proc's CPU times (100 on every mainstream kernel build)."""
    try:
        return float(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError, AttributeError):
        return 100.0


def parse_stat_totals(text: str) -> dict[str, float | None]:
    """The aggregate ``cpu`` line and ``procs_running`` of ``/proc/stat`` -> jiffies busy/steal/total and
    the run-queue length; None for what the text lacks."""
    out: dict[str, float | None] = {"busy": None, "steal": None, "total": None, "procs_running": None}
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "cpu":
            try:
                numbers = [int(x) for x in fields[1:]]
            except ValueError:
                continue
            if len(numbers) < 4:
                continue
            # user nice system idle iowait irq softirq steal [guest guest_nice]: guest is inside user/nice.
            first8 = numbers[:8]
            idle = numbers[3] + (numbers[4] if len(numbers) > 4 else 0)
            steal = numbers[7] if len(numbers) > 7 else None
            out["total"] = float(sum(first8))
            out["busy"] = float(sum(first8) - idle - (steal or 0))
            out["steal"] = float(steal) if steal is not None else None
        elif fields[0] == "procs_running" and len(fields) > 1 and fields[1].isdigit():
            out["procs_running"] = float(fields[1])
    return out


def _fields(text: str | None) -> list[str]:
    """The fields of a ``/proc/<pid>/stat`` line after the command name (field 2), which may hold spaces
    and parentheses: counted after its last ``)``, so that item 0 is field 3 (state); [] if unreadable."""
    return text[text.rfind(")") + 1 :].split() if text else []


def _int_field(text: str | None, number: int) -> int | None:
    """Field ``number`` (1-based, as proc(5) numbers them, 3 or above) as an integer; None if unreadable."""
    try:
        return int(_fields(text)[number - 3])
    except (IndexError, ValueError):
        return None


def task_state(text: str | None) -> str | None:
    """The state letter (field 3: ``R`` running, ``S`` sleeping, ``Z`` zombie, ...) of a
    ``/proc/<pid>/stat`` or ``/proc/<pid>/task/<tid>/stat`` line; None if unreadable."""
    fields = _fields(text)
    return fields[0] if fields else None


def parse_num_threads(text: str | None) -> int | None:
    """num_threads (field 20) of a ``/proc/<pid>/stat`` line; None if unreadable."""
    return _int_field(text, 20)


def parse_rss_pages(text: str | None) -> int | None:
    """rss (field 24, resident pages: what ``/proc/<pid>/statm`` and psutil's ``rss`` count) of a
    ``/proc/<pid>/stat`` line; None if unreadable."""
    return _int_field(text, 24)


def parse_pid_cpu_ticks(text: str | None) -> float | None:
    """utime + stime (fields 14 and 15, jiffies) of a ``/proc/<pid>/stat`` line; None if unreadable."""
    utime, stime = _int_field(text, 14), _int_field(text, 15)
    return float(utime + stime) if utime is not None and stime is not None else None


_ROLES: dict[str, MetricRole] = {
    "host.cpu_busy_s": MetricRole("cpu_time", "s", "cpu", domain="host_busy"),
    "host.cpu_steal_s": MetricRole("cpu_time", "s", "cpu", domain="host_steal"),
    "host.cpu_total_s": MetricRole("cpu_time", "s", "cpu", domain="host_total"),
    "host.procs_running": MetricRole("run_queue", "count", "cpu"),
    "host.procs_running_others": MetricRole("run_queue", "count", "cpu", domain="others"),
    "proc.cpu_s": MetricRole("cpu_time", "s", "cpu", domain="child"),
    "self.cpu_s": MetricRole("cpu_time", "s", "cpu", domain="self"),
}


def procstat_role(metric: str) -> MetricRole | None:
    return _ROLES.get(metric)


def others_running(
    procs_running: float | None, before: dict[str, set[str]], after: dict[str, set[str]]
) -> float | None:
    """``procs_running`` less the threads runnable at either read of our task lists; None where the count
    or every task list is missing."""
    if procs_running is None or not (before or after):
        return None
    ours = sum(len(before.get(key, set()) | after.get(key, set())) for key in before.keys() | after.keys())
    # A thread counted from a read that missed the instant of procs_running can make the rest negative, and
    # a negative number of tasks is no reading.
    return max(0.0, procs_running - ours)


class ProcStatCollector(Collector):
    name = "proc_stat"
    reads_at_boundaries = True

    @classmethod
    def role_of(cls, metric: str) -> MetricRole | None:
        return procstat_role(metric)

    def __init__(self, root: Path | str = "/", child_pid: int | None = None) -> None:
        super().__init__(root)
        self._lock = threading.Lock()
        self._child_pid = child_pid
        self._tck = clk_tck()
        # Every file is read through a kept descriptor, and each process's thread list is listed again only
        # when its thread count changed or a thread went: the reader's cost comes off the decode it watches.
        self._files = KeptFiles()
        self._threads: dict[str, list[tuple[str, Path]]] = {}
        self._sampled_pid: int | None = None

    def set_child_pid(self, pid: int | None) -> None:
        with self._lock:
            self._child_pid = pid

    def close(self) -> None:
        self._files.close()
        self._threads.clear()

    def available(self) -> Availability:
        text = read_text(self.path(PROC_STAT))
        if text is None:
            return Availability(False, f"{PROC_STAT} not readable (not Linux?)")
        totals = parse_stat_totals(text)
        if totals["busy"] is None:
            return Availability(False, f"{PROC_STAT} has no aggregate cpu line")
        missing = [k for k in ("steal", "procs_running") if totals[k] is None]
        note = f"; no {' or '.join(missing)} in it" if missing else ""
        return Availability(True, f"{PROC_STAT}: CPU time by kind, run queue{note}")

    def metrics(self) -> list[Metric]:
        return [
            Metric("host.cpu_busy_s", "s", "counter", "all CPUs' non-idle time (no steal)"),
            Metric("host.cpu_steal_s", "s", "counter", "time stolen by the hypervisor"),
            Metric("host.cpu_total_s", "s", "counter", "all CPUs' time of every kind"),
            Metric("host.procs_running", "count", "gauge", "runnable tasks (procs_running)"),
            Metric(
                "host.procs_running_others", "count", "gauge", "runnable tasks not edgeprof's or the child's"
            ),
            Metric("proc.cpu_s", "s", "counter", "benchmark child's utime + stime"),
            Metric("self.cpu_s", "s", "counter", "edgeprof's own utime + stime"),
        ]

    def _thread_stats(self, pid: str, n_threads: int | None) -> list[tuple[str, Path]] | None:
        """(tid, stat path) of every thread of ``pid``, listed again where the process's thread count is
        not the number listed last time; None when the task list cannot be read."""
        listed = self._threads.get(pid)
        if listed is None or n_threads is None or len(listed) != n_threads:
            folder = self.path(f"/proc/{pid}/task")
            try:
                names = sorted(entry.name for entry in folder.iterdir())
            except OSError:
                self._threads.pop(pid, None)
                return None
            self._files.drop_under(folder)  # threads that went keep no descriptor
            listed = [(tid, folder / tid / "stat") for tid in names]
            self._threads[pid] = listed
        return listed

    def _running_threads(self, pid: str, n_threads: int | None = None) -> set[str] | None:
        """Thread ids of ``pid`` (or ``self``) in state R now; None when its task list cannot be read."""
        listed = self._thread_stats(pid, n_threads)
        if listed is None:
            return None
        running: set[str] = set()
        for tid, stat_path in listed:
            state = task_state(self._files.read(stat_path))
            if state is None:  # the thread went: list the process again at the next reading
                self._threads.pop(pid, None)
            elif state == "R":
                running.add(tid)
        return running

    def _ours_running(self, pid: int | None, counts: dict[str, int | None]) -> dict[str, set[str]]:
        """The runnable threads of edgeprof and of the child, per task list that could be read."""
        found = {"self": self._running_threads("self", counts.get("self"))}
        if pid:
            found[str(pid)] = self._running_threads(str(pid), counts.get(str(pid)))
        return {key: tids for key, tids in found.items() if tids is not None}

    def sample(self) -> SampleValues:
        with self._lock:
            pid = self._child_pid
        if pid != self._sampled_pid:  # a new child: the last one's descriptors and thread list go
            if self._sampled_pid:
                self._files.drop_under(self.path(f"/proc/{self._sampled_pid}"))
                self._threads.pop(str(self._sampled_pid), None)
            self._sampled_pid = pid
        child_stat = self._files.read(self.path(f"/proc/{pid}/stat")) if pid else None
        own_stat = self._files.read(self.path(SELF_STAT))
        counts = {"self": parse_num_threads(own_stat), str(pid): parse_num_threads(child_stat)}
        # procs_running is one instant; our threads' states are read just before it and just after, and a
        # thread runnable at either read counts as ours. Read after only, a thread that went to sleep in
        # between (edgeprof's main thread handing the rep's end to this reader, the child between two
        # reps) would be counted as another process's task, at exactly the readings taken at rep ends.
        before = self._ours_running(pid, counts)
        totals = parse_stat_totals(self._files.read(self.path(PROC_STAT)) or "")
        after = self._ours_running(pid, counts)
        others = others_running(totals["procs_running"], before, after)
        child = parse_pid_cpu_ticks(child_stat)
        own = parse_pid_cpu_ticks(own_stat)

        def secs(ticks: float | None) -> float | None:
            return ticks / self._tck if ticks is not None else None

        return {
            "host.cpu_busy_s": secs(totals["busy"]),
            "host.cpu_steal_s": secs(totals["steal"]),
            "host.cpu_total_s": secs(totals["total"]),
            "host.procs_running": totals["procs_running"],
            "host.procs_running_others": others,
            "proc.cpu_s": secs(child),
            "self.cpu_s": secs(own),
        }
