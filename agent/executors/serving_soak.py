"""Soak runs on llama-server (or on a server edgeprof did not start): the serving runner's measured level
held for the soak's duration at the config's concurrency (closed loop: each client sends its next request
when its previous one ends), then cut into the soak's windows from the requests' own timestamps.

The server is cooled, spawned, loaded and warmed up as for any serving config; the measured level is the
soak. Its windows are the fixed intervals ``t0 + i * window_s`` of CLOCK_MONOTONIC from the level's start,
the clock of the telemetry, so each is a phase like the in-process soak's and the same soak verdict judges
them. A window's tokens are the server's own count per request (``tokens_predicted``), spread over that
request's text-carrying chunks in arrival order and booked to the window each chunk arrived in; a request
the server never counted books its chunks. Tokens arriving after the duration are not booked.

A window's tg t/s here is what every client received in it per second of the window: the throughput the
device sustained under that load, the prefills the server interleaves included. At concurrency 1 it is
therefore below an in-process soak's decode-only speed; the soak's figures are ratios within one run (burst
against sustained, worst window against best), which that does not change. A window's prefill speed is the
server's own (``prompt_n`` / ``prompt_ms``) over the requests whose first token arrived in it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy.orm import Session

from edgeprof.executors.base import EnergyOver
from edgeprof.executors.openai_server import OpenAIExecutor
from edgeprof.executors.serving import ServingExecutor
from edgeprof.executors.soak import attach_soak_telemetry, store_soak_windows, stored_windows
from edgeprof.plan import RunSpec
from edgeprof.runners.llama_server import ServingResult
from edgeprof.runners.loadgen import RequestRecord
from edgeprof.stats import median
from edgeprof.storage.models import Run
from edgeprof.verdicts import WindowSpeed


def token_arrivals(rec: RequestRecord) -> list[tuple[float, int]]:
    """(arrival time, tokens) per text-carrying chunk of one request; the server's count split over its
    chunks (the chunk count where the server gave none)."""
    times = rec.chunk_times
    if not times:
        if rec.t_first is not None and rec.output_tokens:
            return [(rec.t_first, rec.output_tokens)]  # every token came in the final chunk
        return []
    n = rec.output_tokens if rec.output_tokens is not None else len(times)
    k = len(times)
    return [(t, (j + 1) * n // k - j * n // k) for j, t in enumerate(times)]


class _Windows:
    """The soak's windows over ``[t0, t_end)``; the last one ends with the soak (or with the level, when
    it ended early: a crashed server measures no window after it)."""

    def __init__(self, t0: float, duration_s: float, window_s: float, level_end: float | None) -> None:
        self.t0, self.window_s = t0, window_s
        self.t_end = t0 + duration_s if level_end is None else min(t0 + duration_s, level_end)
        self.n = max(0, math.ceil((self.t_end - t0) / window_s - 1e-9))

    def index(self, t: float) -> int | None:
        if t < self.t0 or t >= self.t_end:
            return None
        return min(self.n - 1, int((t - self.t0) // self.window_s))

    def bounds(self, i: int) -> tuple[float, float]:
        return self.t0 + i * self.window_s, min(self.t0 + (i + 1) * self.window_s, self.t_end)


def windows_from_records(
    records: Iterable[RequestRecord],
    t0: float,
    duration_s: float,
    window_s: float,
    level_end: float | None = None,
) -> list[WindowSpeed]:
    """The soak's windows from the measured requests' timestamps (warm-up and cold requests are not the
    soak's)."""
    windows = _Windows(t0, duration_s, window_s, level_end)
    tokens = [0] * windows.n
    pp_tokens = [0] * windows.n
    pp_ms = [0.0] * windows.n
    for rec in records:
        if rec.kind != "measured":
            continue
        for t, k in token_arrivals(rec):
            i = windows.index(t)
            if i is not None:
                tokens[i] += k
        first = windows.index(rec.t_first) if rec.t_first is not None else None
        if first is not None and rec.prompt_tokens and rec.server_prompt_ms:
            pp_tokens[first] += rec.prompt_tokens
            pp_ms[first] += rec.server_prompt_ms
    out: list[WindowSpeed] = []
    for i in range(windows.n):
        a, b = windows.bounds(i)
        span = b - a
        out.append(
            WindowSpeed(
                index=i,
                t_start=a,
                t_end=b,
                tokens=tokens[i],
                decode_s=span,
                # zero tokens while the level ran is a measured stall, not a missing value
                tg_tps=tokens[i] / span if span > 0 else None,
                pp_tps=pp_tokens[i] / (pp_ms[i] / 1000.0) if pp_ms[i] > 0 else None,
            )
        )
    return out


class ServingSoakExecutor(ServingExecutor):
    runner = "llama-server"
    workload_kind = "soak"

    def job_for(self, spec: RunSpec, vocab_size: int | None) -> dict[str, Any]:
        """The serving job with its measured level held for the soak's duration, however many requests
        that takes."""
        job = super().job_for(spec, vocab_size)
        soak = spec.workload.soak
        assert soak is not None
        job["serving"] = {**job["serving"], "duration_s": soak.duration_s, "requests": None}
        return job

    def store_more(self, session: Session, run: Run, spec: RunSpec, res: ServingResult) -> None:
        soak = spec.workload.soak
        if soak is None or res.level_t_start is None:
            return  # the server never reached the soak: no window was measured
        speeds = windows_from_records(
            res.records, res.level_t_start, soak.duration_s, soak.window_s, res.level_t_end
        )
        store_soak_windows(session, run, speeds)

    def label(self, spec: RunSpec) -> str:
        soak = spec.workload.soak
        what = f" (soak {soak.duration_s:g} s in {soak.window_s:g} s windows)" if soak is not None else ""
        return super().label(spec) + what

    def describe(self, session: Session, run: Run) -> str:
        windows: Sequence[Any] = stored_windows(session, run)
        tg = median([w.tg_tps for w in windows if w.tg_tps is not None])
        return "  ".join(
            [super().describe(session, run), f"{len(windows)} windows"]
            + ([f"{tg:.1f} out tok/s (median window)"] if tg is not None else [])
        )

    def attach_energy(self, session: Session, run: Run, energy: EnergyOver) -> None:
        super().attach_energy(session, run, energy)
        attach_soak_telemetry(session, run, energy)


class OpenAISoakExecutor(ServingSoakExecutor, OpenAIExecutor):
    """A soak on a server edgeprof did not start: the same windows, from the same request records; the
    run itself is the openai runner's (no spawn, no memory prediction)."""

    runner = "openai"
    workload_kind = "soak"
