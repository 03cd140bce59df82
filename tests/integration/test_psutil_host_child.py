"""PsutilHostCollector sampling a real short-lived child process: its RSS and CPU while it runs, None once it
is a zombie, reaped, or its pid was never alive."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from edgeprof.collectors import PsutilHostCollector


def test_child_process_then_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2)"])
    try:
        collector = PsutilHostCollector()
        collector.set_child_pid(child.pid)
        sample = collector.sample()
        rss, cpu = sample["proc.rss_mb"], sample["proc.cpu_pct"]
        assert rss is not None and rss > 0
        assert cpu is not None and cpu >= 0
        child.kill()
        # Dead but not yet reaped (a zombie): psutil would still answer with RSS 0; that must read None.
        _wait_zombie(child.pid)
        assert collector.sample()["proc.rss_mb"] is None
        child.wait(timeout=5)
        sample = collector.sample()
        assert sample["proc.rss_mb"] is None and sample["proc.cpu_pct"] is None
        assert collector.safe_sample().error is None
        # Setting a pid that is already gone is accepted, and reads None too.
        collector.set_child_pid(child.pid)
        assert collector.sample()["proc.rss_mb"] is None
        collector.set_child_pid(None)
        assert collector.sample()["proc.cpu_pct"] is None
        collector.close()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=5)


def _wait_zombie(pid: int) -> None:
    """Until the killed child is a zombie; bounded by iterations, never by a clock assertion."""
    for _ in range(5_000):
        time.sleep(0.001)
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
    pytest.fail("child never became a zombie")
