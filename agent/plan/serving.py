"""The plan's serving part (issue 14): the ``runner`` / ``concurrency`` / ``request_rate`` matrix axes and the
``[serving]`` table. Validated with the rest of the plan, every problem listed at once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgeprof.runners.registry import DEFAULT_RUNNER, RUNNERS

SERVING_KEYS = {
    "requests",
    "duration_s",
    "warmup_requests",
    "request_timeout_s",
    "ready_timeout_s",
    "cache_prompt",
    "slo",
}
SLO_KEYS = {"ttft_ms", "tpot_ms", "e2el_ms"}


@dataclass(frozen=True)
class Serving:
    """How each serving level is loaded. ``requests`` or ``duration_s`` bounds a level (requests wins if
    both); warm-up requests run first at the level's concurrency and are stored as such, never measured."""

    requests: int | None = 32
    duration_s: float | None = None
    warmup_requests: int | None = None  # None: one per slot (= the level's concurrency)
    request_timeout_s: float = 60.0
    ready_timeout_s: float = 120.0
    cache_prompt: bool = False  # off: repeated prompts must not measure the server's prefix cache
    slo: tuple[tuple[str, float], ...] = ()  # goodput: requests meeting every one of these

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "duration_s": self.duration_s,
            "warmup_requests": self.warmup_requests,
            "request_timeout_s": self.request_timeout_s,
            "ready_timeout_s": self.ready_timeout_s,
            "cache_prompt": self.cache_prompt,
            "slo": dict(self.slo),
        }


def check_serving(
    chk: Any, doc: dict[str, Any], matrix: dict[str, Any], workloads: list[Any]
) -> tuple[tuple[str, ...], tuple[int, ...], tuple[float | None, ...], Serving | None]:
    """(runners, concurrency levels, request rates, serving table) of a plan; problems go to ``chk``."""
    runners: list[str] = []
    raw = matrix.get("runner", [DEFAULT_RUNNER])
    for i, item in enumerate(raw if isinstance(raw, list) else [raw]):
        place = f"matrix.runner[{i}]" if isinstance(raw, list) else "matrix.runner"
        if item not in RUNNERS:
            chk.add(place, f"unknown runner {item!r}; one of {', '.join(RUNNERS)}")
        elif item in runners:
            chk.add("matrix.runner", "duplicate values")
        else:
            runners.append(item)
    serving_runner = any(RUNNERS[r].serving for r in runners)

    conc: list[int] = []
    raw_c = matrix.get("concurrency", [1])
    for i, item in enumerate(raw_c if isinstance(raw_c, list) else [raw_c]):
        place = f"matrix.concurrency[{i}]" if isinstance(raw_c, list) else "matrix.concurrency"
        value = chk.integer(item, place, minimum=1)
        if value is not None:
            if value in conc:
                chk.add("matrix.concurrency", "duplicate values")
            conc.append(value)
    rates: list[float | None] = []
    if "request_rate" in matrix:
        raw_r = matrix["request_rate"]
        for i, item in enumerate(raw_r if isinstance(raw_r, list) else [raw_r]):
            place = f"matrix.request_rate[{i}]" if isinstance(raw_r, list) else "matrix.request_rate"
            value = chk.number(item, place, minimum=0.001)
            if value is not None:
                rates.append(value)
    if not serving_runner:
        for key in ("concurrency", "request_rate"):
            if key in matrix:
                chk.add(f"matrix.{key}", 'needs a serving runner: add runner = ["llama-server"]')
        if "serving" in doc:
            chk.add("serving", 'needs a serving runner: add runner = ["llama-server"] to [matrix]')
        return tuple(runners) or (DEFAULT_RUNNER,), tuple(conc) or (1,), (None,), None

    table = doc.get("serving", {})
    if not isinstance(table, dict):
        chk.add("serving", "expected a table")
        table = {}
    chk.unknown_keys(table, SERVING_KEYS, "serving")
    requests = chk.integer(table["requests"], "serving.requests", minimum=1) if "requests" in table else None
    duration = (
        chk.number(table["duration_s"], "serving.duration_s", minimum=0.1) if "duration_s" in table else None
    )
    if requests is None and duration is None and "requests" not in table and "duration_s" not in table:
        requests = 32
    warm = (
        chk.integer(table["warmup_requests"], "serving.warmup_requests", minimum=0)
        if "warmup_requests" in table
        else None
    )
    req_t = chk.number(table.get("request_timeout_s", 60.0), "serving.request_timeout_s", minimum=0.001)
    ready_t = chk.number(table.get("ready_timeout_s", 120.0), "serving.ready_timeout_s", minimum=0.1)
    cache = chk.boolean(table.get("cache_prompt", False), "serving.cache_prompt")
    slo: list[tuple[str, float]] = []
    slo_t = table.get("slo", {})
    if not isinstance(slo_t, dict):
        chk.add("serving.slo", "expected a table such as { ttft_ms = 500, tpot_ms = 50 }")
    else:
        chk.unknown_keys(slo_t, SLO_KEYS, "serving.slo")
        for key in sorted(SLO_KEYS & set(slo_t)):
            value = chk.number(slo_t[key], f"serving.slo.{key}", minimum=0.0)
            if value is not None:
                slo.append((key, value))
    for wl in workloads:
        if getattr(wl, "messages", None) is not None:
            chk.add(
                f"workload '{wl.name}'",
                "the llama-server runner sends text or token prompts to /completion; a chat workload "
                "(messages) is not supported there yet",
            )
    serving = Serving(
        requests=requests,
        duration_s=duration,
        warmup_requests=warm,
        request_timeout_s=req_t or 60.0,
        ready_timeout_s=ready_t or 120.0,
        cache_prompt=bool(cache),
        slo=tuple(slo),
    )
    return tuple(runners), tuple(conc) or (1,), tuple(rates) or (None,), serving
