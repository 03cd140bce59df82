"""The sampler: one thread polling every available collector at a fixed interval, batching rows to storage.

Ticks are scheduled on a grid (t0 + k·interval) so a slow tick does not shift every later one; a tick that
falls more than one interval behind is counted as missed rather than run late. A collector that fails
``max_failures`` times in a row is disabled with its reason, and the others go on. The clock, the wait and
the sink are injected, so tests drive the loop with a fake clock and no thread.

Off the grid, ``mark_boundary`` asks for one extra reading of the collectors whose counters bracket a
repetition (``Collector.reads_at_boundaries``) the moment a rep ends: a rep shorter than the interval, or
one that ends just before the run does, still has a counter reading after it. The extra reading is taken
on the sampler's own thread, so no collector is ever read by two threads at once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from edgeprof.collectors import Collector
from edgeprof.stats import nearest_rank


@dataclass(frozen=True)
class SampleRow:
    t_mono: float
    t_wall: float
    source: str
    metric: str
    value: float | None
    run_id: int | None


@dataclass
class CollectorState:
    collector: Collector
    ok: bool
    reason: str
    failures: int = 0
    disabled_reason: str | None = None
    last_error: str | None = None


@dataclass
class SamplerStats:
    ticks: int = 0
    boundary_ticks: int = 0
    missed_ticks: int = 0
    rows: int = 0
    flushes: int = 0
    cpu_s: float = 0.0
    wall_s: float = 0.0
    intervals_s: deque[float] = field(default_factory=lambda: deque(maxlen=20_000))

    def summary(self, target_s: float) -> dict[str, Any]:
        xs = list(self.intervals_s)
        return {
            "target_ms": target_s * 1000.0,
            "ticks": self.ticks,
            "boundary_ticks": self.boundary_ticks,
            "missed_ticks": self.missed_ticks,
            "rows": self.rows,
            "flushes": self.flushes,
            "interval_p50_ms": _ms(nearest_rank(xs, 0.5)),
            "interval_p99_ms": _ms(nearest_rank(xs, 0.99)),
            "interval_max_ms": _ms(max(xs) if xs else None),
            "interval_n": len(xs),
            "cpu_s": self.cpu_s,
            "cpu_pct_of_one_core": 100.0 * self.cpu_s / self.wall_s if self.wall_s > 0 else None,
        }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


class Sampler:
    def __init__(
        self,
        collectors: list[Collector],
        interval_s: float,
        sink: Callable[[list[SampleRow]], None],
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        max_failures: int = 5,
        flush_every_s: float = 2.0,
        flush_max_rows: int = 5000,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval must be positive")
        self.interval_s = interval_s
        self.sink = sink
        self.clock = clock
        self.wall = wall
        self.max_failures = max_failures
        self.flush_every_s = flush_every_s
        self.flush_max_rows = flush_max_rows
        self.states: list[CollectorState] = []
        for c in collectors:
            try:
                ok, reason = c.available()
            except Exception as exc:  # noqa: BLE001 - a broken probe makes the source unavailable, not fatal
                ok, reason = False, f"availability check failed: {type(exc).__name__}: {exc}"
            self.states.append(CollectorState(collector=c, ok=ok, reason=reason))
        self.stats = SamplerStats()
        self.run_id: int | None = None
        self._buffer: list[SampleRow] = []
        self._last_flush = clock()
        self._last_tick: float | None = None
        self._next_tick: float | None = None
        self._lock = threading.Lock()
        self._flush_lock = threading.RLock()
        self._boundary_done = threading.Condition(self._lock)
        self._boundary_requested = 0  # both under _lock: requests made, and the last one served
        self._boundary_served = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.sink_errors: list[str] = []

    # -- control ----------------------------------------------------------------------------------------
    def set_run(self, run_id: int | None) -> None:
        with self._lock:
            self.run_id = run_id

    def set_child_pid(self, pid: int | None) -> None:
        for state in self.states:
            setter = getattr(state.collector, "set_child_pid", None)
            if callable(setter):
                setter(pid)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="edgeprof-sampler", daemon=True)
        self._thread.start()

    def mark_boundary(self) -> None:
        """A boundary reading now (from any thread; the sampler's thread takes it within milliseconds).
        Without a running thread (tests driving ``step``) it is taken here and now."""
        if self._thread is None:
            self._boundary_tick()
            return
        with self._lock:
            self._boundary_requested += 1
        self._wake.set()

    def settle(self, timeout_s: float = 2.0) -> bool:
        """Wait until every boundary reading asked for so far has been taken (True), or ``timeout_s``
        passed: a run's last reading must carry its run id, so ``set_run(None)`` waits for it."""
        deadline = time.monotonic() + timeout_s
        with self._boundary_done:
            target = self._boundary_requested
            while self._boundary_served < target and self._thread is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._boundary_done.wait(remaining)
        return True

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.flush()
        for state in self.states:
            # closing must not mask the sweep's own outcome
            with contextlib.suppress(Exception):
                state.collector.close()

    # -- the loop ---------------------------------------------------------------------------------------
    def _loop(self) -> None:
        cpu0 = time.thread_time()
        wall0 = self.clock()
        while not self._stop.is_set():
            with self._lock:
                target = self._boundary_requested
            if target > self._boundary_served:
                self._boundary_tick()
                with self._boundary_done:
                    self._boundary_served = target
                    self._boundary_done.notify_all()
            delay = self.step()
            self._wake.wait(delay)
            self._wake.clear()
            self.stats.cpu_s = time.thread_time() - cpu0
            self.stats.wall_s = self.clock() - wall0

    def step(self) -> float:
        """Run the tick that is due (if any) and return how long to wait for the next one."""
        now = self.clock()
        if self._next_tick is None:
            self._next_tick = now
        if now + 1e-9 < self._next_tick:
            return self._next_tick - now
        behind = now - self._next_tick
        if behind >= self.interval_s:
            skipped = int(behind // self.interval_s)
            self.stats.missed_ticks += skipped
            self._next_tick += skipped * self.interval_s
        self.tick()
        self._next_tick += self.interval_s
        return max(0.0, self._next_tick - self.clock())

    def tick(self) -> None:
        """Poll every enabled collector once."""
        t = self.clock()
        if self._last_tick is not None:
            self.stats.intervals_s.append(t - self._last_tick)
        self._last_tick = t
        self.stats.ticks += 1
        self._poll(t, boundary=False)

    def _boundary_tick(self) -> None:
        # Off the grid: neither the interval statistics nor the schedule see it.
        self.stats.boundary_ticks += 1
        self._poll(self.clock(), boundary=True)

    def _poll(self, t: float, boundary: bool) -> None:
        t_wall = self.wall()
        with self._lock:
            run_id = self.run_id
        rows: list[SampleRow] = []
        for state in self.states:
            if not state.ok or state.disabled_reason is not None:
                continue
            if boundary and not getattr(state.collector, "reads_at_boundaries", False):
                continue
            values, error = state.collector.safe_sample()
            if error is not None:
                state.failures += 1
                state.last_error = error
                if state.failures >= self.max_failures:
                    state.disabled_reason = f"disabled after {state.failures} failures in a row: {error}"
                continue
            state.failures = 0
            name = state.collector.name
            rows.extend(SampleRow(t, t_wall, name, metric, value, run_id) for metric, value in values.items())
        with self._lock:
            self._buffer.extend(rows)
        self.stats.rows += len(rows)
        if len(self._buffer) >= self.flush_max_rows or t - self._last_flush >= self.flush_every_s:
            self.flush()

    def flush_now(self) -> None:
        """Write what is buffered now (from any thread): a run's samples are stored before analysis."""
        self.flush()

    def flush(self) -> None:
        # Held across take-and-write, so a flush returns only once every earlier row is in storage.
        with self._flush_lock:
            with self._lock:
                batch, self._buffer = self._buffer, []
            if batch:
                try:
                    self.sink(batch)
                    self.stats.flushes += 1
                except Exception as exc:  # noqa: BLE001 - telemetry loss is reported, never fatal to the sweep
                    self.sink_errors.append(f"{type(exc).__name__}: {exc}")
            self._last_flush = self.clock()

    def states_summary(self) -> list[dict[str, Any]]:
        out = []
        for s in self.states:
            out.append(
                {
                    "name": s.collector.name,
                    "ok": s.ok and s.disabled_reason is None,
                    "reason": s.disabled_reason or s.reason,
                    "last_error": s.last_error,
                }
            )
        return out
