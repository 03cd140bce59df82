"""One serving config's levels, for every serving runner: the one level runner that llama-server's runner
and the openai runner both drive (``LevelDriver``); each runner gives only what differs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from edgeprof.runners.loadgen import COMPLETION, Endpoint, LoadSpec, judge_level, run_level


class LevelDriver:
    """The levels of one serving config, whichever runner serves it: warm-up requests at the level's
    concurrency (so every slot has run once), the server's counters read around the measured level (their
    deltas are the level's own), then what the level's requests say (``judge_level``). Each level is one
    ``run_level`` under what is left of the config's deadline; a config past it is ``timeout``.

    A runner gives what differs: where requests go (``url``), how a streamed reply is read (``endpoint``),
    the headers, each request's payload (``payload``), what is polled while a level runs (``poll``) and how
    its counters are read (``counters``). ``res`` is the runner's result (``llama_server.ServingResult``):
    records, phases, the level's span and counters, status and reason land on it."""

    endpoint: Endpoint = COMPLETION
    headers: dict[str, str] | None = None

    def __init__(
        self,
        job: dict[str, Any],
        res: Any,
        url: str,
        deadline: float,
        on_event: Callable[[dict[str, Any]], None] | None,
        heartbeat: Callable[[], None] | None,
    ) -> None:
        self.job, self.res, self.url, self.deadline = job, res, url, deadline
        self.on_event, self.heartbeat = on_event, heartbeat
        self.serving: dict[str, Any] = job["serving"]
        self.req_timeout = float(self.serving.get("request_timeout_s", 60.0))
        self.conc = int(job["params"].get("concurrency") or 1)

    # -- what a runner gives --------------------------------------------------------------------------------
    def payload(self, idx: int) -> dict[str, Any]:
        raise NotImplementedError

    async def poll(self, kind: str, concurrency: int) -> dict[str, float] | None:
        """Called while a level runs (it beats the sweep's lease): the server's counters, or None."""
        self.beat()
        return None

    async def counters(self) -> dict[str, float] | None:
        """The server's counters (``/metrics``) read just before and just after the measured level."""
        return None

    # -- shared -------------------------------------------------------------------------------------------
    def beat(self) -> None:
        if self.heartbeat is not None:
            self.heartbeat()

    def phase(self, name: str, t0: float, t1: float, kind: str | None = None) -> None:
        ev = {"event": "phase", "name": name, "kind": kind, "rep": None, "t_start": t0, "t_end": t1}
        self.res.phases.append(ev)
        if self.on_event is not None:
            self.on_event(ev)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def timed_out(self) -> bool:
        self.res.status = "timeout"
        self.res.reason = f"config ran past its {self.job['timeout_s']:g} s timeout"
        return False

    async def levels(self, first_idx: int) -> bool:
        """Warm-ups, then the measured level between two reads of the counters, then its judgement;
        False where the config stopped early (its status and reason are on ``res``)."""
        n_warm = int(self.serving.get("warmup_requests", self.conc))
        if n_warm and not await self.level("warmup", n_warm, None, first_idx, self.conc):
            return False
        self.res.metrics_before = await self.counters()
        n_req = self.serving.get("requests")
        n = int(n_req) if n_req is not None else None
        duration = self.serving.get("duration_s")
        if not await self.level("measured", n, duration, first_idx + n_warm, self.conc):
            return False
        self.res.metrics_after = await self.counters()
        self.judge_level()
        return True

    async def level(self, kind: str, n: int | None, duration: float | None, first_idx: int, c: int) -> bool:
        """One batch of requests at concurrency ``c``, stored on ``res``; False when the config timed out."""
        if self.left() <= 0:
            return self.timed_out()
        load = LoadSpec(
            concurrency=c,
            n_requests=n,
            duration_s=duration,
            request_rate=self.job["params"].get("request_rate") if kind == "measured" else None,
            timeout_s=min(self.req_timeout, max(1.0, self.left())),
            seed=int(self.job["workload"].get("seed", 0)),
        )

        async def scrape() -> dict[str, float] | None:
            return await self.poll(kind, c)

        run = run_level(
            self.url,
            self.payload,
            load,
            kind=kind,
            first_idx=first_idx,
            scrape=scrape,
            endpoint=self.endpoint,
            headers=self.headers,
        )
        try:
            out = await asyncio.wait_for(run, timeout=max(1.0, self.left()))
        except asyncio.TimeoutError:
            return self.timed_out()
        self.res.records.extend(out.records)
        if kind == "measured":
            self.res.level_t_start, self.res.level_t_end = out.t_start, out.t_end
            self.res.metrics_samples = out.metrics_samples
        self.phase(f"level_c{c}" if kind == "measured" else kind, out.t_start, out.t_end, kind)
        return True

    def judge_level(self) -> None:
        """What the measured level's requests say (``judge_level``, the plan's ``max_error_rate``)."""
        max_rate = float(self.serving.get("max_error_rate") or 0.0)
        self.res.status, self.res.reason = judge_level(self.res.records, self.req_timeout, max_rate)
