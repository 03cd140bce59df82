"""Kernel files re-read through a kept descriptor (collectors/base.py ``KeptFiles``) and the readers that use
them: fresh content at every reading, no descriptor kept for a file outside the live /proc and /sys, none
kept for a thread or process that went, and the thread lists of proc_stat following threads that come and
go. Read on this machine's own /proc: nothing here is a capture."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import psutil

from edgeprof.collectors.base import KeptFiles
from edgeprof.collectors.procstat import ProcStatCollector, parse_num_threads, parse_pid_cpu_ticks
from edgeprof.collectors.psutil_host import PsutilHostCollector


def _burn_cpu_s(seconds: float) -> None:
    """This thread busy for ``seconds`` of its own CPU time (bounded by CPU time, never by a wall clock)."""
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


def test_a_live_proc_file_is_kept_open_and_printed_afresh() -> None:
    files = KeptFiles()
    path = Path(f"/proc/self/task/{threading.get_native_id()}/stat")
    first = parse_pid_cpu_ticks(files.read(path))
    fd = files._fds[str(path)]
    _burn_cpu_s(0.2)
    second = parse_pid_cpu_ticks(files.read(path))
    assert files._fds[str(path)] == fd  # the same descriptor read twice
    assert first is not None and second is not None and second - first >= 5  # 0.2 s = 20 ticks at USER_HZ 100
    files.close()
    assert files._fds == {}


def test_a_file_outside_the_live_kernel_folders_is_read_afresh_and_never_kept(tmp_path: Path) -> None:
    files = KeptFiles()
    path = tmp_path / "proc" / "stat"
    path.parent.mkdir()
    path.write_text("cpu  1 0 0 1\n")
    assert files.read(path) == "cpu  1 0 0 1"
    replacement = tmp_path / "new"
    replacement.write_text("cpu  2 0 0 2\n")
    replacement.replace(path)  # a new file at the same path: a kept descriptor would still read the old one
    assert files.read(path) == "cpu  2 0 0 2"
    assert files._fds == {}
    assert files.read(tmp_path / "absent") is None


def test_a_thread_that_went_reads_none_and_keeps_no_descriptor() -> None:
    files = KeptFiles()
    ids: list[int] = []
    done = threading.Event()
    worker = threading.Thread(target=lambda: (ids.append(threading.get_native_id()), done.wait(30)))
    worker.start()
    while not ids:
        time.sleep(0.001)
    path = Path(f"/proc/self/task/{ids[0]}/stat")
    assert files.read(path) is not None and str(path) in files._fds
    done.set()
    worker.join(timeout=30)
    # join returns once the thread's Python code is done; the kernel task ends a moment later
    for _ in range(5_000):
        if files.read(path) is None:
            break
        time.sleep(0.001)
    assert files.read(path) is None
    assert str(path) not in files._fds


def test_proc_stat_lists_the_threads_again_when_their_number_changes() -> None:
    collector = ProcStatCollector("/")
    collector.sample()
    before = len(collector._threads["self"])
    assert before == parse_num_threads(Path("/proc/self/stat").read_text())
    done = threading.Event()
    extra = [threading.Thread(target=done.wait, args=(30,)) for _ in range(3)]
    for thread in extra:
        thread.start()
    try:
        collector.sample()
        assert len(collector._threads["self"]) == before + 3
    finally:
        done.set()
        for thread in extra:
            thread.join(timeout=30)
    for _ in range(5_000):  # until the kernel tasks of the joined threads are gone
        if parse_num_threads(Path("/proc/self/stat").read_text()) == before:
            break
        time.sleep(0.001)
    collector.sample()
    assert len(collector._threads["self"]) == before
    kept = set(collector._files._fds)
    assert "/proc/stat" in kept and "/proc/self/stat" in kept
    collector.close()
    assert collector._files._fds == {}


def test_the_childs_rss_and_cpu_time_are_what_psutil_reads() -> None:
    collector = PsutilHostCollector(child_pid=os.getpid())
    collector.sample()
    _burn_cpu_s(0.1)
    values = collector.sample()
    rss_mb = psutil.Process().memory_info().rss / (1024.0 * 1024.0)
    assert values["proc.rss_mb"] is not None and abs(values["proc.rss_mb"] - rss_mb) < 0.1 * rss_mb
    assert values["proc.cpu_pct"] is not None and values["proc.cpu_pct"] > 0
    assert f"/proc/{os.getpid()}/stat" in collector._files._fds
    collector.set_child_pid(None)
    assert collector.sample()["proc.rss_mb"] is None
    assert f"/proc/{os.getpid()}/stat" not in collector._files._fds  # the reading thread let it go
