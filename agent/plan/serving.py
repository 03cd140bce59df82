"""The plan's serving part, for measuring llama-server under load as well as llama.cpp in process: the
``runner`` / ``concurrency`` / ``request_rate`` matrix axes and the ``[serving]`` table. Validated with the
rest of the plan, every problem listed at once.

The ``openai`` runner measures a server edgeprof did not start, at ``[serving] target``: its model is the
server's own, so ``matrix.models`` is optional there (``foreign_target`` is what stands in for it)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from edgeprof.plan.checker import Checker
from edgeprof.runners.registry import DEFAULT_RUNNER, RUNNERS, kind_of

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
    "prompt_cache",
    "max_error_rate",
    "slo",
    "target",
    "endpoint",
    "model",
    "api_key_env",
}
SLO_KEYS = {"ttft_ms", "tpot_ms", "e2el_ms"}
FOREIGN_RUNNER = "openai"  # the runner that measures a server at [serving] target
ENDPOINTS = ("chat", "completions")  # /v1/chat/completions, /v1/completions
TARGET_EXAMPLE = '"http://127.0.0.1:8080"'
FOREIGN_KEYS = ("target", "endpoint", "model", "api_key_env")  # [serving] keys of the openai runner only
# keys that stay out of the JSON while unset, so the spec ids of earlier plans stay as they were
OPTIONAL_KEYS = (*FOREIGN_KEYS, "max_error_rate")
# the matrix axes that still mean something against a foreign server (power_mode: the device it runs on)
FOREIGN_AXES = ("models", "power_mode", *SERVING_AXES)


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
    # the openai runner's server: its URL, which endpoint, and the model name sent (None: the first of
    # its /v1/models); absent from the JSON while unset, so the spec ids of earlier plans stay as they were
    target: str | None = None
    endpoint: str | None = None
    model: str | None = None
    api_key_env: str | None = None  # the environment variable holding its API key (never the key itself)
    # the share of a level's requests that may fail with the level still ``ok`` (None: 0, none may)
    max_error_rate: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "requests": self.requests,
            "duration_s": self.duration_s,
            "warmup_requests": self.warmup_requests,
            "request_timeout_s": self.request_timeout_s,
            "ready_timeout_s": self.ready_timeout_s,
            "cache_prompt": self.cache_prompt,
            "slo": dict(self.slo),
        }
        for key in OPTIONAL_KEYS:
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


def server_slots(runner: str, concurrency: int | None) -> int:
    """The slots of a runner's server at a concurrency (``RunnerInfo.server_slots``). The memory prediction
    and the server's command line both count them."""
    return kind_of(runner).server_slots(concurrency)


def target_problem(raw: Any) -> str | None:
    """What is wrong with a ``[serving] target`` (one line), None when it is an http(s) URL with a host and a
    port (a server's root: the endpoints' paths start with /v1)."""
    expected = f"expected an http(s) URL with host and port, such as {TARGET_EXAMPLE}"
    if not isinstance(raw, str):
        return f"{expected}; got {type(raw).__name__} {raw!r}"
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError:
        return f"{expected}; got {raw!r} (bad port)"
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None:
        return f"{expected}; got {raw!r}"
    if parts.path.rstrip("/").endswith("/v1"):
        return f"give the server's root, without /v1 (the endpoint adds it); got {raw!r}"
    return None


def foreign_target(doc: dict[str, Any], matrix: dict[str, Any]) -> str | None:
    """The target URL (credentials dropped) that stands in for the model when a plan runs the openai runner
    alone and lists no models: the server has its own. "" for such a plan whose target is missing or not
    valid (``check_serving`` says why, and no model is asked for); None for every other plan."""
    runners = matrix.get("runner")
    if runners not in (FOREIGN_RUNNER, [FOREIGN_RUNNER]) or "models" in matrix:
        return None
    table = doc.get("serving")
    raw = table.get("target") if isinstance(table, dict) else None
    if raw is None or target_problem(raw) is not None:
        return ""
    from edgeprof.runners.openai_api import public_url

    return public_url(raw)


def is_server_entry(path: str) -> bool:
    """Whether a model entry's path is a foreign server's URL (``foreign_target``), not a GGUF file."""
    return path.startswith(("http://", "https://"))


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
    foreign = any(RUNNERS[r].foreign for r in runners)
    serving = _serving_table(chk, doc, foreign)
    no_chat = [RUNNERS[r] for r in runners if not RUNNERS[r].chat]
    for wl in workloads:
        for info in no_chat if getattr(wl, "messages", None) is not None else ():
            chk.add(
                f"workload '{wl.name}'",
                f"the {info.name} runner sends text or token prompts to /{info.endpoint}; a chat workload "
                "(messages) is not supported there yet",
            )
    if foreign:
        _check_foreign(chk, matrix, workloads, serving)
    return tuple(runners), tuple(conc) or (1,), tuple(rates) or (None,), serving


def _check_foreign(chk: Checker, matrix: dict[str, Any], workloads: list[Any], serving: Serving) -> None:
    """What the openai runner cannot send: token prompts to the chat endpoint, messages to the completions
    one; more than one model (the server serves one: the plan's model only names it) or several values of
    a llama.cpp axis (the server has its own)."""
    models = matrix.get("models")
    if isinstance(models, list) and len(models) > 1:
        chk.add("matrix.models", 'runner "openai" measures the one model its server serves: give at most one')
    for key, value in matrix.items():
        # the llama.cpp knobs are the server's own business: each value would measure the same server again
        if key not in FOREIGN_AXES and isinstance(value, list) and len(value) > 1:
            chk.add(
                f"matrix.{key}",
                "a server edgeprof did not start keeps its own settings: "
                f'runner "{FOREIGN_RUNNER}" takes one value here (or a plan of its own)',
            )
    for wl in workloads:
        if getattr(wl, "quality", None) is not None and "models" not in matrix:
            chk.add(
                f"workload '{wl.name}'",
                "quality (KLD) is not measured on a foreign server: its logits are out of reach; list the "
                'model file and add runner "llama-cpp" to score it in process',
            )
        if getattr(wl, "quality", None) is not None:
            continue  # a soak sends its request as any generation workload does
        if serving.endpoint == "chat" and getattr(wl, "prompt_tokens", None):
            chk.add(
                f"workload '{wl.name}'",
                'the chat endpoint takes text: give prompt or messages, or endpoint = "completions"',
            )
        if serving.endpoint == "completions" and getattr(wl, "messages", None) is not None:
            chk.add(
                f"workload '{wl.name}'",
                'the completions endpoint takes a prompt: messages need endpoint = "chat"',
            )


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


def _serving_table(chk: Checker, doc: dict[str, Any], foreign: bool) -> Serving:
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
    cache = _cache_prompt(chk, table)
    max_rate = _max_error_rate(chk, table)
    return Serving(
        requests=requests,
        duration_s=duration,
        warmup_requests=warm,
        request_timeout_s=req_t or 60.0,
        ready_timeout_s=ready_t or 120.0,
        cache_prompt=bool(cache),
        max_error_rate=max_rate,
        slo=_slo(chk, table),
        **_foreign_keys(chk, table, foreign),
    )


def _max_error_rate(chk: Checker, table: dict[str, Any]) -> float | None:
    """The share of a level's requests allowed to fail, 0 to 1; None where the plan does not say (0)."""
    if "max_error_rate" not in table:
        return None
    value = chk.number(table["max_error_rate"], "serving.max_error_rate", minimum=0.0)
    if value is not None and value > 1.0:
        chk.add("serving.max_error_rate", f"a share of the level's requests: must be <= 1, got {value:g}")
        return None
    return value


def _cache_prompt(chk: Checker, table: dict[str, Any]) -> bool | None:
    """``cache_prompt`` (llama-server's own name for it), or ``prompt_cache``: one of the two."""
    if "cache_prompt" in table and "prompt_cache" in table:
        chk.add("serving.prompt_cache", "the same setting as serving.cache_prompt: give one of the two")
    key = "prompt_cache" if "prompt_cache" in table else "cache_prompt"
    return chk.boolean(table.get(key, False), f"serving.{key}")


def _foreign_keys(chk: Checker, table: dict[str, Any], foreign: bool) -> dict[str, str | None]:
    """target, endpoint, model and api_key_env of the openai runner; a problem where they are given without
    it, or where it has no target."""
    if not foreign:
        for key in FOREIGN_KEYS:
            if key in table:
                chk.add(f"serving.{key}", f'needs runner = ["{FOREIGN_RUNNER}"] in [matrix]')
        return {}
    target = None
    if "target" not in table:
        chk.add("serving.target", f'missing: runner "{FOREIGN_RUNNER}" measures the server at this URL, '
                f"such as {TARGET_EXAMPLE}")  # fmt: skip
    elif (problem := target_problem(table["target"])) is not None:
        chk.add("serving.target", problem)
    else:
        target = table["target"]
    endpoint = table.get("endpoint", "chat")
    if endpoint not in ENDPOINTS:
        chk.add("serving.endpoint", f"expected one of {', '.join(ENDPOINTS)}, got {endpoint!r}")
        endpoint = None
    model = chk.string(table["model"], "serving.model") if "model" in table else None
    key_env = chk.string(table["api_key_env"], "serving.api_key_env") if "api_key_env" in table else None
    if key_env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key_env):
        chk.add("serving.api_key_env", f"expected the name of an environment variable, got {key_env!r}")
        key_env = None
    return {"target": target, "endpoint": endpoint or "chat", "model": model, "api_key_env": key_env}


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
