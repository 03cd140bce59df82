"""The sampler loop, driven by a fake clock: grid ticks, missed ticks, batching, failing collectors."""

from __future__ import annotations

from edgeprof.collectors import Availability, Collector, Metric, SampleValues
from edgeprof.telemetry import Sampler, SampleRow


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Counter(Collector):
    name = "counter"

    def __init__(self) -> None:
        super().__init__("/")
        self.n = 0

    def available(self) -> Availability:
        return Availability(True, "fake")

    def metrics(self) -> list[Metric]:
        return [Metric("fake.count", "count", "counter")]

    def sample(self) -> SampleValues:
        self.n += 1
        return {"fake.count": float(self.n), "fake.missing": None}


class Broken(Collector):
    name = "broken"

    def available(self) -> Availability:
        return Availability(True, "claims to work")

    def metrics(self) -> list[Metric]:
        return []

    def sample(self) -> SampleValues:
        raise OSError("EIO reading /sys/whatever")


class Absent(Collector):
    name = "absent"

    def available(self) -> Availability:
        return Availability(False, "no such hardware")

    def metrics(self) -> list[Metric]:
        return []

    def sample(self) -> SampleValues:  # pragma: no cover - must never be called
        raise AssertionError("sampled an unavailable collector")


def make(clock: FakeClock, sink: list[list[SampleRow]], **kw) -> Sampler:
    return Sampler(
        [Counter(), Broken("/"), Absent("/")], 0.2, sink.append, clock=clock, wall=lambda: 0.0, **kw
    )


def test_ticks_follow_the_grid_and_late_ticks_are_counted_missed() -> None:
    clock, batches = FakeClock(), []
    s = make(clock, batches, flush_every_s=100.0)
    assert abs(s.step() - 0.2) < 1e-6  # first tick at once, the next one interval later
    for _ in range(4):
        clock.t += 0.2
        s.step()
    assert s.stats.ticks == 5 and s.stats.missed_ticks == 0
    clock.t += 0.2 * 3.5  # stalled: the ticks due at +0.2, +0.4, +0.6 are late; one runs now, two are missed
    s.step()
    assert s.stats.missed_ticks == 2
    assert s.stats.ticks == 6
    clock.t += 0.05  # not due yet
    assert s.step() > 0 and s.stats.ticks == 6
    intervals = list(s.stats.intervals_s)
    assert all(abs(i - 0.2) < 1e-9 for i in intervals[:4])


def test_samples_are_batched_and_none_is_kept_as_none() -> None:
    clock, batches = FakeClock(), []
    s = make(clock, batches, flush_every_s=1.0)
    s.set_run(7)
    for _ in range(5):  # t = 0 .. 0.8: below the flush interval
        s.step()
        clock.t += 0.2
    assert batches == []
    s.step()  # t = 1.0: flush
    assert len(batches) == 1
    rows = batches[0]
    assert {r.metric for r in rows} == {"fake.count", "fake.missing"}
    assert all(r.run_id == 7 for r in rows)
    assert [r.value for r in rows if r.metric == "fake.missing"] == [None] * 6
    s.flush()
    assert len(batches) == 1  # nothing new: no empty batch written


def test_a_failing_collector_is_disabled_with_its_reason_and_the_others_go_on() -> None:
    clock, batches = FakeClock(), []
    s = make(clock, batches, max_failures=3, flush_every_s=0.0)
    for _ in range(10):
        s.step()
        clock.t += 0.2
    states = {st["name"]: st for st in s.states_summary()}
    assert states["broken"]["ok"] is False and "disabled after 3 failures" in states["broken"]["reason"]
    assert "EIO" in states["broken"]["reason"]
    assert states["absent"]["ok"] is False and states["absent"]["reason"] == "no such hardware"
    assert states["counter"]["ok"] is True
    assert sum(1 for b in batches for r in b if r.metric == "fake.count") == 10


def test_a_failing_sink_loses_the_batch_but_never_raises() -> None:
    clock = FakeClock()

    def sink(_rows: list[SampleRow]) -> None:
        raise RuntimeError("database is locked")

    s = Sampler([Counter()], 0.2, sink, clock=clock, flush_every_s=0.0)
    s.step()
    assert s.sink_errors and "database is locked" in s.sink_errors[0]


def test_the_thread_starts_and_stops(tmp_path) -> None:
    import time

    batches: list[list[SampleRow]] = []
    s = Sampler([Counter()], 0.05, batches.append, flush_every_s=0.1)
    s.start()
    deadline = time.monotonic() + 5
    while s.stats.ticks < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    s.stop()
    assert s.stats.ticks >= 3
    assert sum(len(b) for b in batches) == s.stats.rows  # stop() flushed everything


class BoundaryCounter(Counter):
    """A cumulative counter the sampler may read once more at a rep's end."""

    name = "boundary"
    reads_at_boundaries = True

    def sample(self) -> SampleValues:
        self.n += 1
        return {"boundary.count": float(self.n)}


def test_a_boundary_reading_polls_only_boundary_collectors_off_the_grid() -> None:
    clock, batches = FakeClock(), []
    s = Sampler([Counter(), BoundaryCounter()], 0.2, batches.append, clock=clock, flush_every_s=100.0)
    s.set_run(3)
    s.step()
    clock.t = 1000.05
    s.mark_boundary()  # no thread: taken here and now, at its own time
    clock.t = 1000.2
    s.step()
    s.flush()
    rows = [r for b in batches for r in b]
    assert [(r.t_mono, r.value) for r in rows if r.metric == "boundary.count"] == [
        (1000.0, 1.0),
        (1000.05, 2.0),
        (1000.2, 3.0),
    ]
    assert [r.t_mono for r in rows if r.metric == "fake.count"] == [1000.0, 1000.2]  # gauges stay on the grid
    assert all(r.run_id == 3 for r in rows)
    assert s.stats.ticks == 2 and s.stats.boundary_ticks == 1
    assert len(s.stats.intervals_s) == 1 and abs(s.stats.intervals_s[0] - 0.2) < 1e-9


def test_settle_waits_for_the_boundary_reading_the_thread_takes() -> None:
    batches: list[list[SampleRow]] = []
    # A long interval: only the first grid tick happens during the test, so the second reading is the
    # boundary one, and settle() must have waited for it before the run id is cleared.
    s = Sampler([BoundaryCounter()], 60.0, batches.append, flush_every_s=100.0)
    s.set_run(9)
    s.start()
    try:
        s.mark_boundary()
        assert s.settle(timeout_s=10.0)
        s.set_run(None)
    finally:
        s.stop()
    rows = [r for b in batches for r in b]
    assert s.stats.boundary_ticks == 1
    assert [r.run_id for r in rows] == [9, 9]
