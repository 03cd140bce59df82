"""The plan's serving part, for measuring llama-server under load as well as llama.cpp in process: the
``runner`` / ``concurrency`` / ``request_rate`` matrix axes and the ``[serving]`` table. Validated with the
rest of the plan, every problem listed at once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgeprof.plan.checker import Checker
from edgeprof.runners.registry import DEFAULT_RUNNER, RUNNERS

# Not in the llama.cpp axes (agent/plan/matrix.py): concurrency and request_rate cross the serving runners
# only, so the matrix does not cross them evenly.
SERVING_AXES = ("runner", "concurrency", "request_rate")

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
    chk: Checker, doc: dict[str, Any], matrix: dict[str, Any], workloads: list[Any]
) -> tuple[tuple[str, ...], tuple[int, ...], tuple[float | None, ...], Serving | None]:
    """(runners, concurrency levels, request rates, serving table) of a plan; problems go to ``chk``."""
    runners = _runners(chk, matrix)
    conc = _concurrency(chk, matrix)
    rates = _request_rates(chk, matrix)
    if not any(RUNNERS[r].serving for r in runners):
        for key in ("concurrency", "request_rate"):
            if key in matrix:
                chk.add(f"matrix.{key}", 'needs a serving runner: add runner = ["llama-server"]')
        if "serving" in doc:
            chk.add("serving", 'needs a serving runner: add runner = ["llama-server"] to [matrix]')
        return tuple(runners) or (DEFAULT_RUNNER,), tuple(conc) or (1,), (None,), None
    serving = _serving_table(chk, doc)
    for wl in workloads:
        if getattr(wl, "messages", None) is not None:
            chk.add(
                f"workload '{wl.name}'",
                "the llama-server runner sends text or token prompts to /completion; a chat workload "
                "(messages) is not supported there yet",
            )
    return tuple(runners), tuple(conc) or (1,), tuple(rates) or (None,), serving


def _places(matrix: dict[str, Any], key: str, default: Any) -> list[tuple[str, Any]]:
    """(place, item) of each value of a matrix axis given as a list or as one value."""
    raw = matrix.get(key, default)
    if isinstance(raw, list):
        return [(f"matrix.{key}[{i}]", item) for i, item in enumerate(raw)]
    return [(f"matrix.{key}", raw)]


def _runners(chk: Checker, matrix: dict[str, Any]) -> list[str]:
    runners: list[str] = []
    for place, item in _places(matrix, "runner", [DEFAULT_RUNNER]):
        if item not in RUNNERS:
            chk.add(place, f"unknown runner {item!r}; one of {', '.join(RUNNERS)}")
        elif item in runners:
            chk.add("matrix.runner", "duplicate values")
        else:
            runners.append(item)
    return runners


def _concurrency(chk: Checker, matrix: dict[str, Any]) -> list[int]:
    conc: list[int] = []
    for place, item in _places(matrix, "concurrency", [1]):
        value = chk.integer(item, place, minimum=1)
        if value is not None:
            if value in conc:
                chk.add("matrix.concurrency", "duplicate values")
            conc.append(value)
    return conc


def _request_rates(chk: Checker, matrix: dict[str, Any]) -> list[float | None]:
    rates: list[float | None] = []
    if "request_rate" not in matrix:
        return rates
    for place, item in _places(matrix, "request_rate", None):
        value = chk.number(item, place, minimum=0.001)
        if value is not None:
            rates.append(value)
    return rates


def _serving_table(chk: Checker, doc: dict[str, Any]) -> Serving:
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
    return Serving(
        requests=requests,
        duration_s=duration,
        warmup_requests=warm,
        request_timeout_s=req_t or 60.0,
        ready_timeout_s=ready_t or 120.0,
        cache_prompt=bool(cache),
        slo=_slo(chk, table),
    )


def _slo(chk: Checker, table: dict[str, Any]) -> tuple[tuple[str, float], ...]:
    """Goodput counts the requests that meet every one of these latency targets."""
    slo: list[tuple[str, float]] = []
    slo_t = table.get("slo", {})
    if not isinstance(slo_t, dict):
        chk.add("serving.slo", "expected a table such as { ttft_ms = 500, tpot_ms = 50 }")
        return ()
    chk.unknown_keys(slo_t, SLO_KEYS, "serving.slo")
    for key in sorted(SLO_KEYS & set(slo_t)):
        value = chk.number(slo_t[key], f"serving.slo.{key}", minimum=0.0)
        if value is not None:
            slo.append((key, value))
    return tuple(slo)
