"""The proc_stat collector (collectors/procstat.py): the /proc/stat parser on this project's real VM capture,
with values worked out by hand, a /proc/<pid>/stat line with an awkward command, and an injected /proc."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.captures import CAPTURES, read_capture
from support.fakes import FakeRoot

from edgeprof.collectors.procstat import (
    ProcStatCollector,
    others_running,
    parse_pid_cpu_ticks,
    parse_stat_totals,
)

VM_CAPTURE = CAPTURES / "vm_docker_amd-epyc_2cpu"


def test_parse_stat_totals_on_the_real_vm_capture() -> None:
    text = "\n".join(read_capture("proc_stat.txt", VM_CAPTURE))
    totals = parse_stat_totals(text)
    # cpu  59552 0 6060 24523 273 0 40 94 0 0 (by hand): total = sum of the first 8 = 90542,
    # idle = 24523 + 273, steal = 94, busy = 90542 - 24796 - 94 = 65652
    assert totals["total"] == 90542.0
    assert totals["steal"] == 94.0
    assert totals["busy"] == 65652.0


def test_parse_pid_stat_with_a_command_holding_spaces_and_parentheses() -> None:
    # synthetic line in the kernel's format; fields 14/15 (utime, stime) = 250, 50
    line = "4242 (llama (worker) 1) R 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 100 0 0"
    assert parse_pid_cpu_ticks(line) == 300.0
    assert parse_pid_cpu_ticks("garbage") is None and parse_pid_cpu_ticks(None) is None


def test_collector_reads_an_injected_proc_in_seconds(tmp_path: Path) -> None:
    # synthetic /proc/stat (only user + idle + steal used) and the child's and our own /proc/<pid>/stat
    fake = FakeRoot(tmp_path)
    fake.proc_stat(busy=300, total=1000, steal=20, running=3)
    fake.process(77, "python3", 250)
    fake.process(1, "edgeprof", 0, state="S", ppid=0, folder="self")
    collector = ProcStatCollector(tmp_path, child_pid=77)
    assert collector.available().ok
    tck = float(os.sysconf("SC_CLK_TCK"))
    values = collector.sample()
    assert values["host.cpu_busy_s"] == pytest.approx(300 / tck)
    assert values["host.cpu_steal_s"] == pytest.approx(20 / tck)
    assert values["host.cpu_total_s"] == pytest.approx(1000 / tck)
    assert values["host.procs_running"] == 3.0
    assert values["proc.cpu_s"] == pytest.approx(250 / tck)
    assert values["self.cpu_s"] == 0.0
    assert ProcStatCollector(tmp_path / "nothing").available().ok is False


def _task(fake: FakeRoot, pid: str, tid: int, state: str) -> None:
    """One thread's /proc/<pid>/task/<tid>/stat line (synthetic), in the kernel's format."""
    line = f"{tid} (t{tid}) {state} 1 1 1 0 -1 0 0 0 0 0 1 0 0 0 20 0 1 0 1\n"
    fake.write(f"proc/{pid}/task/{tid}/stat", line)


def test_others_running_leaves_out_the_childs_and_edgeprofs_runnable_threads(tmp_path: Path) -> None:
    # synthetic: 5 runnable tasks, of which the child's 2 compute threads and edgeprof's reader and main
    # thread; one child thread sleeps. What is left is one task of another process.
    fake = FakeRoot(tmp_path)
    fake.proc_stat(busy=300, total=1000, steal=0, running=5)
    fake.process(77, "llama", 250)
    fake.process(1, "edgeprof", 0, folder="self")
    for tid, state in ((77, "R"), (78, "R"), (79, "S")):
        _task(fake, "77", tid, state)
    for tid, state in ((1, "R"), (2, "R"), (3, "S")):
        _task(fake, "self", tid, state)
    values = ProcStatCollector(tmp_path, child_pid=77).sample()
    assert values["host.procs_running"] == 5.0
    assert values["host.procs_running_others"] == 1.0
    # without any task list the count is unknown, never the raw run queue
    bare = FakeRoot(tmp_path / "bare")
    bare.proc_stat(busy=1, total=10, steal=0, running=3)
    assert ProcStatCollector(bare.root).sample()["host.procs_running_others"] is None


def test_a_thread_of_ours_runnable_at_either_read_is_ours() -> None:
    # synthetic task sets: edgeprof's main thread (1) was runnable when the count was taken and asleep by
    # the read after it; the child's thread ran throughout. Read once after the count, it would be another
    # process's task.
    before = {"self": {"1", "2"}, "77": {"77"}}
    after = {"self": {"2"}, "77": {"77"}}
    assert others_running(3.0, before, after) == 0.0
    assert others_running(3.0, after, after) == 1.0
    # a task of another process stays: 4 runnable, 3 of them ours
    assert others_running(4.0, before, after) == 1.0
    # the same thread in both reads is one thread
    assert others_running(2.0, {"self": {"1"}}, {"self": {"1"}}) == 1.0
    assert others_running(None, before, after) is None
    assert others_running(3.0, {}, {}) is None


def test_the_collector_reads_our_threads_on_both_sides_of_the_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # synthetic: the main thread sleeps by the second read of edgeprof's task list
    fake = FakeRoot(tmp_path)
    fake.proc_stat(busy=300, total=1000, steal=0, running=3)
    fake.process(77, "llama", 250)
    fake.process(1, "edgeprof", 0, folder="self")
    # each read lists edgeprof's task list, then the child's
    reads = iter([{"1", "2"}, {"77"}, {"2"}, {"77"}])
    order: list[str] = []

    def running(self: ProcStatCollector, pid: str, n_threads: int | None = None) -> set[str]:
        order.append(pid)
        return next(reads)

    monkeypatch.setattr(ProcStatCollector, "_running_threads", running)
    assert ProcStatCollector(tmp_path, child_pid=77).sample()["host.procs_running_others"] == 0.0
    assert order == ["self", "77", "self", "77"]
