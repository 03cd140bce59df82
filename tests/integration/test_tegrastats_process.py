"""The tegrastats collector's child process, driving a synthetic tegrastats that replays real capture lines.

``tests/fixtures/fake_tegrastats/tegrastats`` is a test double (see its header): it prints lines of a real
capture (``tests/fixtures/captures/tegrastats``) at ``--interval`` and can die or hang on request.
Expected values come from the parser applied to the same lines, so these tests check the process plumbing
(replay, latest record, freshness, restarts, gaps, clean shutdown), not the parser, which has its own tests.

Every wait is a bounded poll with a generous deadline; nothing asserts on how long anything took.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.captures import TEGRASTATS_CAPTURES, capture_path
from support.paths import FIXTURES

from edgeprof.collectors.base import SampleValues
from edgeprof.collectors.tegrastats import TegrastatsCollector
from edgeprof.collectors.tegrastats_parse import parse_line, record_to_metrics

FAKE = FIXTURES / "fake_tegrastats" / "tegrastats"
INTERVAL_MS = 50
DEADLINE_S = 8.0


def capture_lines(name: str) -> list[str]:
    path = capture_path(name, TEGRASTATS_CAPTURES)
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#")]


def expected(lines: list[str]) -> list[dict[str, float | None]]:
    return [record_to_metrics(parse_line(ln)) for ln in lines]


def matches(values: SampleValues, exp: dict[str, float | None]) -> bool:
    return all(name in values and values[name] == value for name, value in exp.items())


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@pytest.fixture
def replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., TegrastatsCollector]]:
    """``replay(lines, **env)`` -> a collector running the fake over ``lines``; closed after the test."""
    # The fake's '#!/usr/bin/env python3' finds this interpreter first (a venv has a python3 next to it).
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for var in ("DIE_AFTER", "HANG_AFTER", "IGNORE_TERM", "STATE", "LINES"):
        monkeypatch.delenv(f"FAKE_TEGRASTATS_{var}", raising=False)
    made: list[TegrastatsCollector] = []

    def make(lines: list[str], term_timeout_s: float = 2.0, **env: str) -> TegrastatsCollector:
        source = tmp_path / f"lines{len(made)}.txt"
        source.write_text("".join(f"{ln}\n" for ln in lines), encoding="utf-8")
        monkeypatch.setenv("FAKE_TEGRASTATS_LINES", str(source))
        for key, value in env.items():
            monkeypatch.setenv(f"FAKE_TEGRASTATS_{key.upper()}", value)
        collector = TegrastatsCollector(
            executable=str(FAKE), interval_ms=INTERVAL_MS, term_timeout_s=term_timeout_s
        )
        made.append(collector)
        return collector

    yield make
    for collector in made:
        collector.close()


def sample_until(
    collector: TegrastatsCollector, predicate: Callable[[SampleValues], bool], what: str
) -> SampleValues:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        values = collector.sample()
        if predicate(values):
            return values
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}; last sample {values}")
        time.sleep(INTERVAL_MS / 1000.0 / 2)


def test_agx_orin_values_equal_the_parser(replay: Callable[..., TegrastatsCollector]) -> None:
    lines = capture_lines("agx-orin-32gb_jp6_1.txt")
    exp = expected(lines)
    collector = replay(lines)
    ok, reason = collector.available()
    assert ok, reason
    assert "every 50 ms" in reason

    declared = {m.name: m for m in collector.metrics()}
    assert set(declared) == set(exp[0])
    assert declared["temp.tj_c"].unit == "C"
    assert declared["power.vin_sys_5v0_mw"].unit == "mW"
    assert declared["mem.ram_used_mb"].unit == "MB"
    assert declared["cpu5.util_pct"].unit == "pct"

    for _ in range(3):
        values = sample_until(collector, lambda v: v["temp.tj_c"] is not None, "a fresh reading")
        assert any(matches(values, e) for e in exp), values
        assert set(values) == set(exp[0])
    assert values["temp.tj_c"] == 53.062
    assert values["mem.ram_used_mb"] == 29114
    assert values["power.vin_sys_5v0_mw"] == 4767
    assert values["gpu.freq_mhz"] == 305
    assert collector.restarts == 0
    assert collector.gaps == []


def test_orin_nano_replays_every_line_and_notes_root(replay: Callable[..., TegrastatsCollector]) -> None:
    lines = capture_lines("orin-nano-8gb_jp6_1.txt")
    exp = expected(lines)
    assert len(exp) >= 2
    assert exp[0]["power.vdd_in_mw"] != exp[1]["power.vdd_in_mw"]
    # The non-root-like line first: the reason must say what root would add.
    collector = replay([lines[1], lines[0]])
    ok, reason = collector.available()
    assert ok, reason
    assert "root" in reason and "EMC" in reason

    seen: set[int] = set()

    def both_seen(values: SampleValues) -> bool:
        for i, e in enumerate(exp[:2]):
            if values["power.vdd_in_mw"] is not None and matches(values, e):
                seen.add(i)
        return seen == {0, 1}

    sample_until(collector, both_seen, "both replayed lines")
    assert {exp[0]["power.vdd_in_mw"], exp[1]["power.vdd_in_mw"]} == {12479, 4824}
    assert exp[0]["temp.tj_c"] == 53.968
    assert exp[0]["mem.ram_used_mb"] == 6185


def test_dead_child_is_restarted_and_the_gap_recorded(
    replay: Callable[..., TegrastatsCollector], tmp_path: Path
) -> None:
    lines = capture_lines("orin-nano-8gb_jp6_1.txt")
    exp = expected(lines)
    state = tmp_path / "died-once"
    collector = replay(lines, die_after="3", state=str(state))
    ok, reason = collector.available()
    assert ok, reason
    first_pid = collector.pid

    wait_for(lambda: state.exists(), "the fake to die once")
    wait_for(lambda: collector.restarts >= 1 and len(collector.gaps) >= 1, "a restart and a closed gap")
    assert collector.pid != first_pid
    start, end = collector.gaps[0]
    assert start < end
    assert collector.last_error is not None and "exited with code 1" in collector.last_error

    # Sampling goes on with fresh values from the new child: two readings separated by new lines.
    collector.sample()
    seq_before = collector.records
    wait_for(lambda: collector.records > seq_before, "a line from the restarted child")
    values = collector.sample()
    assert values["power.vdd_in_mw"] is not None
    assert any(matches(values, e) for e in exp), values


def test_stale_record_reads_none(replay: Callable[..., TegrastatsCollector]) -> None:
    lines = capture_lines("agx-orin-32gb_jp6_1.txt")
    collector = replay(lines, hang_after="1")
    ok, reason = collector.available()
    assert ok, reason
    first = collector.sample()
    assert first["temp.tj_c"] == expected(lines)[0]["temp.tj_c"]  # new since the last sample: fresh
    time.sleep(3 * INTERVAL_MS / 1000.0)
    stale = collector.sample()
    assert set(stale) == set(first)
    assert all(v is None for v in stale.values()), stale
    assert collector.restarts == 0  # a hung child is alive: no restart


def test_close_kills_and_reaps_the_child(replay: Callable[..., TegrastatsCollector]) -> None:
    collector = replay(capture_lines("agx-orin-32gb_jp6_1.txt"))
    assert collector.available().ok
    pid = collector.pid
    assert pid is not None and pid_alive(pid)
    collector.close()
    assert not pid_alive(pid)  # gone and reaped: not even a zombie keeps the pid
    assert collector.pid is None
    assert collector._thread is None
    values = collector.sample()  # after close: no restart, no exception, no data
    assert all(v is None for v in values.values())
    assert collector.pid is None


def test_close_escalates_to_sigkill(replay: Callable[..., TegrastatsCollector]) -> None:
    collector = replay(capture_lines("agx-orin-32gb_jp6_1.txt"), term_timeout_s=0.3, ignore_term="1")
    assert collector.available().ok
    pid = collector.pid
    assert pid is not None
    collector.close()
    assert not pid_alive(pid)


def test_child_failing_at_start_is_unavailable(
    replay: Callable[..., TegrastatsCollector], monkeypatch: pytest.MonkeyPatch
) -> None:
    collector = replay(["unused"])
    monkeypatch.delenv("FAKE_TEGRASTATS_LINES")  # the fake now exits with code 2 and a message on stderr
    ok, reason = collector.available()
    assert not ok
    assert "exited with code 2 before printing a line" in reason
    assert "FAKE_TEGRASTATS_LINES" in reason
    assert collector.pid is None
