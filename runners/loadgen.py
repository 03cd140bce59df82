"""The serving runner's load generator: an async streaming (SSE) client, closed-loop (N clients, each sends
its next request when its previous one ends) and open-loop (Poisson arrivals under a concurrency cap), and
the per-request figures computed from the raw timestamps. The runner measures, the agent summarises: a
level's distributions and goodput are ``edgeprof.executors.serving_stats``.

One definition per metric (docs/measurements.md, serving rows); every time is ``time.monotonic()``
in seconds, the clock the telemetry samples use. Output tokens come from the server's own count
(``tokens_predicted`` / ``timings.predicted_n``; an OpenAI-compatible server's ``usage``), and only where a
server gives none from the number of SSE chunks, labelled so (``token_source = "chunks"``): a chunk is not
a token (merged multi-byte pieces, held-back stop strings).

What differs between servers is the endpoint: its path, how a streamed chunk is read and how the stream
ends (an ``Endpoint``). llama-server's native ``/completion`` is ``COMPLETION`` here; the OpenAI-compatible
ones are in ``runners.openai_api``. One generator drives them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import random
import time
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class RequestRecord:
    """One request as the client saw it, beside what the server said about it."""

    idx: int
    kind: str  # cold | warmup | measured
    client: int = 0
    status: str = "pending"  # ok | error | timeout | rejected | interrupted
    error: str | None = None
    http_status: int | None = None
    t_send: float = 0.0
    t_first: float | None = None  # first chunk carrying generated text
    t_end: float | None = None
    chunk_times: list[float] = field(default_factory=list)  # arrival of every chunk carrying text
    output_tokens: int | None = None  # the server's count
    prompt_tokens: int | None = None
    server_prompt_ms: float | None = None
    server_predicted_ms: float | None = None
    server_cache_n: int | None = None
    finish_reason: str | None = None
    # where output_tokens / prompt_tokens came from: "server" (llama-server's own count), "usage" (an
    # OpenAI-compatible server's usage object) or "chunks" (no count offered: one token per text chunk)
    token_source: str | None = None
    client_overhead_ms: float = 0.0  # our own parsing/bookkeeping time inside the stream loop

    @property
    def ttft_ms(self) -> float | None:
        return (self.t_first - self.t_send) * 1000.0 if self.t_first is not None else None

    @property
    def e2el_ms(self) -> float | None:
        return (self.t_end - self.t_send) * 1000.0 if self.t_end is not None and self.status == "ok" else None

    @property
    def itl_ms(self) -> list[float]:
        """Every gap between two successive text-carrying chunks (vLLM's ITL; one token per chunk here)."""
        t = self.chunk_times
        return [(b - a) * 1000.0 for a, b in itertools.pairwise(t)]

    @property
    def tpot_ms(self) -> float | None:
        """vLLM / AIPerf: (E2EL − TTFT) / (n − 1), decode only; undefined for n <= 1."""
        e2el, ttft, n = self.e2el_ms, self.ttft_ms, self.output_tokens
        if e2el is None or ttft is None or n is None or n <= 1:
            return None
        return (e2el - ttft) / (n - 1)

    @property
    def tpot_e2e_ms(self) -> float | None:
        """GuideLLM's TPOT: E2EL / n, TTFT included (larger than ``tpot_ms`` whenever TTFT > one TPOT)."""
        e2el, n = self.e2el_ms, self.output_tokens
        if e2el is None or not n:
            return None
        return e2el / n

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(
            ttft_ms=self.ttft_ms, e2el_ms=self.e2el_ms, tpot_ms=self.tpot_ms, tpot_e2e_ms=self.tpot_e2e_ms
        )
        return out


def parse_sse_line(line: str) -> dict[str, Any] | None:
    """The JSON of one ``data: {...}`` line; None for comments, blank lines, other fields and ``[DONE]``."""
    if not line.startswith("data:"):
        return None
    body = line[5:].strip()
    if not body or body == "[DONE]":
        return None
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):  # a chunk nested past the recursion limit is no chunk either
        return None
    return value if isinstance(value, dict) else None


def apply_chunk(rec: RequestRecord, data: dict[str, Any], t_arrival: float) -> bool:
    """Fold one streamed chunk into the record; True when it was the last one (``stop``)."""
    content = data.get("content")
    if isinstance(content, str) and content:
        if rec.t_first is None:
            rec.t_first = t_arrival
        rec.chunk_times.append(t_arrival)
    if not data.get("stop"):
        return False
    timings = data.get("timings")
    timings = timings if isinstance(timings, dict) else {}
    # every figure checked for type and range: a count of 2^63 or a string would fail the run's insert
    predicted = count(data.get("tokens_predicted", timings.get("predicted_n")))
    rec.output_tokens = predicted
    rec.token_source = "server" if predicted is not None else None
    rec.prompt_tokens = count(data.get("tokens_evaluated", timings.get("prompt_n")))
    rec.server_prompt_ms = number(timings.get("prompt_ms"))
    rec.server_predicted_ms = number(timings.get("predicted_ms"))
    rec.server_cache_n = count(timings.get("cache_n"))
    rec.finish_reason = text(data.get("stop_type"), 64) or None
    if rec.t_first is None and rec.output_tokens:
        # Every token arrived in the final chunk (or as empty pieces): the first text is here.
        rec.t_first = t_arrival
    return True


def is_done_line(line: str) -> bool:
    """The ``data: [DONE]`` line that ends an OpenAI-style stream."""
    return line.startswith("data:") and line[5:].strip() == "[DONE]"


@dataclass(frozen=True)
class Endpoint:
    """How one server endpoint streams: its path, how a chunk folds into the record (True: the last one)
    and how the stream's end (``[DONE]`` or the connection closing) settles the record (True: complete)."""

    path: str
    fold: Callable[[RequestRecord, dict[str, Any], float], bool]
    finish: Callable[[RequestRecord], bool] | None = None  # None: only a final chunk completes a request


# llama-server's native endpoint: its final chunk (``stop``) carries the counts and timings.
COMPLETION = Endpoint("/completion", apply_chunk)


async def stream_request(
    client: Any,
    url: str,
    payload: dict[str, Any],
    rec: RequestRecord,
    timeout_s: float,
    endpoint: Endpoint = COMPLETION,
) -> RequestRecord:
    """POST one streaming completion and time it; every ending is a status, never an exception."""
    import httpx

    rec.t_send = time.monotonic()

    async def go() -> None:
        async with client.stream("POST", url, json=payload, headers=_IDENTITY) as resp:
            rec.http_status = resp.status_code
            if resp.status_code != 200:
                body = (await _head_of(resp)).decode("utf-8", "replace")[:200]
                rec.status = "rejected" if resp.status_code in (429, 503) else "error"
                rec.error = f"HTTP {resp.status_code}: {body.strip()}"
                return
            async for line in stream_lines(resp):
                t_arrival = time.monotonic()
                if endpoint.finish is not None and is_done_line(line):
                    settle(rec, endpoint, t_arrival)
                    return
                data = parse_sse_line(line)
                last = False
                if data is not None:
                    if "error" in data and "content" not in data:
                        rec.status, rec.error = "error", str(data.get("error"))[:200]
                        return
                    last = endpoint.fold(rec, data, t_arrival)
                rec.client_overhead_ms += (time.monotonic() - t_arrival) * 1000.0
                if last:
                    rec.t_end = t_arrival
                    rec.status = "ok"
                    return
            if endpoint.finish is not None:
                settle(rec, endpoint, time.monotonic())
                return
            rec.status, rec.error = "error", "stream ended without a final chunk"

    try:
        await asyncio.wait_for(go(), timeout=timeout_s)
    except asyncio.TimeoutError:
        rec.status, rec.error = "timeout", f"no complete response within {timeout_s:g} s"
    except ReplyError as exc:
        rec.status, rec.error = "error", str(exc)
    except httpx.HTTPError as exc:
        rec.status, rec.error = "error", f"{type(exc).__name__}: {exc}"[:200] or type(exc).__name__
    except OSError as exc:
        rec.status, rec.error = "error", f"{type(exc).__name__}: {exc}"[:200]
    if rec.t_end is None:
        rec.t_end = time.monotonic()
    return rec


async def stream_lines(resp: Any, max_line: int = 1 << 20) -> Any:
    """The lines of a streamed reply, read raw (never inflated: a compressed stream is no SSE), each at
    most ``max_line`` bytes (ReplyError past it: one line of a stream never holds the client's memory)."""
    pending = b""
    async for piece in resp.aiter_raw():
        pending += piece
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.rstrip(b"\r").decode("utf-8", "replace")
        if len(pending) > max_line:
            raise ReplyError(f"a streamed line longer than {max_line} bytes")
    if pending:
        yield pending.rstrip(b"\r").decode("utf-8", "replace")


async def _head_of(resp: Any, limit: int = 4096) -> bytes:
    """The first bytes of an error reply (its message), never the whole of a reply of any size."""
    head = b""
    async for piece in resp.aiter_raw():
        head += piece
        if len(head) >= limit:
            break
    return head[:limit]


def settle(rec: RequestRecord, endpoint: Endpoint, t_end: float) -> None:
    """The end of a stream that ends with ``[DONE]`` (or by closing): ok when the endpoint says the request
    completed (a finish reason came), else an error naming what was missing."""
    assert endpoint.finish is not None
    rec.t_end = t_end
    if endpoint.finish(rec):
        rec.status = "ok"
    else:
        rec.status, rec.error = "error", "stream ended without a finish_reason"


@dataclass(frozen=True)
class LoadSpec:
    """One load level: closed loop at ``concurrency``, or open loop at ``request_rate`` under that cap."""

    concurrency: int
    n_requests: int | None  # a fixed number of requests, or
    duration_s: float | None  # as many as fit in this time (no new request is sent after it)
    request_rate: float | None = None  # requests/s, Poisson arrivals (open loop)
    timeout_s: float = 60.0
    seed: int = 0


@dataclass
class LevelResult:
    records: list[RequestRecord]
    t_start: float
    t_end: float
    metrics_samples: list[dict[str, float]] = field(default_factory=list)  # /metrics polled during the level


class _Budget:
    """Hands out request indices until the level's count or time is used up (no request is sent after it)."""

    def __init__(self, load: LoadSpec, t_start: float) -> None:
        self.n_requests = load.n_requests
        self.t_stop = t_start + load.duration_s if load.duration_s is not None else math.inf
        self.next = 0

    def take(self) -> int | None:
        i = self.next
        if self.n_requests is not None and i >= self.n_requests:
            return None
        if time.monotonic() >= self.t_stop:
            return None
        self.next = i + 1
        return i


async def _scrape_until(
    stop: asyncio.Event, scrape: Callable[[], Any], interval_s: float, samples: list[dict[str, float]]
) -> None:
    """Poll ``scrape`` every ``interval_s`` while the level runs (``/metrics``: queue depth, slots busy)."""
    while not stop.is_set():
        got = await scrape()
        if got:
            samples.append(got)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval_s)


async def _closed_loop(concurrency: int, budget: _Budget, one: Callable[[int, int], Awaitable[None]]) -> None:
    """N clients; each sends its next request when its previous one has ended."""

    async def client(worker: int) -> None:
        while (i := budget.take()) is not None:
            await one(i, worker)

    await asyncio.gather(*(client(w) for w in range(concurrency)))


async def _open_loop(load: LoadSpec, budget: _Budget, one: Callable[[int, int], Awaitable[None]]) -> None:
    """Poisson arrivals at ``request_rate``, at most ``concurrency`` requests in flight."""
    assert load.request_rate is not None
    rng = random.Random(load.seed)
    cap = asyncio.Semaphore(load.concurrency)
    tasks: list[asyncio.Task[None]] = []

    async def capped(i: int) -> None:
        async with cap:
            await one(i, 0)

    while (i := budget.take()) is not None:
        tasks.append(asyncio.create_task(capped(i)))
        await asyncio.sleep(rng.expovariate(load.request_rate))
    await asyncio.gather(*tasks)


async def run_level(
    base_url: str,
    payload_for: Callable[[int], dict[str, Any]],
    load: LoadSpec,
    *,
    kind: str = "measured",
    first_idx: int = 0,
    scrape: Callable[[], Any] | None = None,
    scrape_interval_s: float = 0.5,
    endpoint: Endpoint = COMPLETION,
    headers: dict[str, str] | None = None,
) -> LevelResult:
    """Run one level and return every request's record (finished, failed or timed out); ``headers`` go with
    every request (an API key's ``Authorization``)."""
    import httpx

    n_conn = load.concurrency + 2
    limits = httpx.Limits(max_connections=n_conn, max_keepalive_connections=n_conn)
    timeout = httpx.Timeout(load.timeout_s, connect=min(10.0, load.timeout_s))
    records: list[RequestRecord] = []
    samples: list[dict[str, float]] = []
    url = base_url.rstrip("/") + endpoint.path
    async with httpx.AsyncClient(limits=limits, timeout=timeout, headers=headers) as client:
        t_start = time.monotonic()
        budget = _Budget(load, t_start)

        async def one(i: int, worker: int) -> None:
            rec = RequestRecord(idx=first_idx + i, kind=kind, client=worker)
            records.append(rec)
            await stream_request(client, url, payload_for(first_idx + i), rec, load.timeout_s, endpoint)

        stop_scrape = asyncio.Event()
        scrape_task = (
            asyncio.create_task(_scrape_until(stop_scrape, scrape, scrape_interval_s, samples))
            if scrape is not None
            else None
        )
        if load.request_rate is None:
            await _closed_loop(load.concurrency, budget, one)
        else:
            await _open_loop(load, budget, one)
        t_end = time.monotonic()
        stop_scrape.set()
        if scrape_task is not None:
            await scrape_task
    records.sort(key=lambda r: r.idx)
    return LevelResult(records=records, t_start=t_start, t_end=t_end, metrics_samples=samples)


# -- a level's outcome --------------------------------------------------------------------------------------
REASON_CHARS = 80  # an error's first characters name its kind; the rest (a reply's body) varies per request


def error_reason(rec: RequestRecord) -> str:
    """How a failed request ended, as a level counts it: its error's start, or its status."""
    return (rec.error or rec.status)[:REASON_CHARS]


def errors_by_reason(records: list[RequestRecord]) -> dict[str, int]:
    """The failed requests of ``records`` counted per reason, the most frequent first."""
    counts: dict[str, int] = {}
    for r in records:
        if r.status != "ok":
            counts[error_reason(r)] = counts.get(error_reason(r), 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def reasons_text(counts: dict[str, int]) -> str:
    """'7 × stream ended without a finish_reason; 1 × timeout' of ``errors_by_reason``."""
    return "; ".join(f"{n} × {reason}" for reason, n in counts.items())


def judge_level(
    records: list[RequestRecord], request_timeout_s: float, max_error_rate: float = 0.0
) -> tuple[str, str | None]:
    """(status, reason) of a measured level from its requests, for every serving runner: ``ok`` only while
    the share of failed requests is within ``max_error_rate`` (the plan's; 0: any failure fails the level,
    whose throughput would otherwise read as the server's while it dropped requests); every failure is
    counted by reason in the reason."""
    measured = [r for r in records if r.kind == "measured"]
    failed = [r for r in measured if r.status != "ok"]
    if not failed:
        return "ok", None
    counts = reasons_text(errors_by_reason(failed))
    if len(failed) == len(measured):
        if all(r.status == "timeout" for r in failed):
            return "timeout", f"every measured request timed out (request_timeout_s = {request_timeout_s:g})"
        return "error", f"every measured request failed: {counts}"
    rate = len(failed) / len(measured)
    if rate <= max_error_rate:
        return "ok", None
    return "error", (
        f"{len(failed)} of {len(measured)} measured requests failed (error rate {rate:.3g} > "
        f"max_error_rate {max_error_rate:g}): {counts}"
    )


# --- bounded control replies ------------------------------------------------------------------------------
# A target is outside edgeprof's control: a server that sends ``/v1/models`` one byte a second never trips a
# per-read timeout (httpx's ``timeout`` is per socket operation), a gzip bomb grows to gigabytes when decoded,
# JSON nested a million deep or a count of 10^30 reaches the database as an exception. So every control GET
# has one deadline for the whole reply (connect, first byte and body), a cap on the bytes read, asks for no
# encoding and decodes one only within the same cap; and a reply is reduced to the fields edgeprof reads,
# each checked for type and range, before anything else sees it. A field that fails is None: the caller
# treats it as one the target does not offer, never as an exception.

REPLY_MAX_BYTES = 1 << 20  # /v1/models, /props, /metrics of a real server: a few KiB to ~100 KiB
CONTROL_DEADLINE_S = 5.0  # one whole control reply (connect, first byte, body)
COUNT_MAX = (1 << 31) - 1  # token counts, context sizes, slots: llama.cpp's int32
TEXT_MAX = 4096  # any string kept from a reply (model id, path, build)
LIST_MAX = 1024  # entries of /v1/models kept
_IDENTITY = {"Accept-Encoding": "identity"}


class ReplyError(ValueError):
    """A reply that is too slow, too large or not the shape it must have; one line."""


def deadline_left(deadline: float | None, cap_s: float = CONTROL_DEADLINE_S) -> float:
    """Seconds one control request may take: ``cap_s``, or what is left of the config's own deadline
    (``time.monotonic()`` based) when that is less; never below a tenth of a second."""
    if deadline is None:
        return cap_s
    return max(0.1, min(cap_s, deadline - time.monotonic()))


def _decoder(encoding: str) -> Any:
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    raise ReplyError(f"reply in an encoding edgeprof does not read ({encoding[:40]})")


def _bounded_decode(decoder: Any, data: bytes, max_bytes: int) -> bytes:
    """``data`` decoded, never past ``max_bytes`` of output (zlib's max_length: a bomb stops there)."""
    out = decoder.decompress(data, max_bytes + 1)
    if len(out) > max_bytes or decoder.unconsumed_tail:
        raise ReplyError(f"reply larger than {max_bytes} bytes once decoded")
    return bytes(out)


async def _read(client: Any, url: str, max_bytes: int) -> tuple[int, bytes]:
    async with client.stream("GET", url, headers=_IDENTITY) as resp:
        decoder = _decoder(resp.headers.get("content-encoding", "").strip().lower())
        body = bytearray()
        async for piece in resp.aiter_raw():  # raw: httpx would decode (and inflate) it unbounded
            body += piece
            if len(body) > max_bytes:
                raise ReplyError(f"reply larger than {max_bytes} bytes")
        data = bytes(body) if decoder is None else _bounded_decode(decoder, bytes(body), max_bytes)
        return resp.status_code, data


async def get_bytes(
    client: Any, url: str, deadline_s: float, max_bytes: int = REPLY_MAX_BYTES
) -> tuple[int | None, bytes | None, str | None]:
    """(HTTP status, body, problem) of one GET that ends within ``deadline_s`` whatever the server does."""
    import httpx

    try:
        status, data = await asyncio.wait_for(_read(client, url, max_bytes), timeout=deadline_s)
    except asyncio.TimeoutError:
        return None, None, f"no whole reply within {deadline_s:g} s"
    except ReplyError as exc:
        return None, None, str(exc)
    except (httpx.HTTPError, OSError) as exc:
        return None, None, f"{type(exc).__name__}: {exc}"[:200]
    return status, data, None


def loads(data: bytes | str) -> Any:
    """JSON of a reply; ReplyError for text that is not JSON, nested past Python's recursion limit, or has
    an integer too long to convert."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ReplyError("reply nested too deep") from None
    except ValueError as exc:
        raise ReplyError(f"reply is not JSON ({str(exc)[:80]})") from None


async def get_json(
    client: Any, url: str, deadline_s: float, max_bytes: int = REPLY_MAX_BYTES
) -> tuple[int | None, Any, str | None]:
    """(HTTP status, JSON value or None, problem) of one bounded GET; a body that is not JSON is None."""
    status, data, problem = await get_bytes(client, url, deadline_s, max_bytes)
    if data is None:
        return status, None, problem
    try:
        return status, loads(data), None
    except ReplyError as exc:
        return status, None, str(exc)


# --- the shapes of replies ------------------------------------------------------------------------------


def count(value: Any, lo: int = 0, hi: int = COUNT_MAX) -> int | None:
    """An integer count within [lo, hi]; anything else (a bool, a float, a string, 2^63) is None."""
    if isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
        return value
    return None


def number(value: Any, lo: float = 0.0, hi: float = 1e12) -> float | None:
    """A finite number within [lo, hi] (milliseconds and the like); anything else is None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        f = float(value)
    except OverflowError:
        return None
    return f if math.isfinite(f) and lo <= f <= hi else None


def text(value: Any, limit: int = TEXT_MAX) -> str | None:
    return value if isinstance(value, str) and len(value) <= limit else None


def _scalars(value: Any) -> dict[str, Any] | None:
    """A flat object of scalars (a model's ``meta``): nested values and long strings dropped."""
    if not isinstance(value, dict):
        return None
    out: dict[str, Any] = {}
    for key, item in list(value.items())[:64]:
        if not isinstance(key, str) or len(key) > 128:
            continue
        if isinstance(item, bool) or item is None or text(item, 512) is not None:
            out[key] = item
        elif isinstance(item, (int, float)):
            kept = count(item, -(1 << 62), 1 << 62) if isinstance(item, int) else number(item, -1e300, 1e300)
            if kept is not None:
                out[key] = kept
    return out


def models_reply(value: Any) -> list[dict[str, Any]]:
    """The entries of ``/v1/models`` with a string id, each reduced to id, owned_by and a flat meta."""
    data = value.get("data") if isinstance(value, dict) else None
    if not isinstance(data, list):
        return []
    out = []
    for entry in data[:LIST_MAX]:
        if isinstance(entry, dict) and text(entry.get("id"), 512) is not None:
            owned_by, meta = text(entry.get("owned_by"), 512), _scalars(entry.get("meta"))
            out.append({"id": entry["id"], "owned_by": owned_by, "meta": meta})
    return out


def props_reply(value: Any) -> dict[str, Any]:
    """llama-server's ``/props``, reduced to the fields edgeprof keeps, each checked."""
    if not isinstance(value, dict):
        return {}
    gen = value.get("default_generation_settings")
    n_ctx = count(gen.get("n_ctx"), 1) if isinstance(gen, dict) else None
    out: dict[str, Any] = {
        "build_info": text(value.get("build_info")),
        "model_path": text(value.get("model_path")),
        "total_slots": count(value.get("total_slots"), 1, 1 << 16),
        "default_generation_settings": {"n_ctx": n_ctx} if n_ctx is not None else None,
    }
    return {k: v for k, v in out.items() if v is not None}


def choices(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``choices`` of a streamed chunk that are objects; [] for anything else (``"choices": 5``)."""
    items = data.get("choices")
    return [c for c in items[:16] if isinstance(c, dict)] if isinstance(items, list) else []
