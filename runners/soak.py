"""The soak loop of the in-process worker: one request repeated back to back for a duration, cut into windows.

A soak shows what a device sustains, not what it bursts: the cold request runs first (stored as cold, like
every config's), then the same request again and again with nothing between two requests — no cooldown, no
pause, no event the parent could answer — until ``duration_s`` has passed since the first soak request began.

Every figure comes from llama.cpp's own counters (``llama_perf_context``), read after each decode step:
the step's eval-count and eval-time deltas are booked to the window the step *ended* in. A token exists only
once its step has ended, so a token decoded after a window's ``t_end`` belongs to the next window, and the
windows' tokens add up to the decode steps exactly (no step is split, none is counted twice). The windows
are fixed intervals of CLOCK_MONOTONIC (``t0 + i * window_s``), the clock the sampler and the parent use, so
each window is a phase the telemetry aggregates like any other. A step still running when the duration ends
is not booked: the soak measures ``[t0, t0 + duration_s)``.

This module imports nothing of the worker: the worker hands in its request object and its event writer.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Emit = Callable[..., None]
# After each decode step: the step's decode ms in, the ms it was stretched by out (the test suite's slowdown)
Pace = Callable[[float], float]


@dataclass
class _Tally:
    """What one window has booked so far."""

    tokens: int = 0
    decode_ms: float = 0.0
    prefill_tokens: int = 0
    prefill_ms: float = 0.0


class SoakWindows:
    """The soak's windows on the monotonic clock; each is emitted (``soak_window``) once a booking or the end
    of the soak shows it is over."""

    def __init__(
        self, t0: float, duration_s: float, window_s: float, emit: Emit, after_window: Callable[[], None]
    ) -> None:
        self.t0 = t0
        self.t_stop = t0 + duration_s
        self.window_s = window_s
        # the last window may be shorter: it ends with the soak
        self.n = max(1, math.ceil(duration_s / window_s - 1e-9))
        self.current = 0
        self.tally = _Tally()
        self.emit = emit
        self.after_window = after_window  # the test suite's fault hook, between two windows

    def bounds(self, index: int) -> tuple[float, float]:
        return self.t0 + index * self.window_s, min(self.t0 + (index + 1) * self.window_s, self.t_stop)

    def over(self, now: float) -> bool:
        return now >= self.t_stop

    def book_decode(self, t_end: float, tokens: int, ms: float) -> bool:
        """A decode step that ended at ``t_end``: its counter deltas go to the window it ended in; False for
        a step that ended after the soak (not booked)."""
        if not self._advance(t_end):
            return False
        self.tally.tokens += tokens
        self.tally.decode_ms += ms
        return True

    def book_prefill(self, t_end: float, tokens: int, ms: float) -> None:
        """A request's prefill, in the window it ended in (a window's prefill speed is its requests')."""
        if self._advance(t_end):
            self.tally.prefill_tokens += tokens
            self.tally.prefill_ms += ms

    def close(self) -> None:
        """Emit every window not yet emitted (the soak is over: the rest are over too)."""
        while self.current < self.n:
            self._emit_current()

    def _advance(self, now: float) -> bool:
        """Emit the windows that ended at or before ``now``; False when ``now`` is past the last one."""
        while self.current < self.n and now >= self.bounds(self.current)[1]:
            self._emit_current()
        return self.current < self.n

    def _emit_current(self) -> None:
        t_start, t_end = self.bounds(self.current)
        tally = self.tally
        decode_s = tally.decode_ms / 1000.0
        self.emit(
            "soak_window",
            index=self.current,
            t_start=t_start,
            t_end=t_end,
            tokens=tally.tokens,
            decode_s=decode_s,
            tg_tps=tally.tokens / decode_s if tally.tokens > 0 and decode_s > 0 else None,
            pp_tps=tally.prefill_tokens / (tally.prefill_ms / 1000.0) if tally.prefill_ms > 0 else None,
        )
        self.current += 1
        self.tally = _Tally()
        self.after_window()


@dataclass
class SoakResult:
    decode_steps: int = 0  # counted here, one per llama_decode of a sampled token: the check on the counters
    requests: int = 0


class SlowWhileFileSays:
    """The test suite's simulated device, in the worker. While the file at ``path`` says ``slow F``, each
    decode step is stretched so the soak's decode speed falls by the fraction F, as a lowered clock cap
    slows the compute itself; the stretch is booked as the step's decode time. It is a busy wait, not a
    sleep: a capped core stays busy (its CPU time and its caches stay the child's), where a sleep would
    hand the core to whatever else runs and slow the steps after it by more than asked. A wait that
    overran is taken off the next one.

    While it says ``sim MS``, every decode step is booked as taking MS milliseconds of the simulation's
    time, whatever the machine took: the windows' speeds are then the simulated device's, the same on an
    idle machine and on one at load 10 (the tokens, the windows and the telemetry stay real). The file is
    read at most every ``check_s``."""

    def __init__(self, path: str, check_s: float = 0.05) -> None:
        self.path = path
        self.check_s = check_s
        self.fraction = 0.0
        self.sim_ms: float | None = None
        self.checked = -math.inf
        self.owed_s = 0.0

    def _read(self) -> tuple[float, float | None]:
        """(slowdown fraction, simulated step ms or None) as the file says now."""
        try:
            with open(self.path, encoding="utf-8") as f:
                word, _, value = f.read().strip().partition(" ")
        except OSError:
            return 0.0, None
        if word == "sim":
            return 0.0, max(float(value), 0.0)
        return (min(max(float(value or 0.0), 0.0), 0.95) if word == "slow" else 0.0), None

    def __call__(self, step_ms: float) -> float:
        """The ms to add to the step's measured ``step_ms`` (negative where the simulation's step is
        shorter than the machine's)."""
        t0 = time.monotonic()
        if t0 - self.checked >= self.check_s:
            (self.fraction, self.sim_ms), self.checked = self._read(), t0
        if self.sim_ms is not None:
            return self.sim_ms - step_ms
        if self.fraction <= 0.0:
            self.owed_s = 0.0
            return 0.0
        self.owed_s += step_ms / 1000.0 * self.fraction / (1.0 - self.fraction)
        while (now := time.monotonic()) - t0 < self.owed_s:
            pass
        self.owed_s -= now - t0
        return (now - t0) * 1000.0


def run_soak(
    request: Any, soak: dict[str, Any], emit: Emit, after_window: Callable[[], None], pace: Pace | None = None
) -> SoakResult:
    """Requests back to back until the soak's duration has passed; the windows emitted as they end.
    ``pace``: the test suite's slowdown after each decode step (None outside the tests)."""
    t0 = time.monotonic()
    windows = SoakWindows(t0, float(soak["duration_s"]), float(soak["window_s"]), emit, after_window)
    emit("soak_start", t=t0, duration_s=windows.t_stop - t0, window_s=windows.window_s, n_windows=windows.n)
    result = SoakResult()
    tokens = request.tokenize()
    while not windows.over(time.monotonic()):
        result.requests += 1
        result.decode_steps += _one_request(request, tokens, windows, pace)
    windows.close()
    emit("soak_end", t=time.monotonic(), decode_steps=result.decode_steps, requests=result.requests)
    return result


def _one_request(request: Any, tokens: list[int], windows: SoakWindows, pace: Pace | None = None) -> int:
    """One request of the soak (prefill, then decode steps until n_predict, an EOS unless ignored, a stop
    string, or the soak's end); returns its decode steps."""
    ll, ctx = request.ll, request.ctx
    wl = request.workload
    n_predict = int(wl["n_predict"])
    ignore_eos = bool(wl.get("ignore_eos", True))
    stops = [str(x).encode() for x in wl.get("stop", ()) if x]
    request.fill_depth()  # the same depth before every request; not booked (the counters restart below)
    sampler = request.new_sampler()
    ll.llama_perf_context_reset(ctx)
    steps = 0
    try:
        for start in range(0, len(tokens), request.n_batch):
            request.decode_tokens(tokens[start : start + request.n_batch])
        ll.llama_synchronize(ctx)  # llama.cpp books a batch's time when the context synchronizes
        last = request.perf()
        windows.book_prefill(time.monotonic(), last[2] + last[3], last[0] + last[1])
        token = int(ll.llama_sampler_sample(sampler, ctx, -1))
        produced = 1
        tail = request.piece(token) if stops else b""  # a stop string ends the request, as a user's would
        while produced < n_predict and not windows.over(time.monotonic()):
            if not ignore_eos and ll.llama_vocab_is_eog(request.vocab, token):
                break
            if stops and any(stop in tail for stop in stops):
                break
            request.decode_tokens([token])
            token = int(ll.llama_sampler_sample(sampler, ctx, -1))  # reads the logits: the step is synced
            t_end = time.monotonic()
            now = request.perf()
            step_ms = now[1] - last[1]
            if pace is not None:  # the test suite's slowdown: the stretched step ends after its wait
                step_ms += pace(step_ms)
                t_end = time.monotonic()
            if windows.book_decode(t_end, now[3] - last[3], step_ms):
                steps += 1
            last = now
            produced += 1
            if stops:
                tail = (tail + request.piece(token))[-256:]
    finally:
        ll.llama_sampler_free(sampler)
    return steps
