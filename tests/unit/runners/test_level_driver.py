"""Both serving runners drive their levels with one piece of code (``levels.LevelDriver``): each gives only
where its requests go, what they carry and what it polls, never a level loop, a deadline or a judgement of
its own; the shared driver sends warm-ups then the measured level and judges it (a stub's requests, no
server)."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from edgeprof.runners import levels, llama_server, loadgen, openai_api
from edgeprof.runners.llama_server import ServingResult

pytestmark = pytest.mark.timeout(60)

SHARED = ("level", "levels", "phase", "left", "timed_out")


def _drivers() -> list[type]:
    return [
        cls
        for module in (llama_server, openai_api)
        for _name, cls in inspect.getmembers(module, inspect.isclass)
        if cls.__module__ == module.__name__ and issubclass(cls, levels.LevelDriver)
    ]


def test_each_serving_runner_has_one_driver_and_it_copies_no_level_code() -> None:
    drivers = _drivers()
    assert len(drivers) == 2  # one per serving runner module
    for cls in drivers:
        assert [name for name in SHARED if name in vars(cls)] == [], cls


class _Stub(levels.LevelDriver):
    """Records what the shared driver asks of a runner, and answers every level with ok requests."""

    def __init__(self, job: dict[str, Any]) -> None:
        res = ServingResult(status="error", reason=None, t_spawn=0.0)
        super().__init__(job, res, "http://x", 1e18, None, None)
        self.calls: list[tuple[str, int | None, int, int]] = []
        self.counter_reads = 0

    async def counters(self) -> dict[str, float] | None:
        self.counter_reads += 1
        return {"reads": float(self.counter_reads)}

    async def level(self, kind: str, n: int | None, duration: float | None, first_idx: int, c: int) -> bool:
        self.calls.append((kind, n, first_idx, c))
        recs = [loadgen.RequestRecord(idx=first_idx + i, kind=kind, client=0) for i in range(n or 1)]
        for rec in recs:
            rec.status = "ok"
        self.res.records.extend(recs)
        return True


def test_the_shared_driver_runs_warm_ups_then_the_measured_level_between_two_counter_reads() -> None:
    job = {"serving": {"requests": 6, "warmup_requests": 2}, "params": {"concurrency": 3}, "workload": {},
           "timeout_s": 10}  # fmt: skip
    stub = _Stub(job)
    assert asyncio.run(stub.levels(first_idx=1))
    assert stub.calls == [("warmup", 2, 1, 3), ("measured", 6, 3, 3)]
    assert stub.res.metrics_before == {"reads": 1.0} and stub.res.metrics_after == {"reads": 2.0}
    assert (stub.res.status, stub.res.reason) == ("ok", None)
