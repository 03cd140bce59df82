"""Bounded HTTP reads from a serving target, and the shapes its replies must have before they are used.

A target is outside edgeprof's control: a server that sends ``/v1/models`` one byte a second never trips a
per-read timeout (httpx's ``timeout`` is per socket operation), a gzip bomb grows to gigabytes when decoded,
JSON nested a million deep or a count of 10^30 reaches the database as an exception. So every GET here has one
deadline for the whole reply (connect, first byte and body), a cap on the bytes read, asks for no encoding
and decodes one only within the same cap; and a reply is reduced to the fields edgeprof reads, each checked
for type and range, before anything else sees it. A reply that fails is ``None``: the caller treats it as
a target that does not offer that field, never as an exception.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import zlib
from typing import Any

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
