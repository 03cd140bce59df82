"""The ``openai`` runner: a server edgeprof did not start (llama-server, vLLM, Ollama, … behind
``/v1/chat/completions`` or ``/v1/completions``), measured under the same load generator as llama-server's
native endpoint (``loadgen``; this module gives it the two endpoints) with the same levels.

Nothing is spawned, so there is no load time, no cold start and no KV prediction: a config is the server's
identity (``/v1/models``, and llama-server's ``/props`` where offered), warm-up requests, then the measured
level. Token counts come from the server's ``usage`` (asked for with ``stream_options.include_usage``);
a server that sends none is counted one token per text chunk, and the record says so
(``token_source = "chunks"``). This module never touches storage.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from edgeprof.runners import levels, loadgen
from edgeprof.runners.llama_server import ServingResult, prompt_key, scrape_metrics, text_prompt, token_prompt


def _record_usage_and_timings(rec: loadgen.RequestRecord, data: dict[str, Any]) -> None:
    """The counts of ``usage`` (OpenAI) and the figures of ``timings`` (llama-server's extension), where the
    chunk has them (vLLM sends ``"usage": null`` on every chunk but the last)."""
    for choice in loadgen.choices(data):
        reason = loadgen.text(choice.get("finish_reason"), 64)
        if reason:
            rec.finish_reason = reason
    usage = data.get("usage")
    if isinstance(usage, dict):
        out = loadgen.count(usage.get("completion_tokens"))
        prompt = loadgen.count(usage.get("prompt_tokens"))
        if out is not None:
            rec.output_tokens, rec.token_source = out, "usage"
        if prompt is not None:
            rec.prompt_tokens = prompt
        details = usage.get("prompt_tokens_details")
        cached = loadgen.count(details.get("cached_tokens")) if isinstance(details, dict) else None
        if cached is not None:
            rec.server_cache_n = cached  # the prompt tokens the server's cache served (OpenAI's name)
    timings = data.get("timings")
    if isinstance(timings, dict):
        rec.server_prompt_ms = loadgen.number(timings.get("prompt_ms"))
        rec.server_predicted_ms = loadgen.number(timings.get("predicted_ms"))
        cache_n = loadgen.count(timings.get("cache_n"))  # llama-server's own count of the same
        if cache_n is not None:  # a chunk without it leaves the usage's count
            rec.server_cache_n = cache_n


def _first_choice(data: dict[str, Any]) -> dict[str, Any]:
    choices = loadgen.choices(data)
    return choices[0] if choices else {}


def _text_arrived(rec: loadgen.RequestRecord, text: Any, t_arrival: float) -> None:
    if isinstance(text, str) and text:
        if rec.t_first is None:
            rec.t_first = t_arrival
        rec.chunk_times.append(t_arrival)


def fold_chat(rec: loadgen.RequestRecord, data: dict[str, Any], t_arrival: float) -> bool:
    """One ``chat.completion.chunk``: generated text is ``delta.content`` (or a reasoning model's
    ``delta.reasoning_content``: tokens it generated all the same). Never the last: ``[DONE]`` is."""
    delta = _first_choice(data).get("delta")
    if isinstance(delta, dict):
        content = delta.get("content") or delta.get("reasoning_content")
        _text_arrived(rec, content, t_arrival)
    _record_usage_and_timings(rec, data)
    return False


def fold_completions(rec: loadgen.RequestRecord, data: dict[str, Any], t_arrival: float) -> bool:
    """One ``text_completion`` chunk: generated text is ``choices[0].text``. Never the last: ``[DONE]`` is."""
    _text_arrived(rec, _first_choice(data).get("text"), t_arrival)
    _record_usage_and_timings(rec, data)
    return False


def finish(rec: loadgen.RequestRecord) -> bool:
    """The stream ended: complete when a finish reason came. No ``usage``: the text chunks are counted, and
    labelled so (a chunk may hold more than one token, or none)."""
    if rec.finish_reason is None:
        return False
    if rec.output_tokens is None:
        rec.output_tokens, rec.token_source = len(rec.chunk_times), "chunks"
    if rec.t_first is None and rec.output_tokens:
        rec.t_first = rec.t_end  # every token came without text (or in the last chunk)
    return True


CHAT = loadgen.Endpoint("/v1/chat/completions", fold_chat, finish)
COMPLETIONS = loadgen.Endpoint("/v1/completions", fold_completions, finish)
ENDPOINTS: dict[str, loadgen.Endpoint] = {"chat": CHAT, "completions": COMPLETIONS}


def public_url(target: str) -> str:
    """The target without credentials (``user:password@`` dropped), path and query kept: what is stored."""
    parts = urlsplit(target)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"  # IPv6
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


def _messages(wl: dict[str, Any], key: str | None) -> list[dict[str, str]]:
    """The workload's chat messages (the server applies its own template), or its text prompt as one user
    message; the request's key (``prompt_key``) at the start of the first, so no two prompts share more than
    the template's opening."""
    given = wl.get("messages")
    pairs = [(str(r), str(c)) for r, c in given] if given else [("user", str(wl.get("prompt") or ""))]
    return [
        {"role": role, "content": text_prompt(content, key) if i == 0 else content}
        for i, (role, content) in enumerate(pairs)
    ]


def payload_for(job: dict[str, Any], model: str | None, idx: int) -> dict[str, Any]:
    """The body of request ``idx``: the workload greedy by default, streamed with usage, its prompt its own
    (``prompt_key``) and ``cache_prompt`` as the plan says (off unless it asks: llama.cpp's servers reuse a
    prompt's prefix otherwise, and TTFT would measure the cache). ``ignore_eos``, ``top_k`` and
    ``cache_prompt`` are not OpenAI's, but llama-server honours them (vLLM the first two; a fixed output
    length needs the first)."""
    wl, serving = job["workload"], job["serving"]
    endpoint = serving.get("endpoint") or "chat"
    key = prompt_key(serving, idx)
    body: dict[str, Any] = {"model": model} if model else {}
    if endpoint == "chat":
        body["messages"] = _messages(wl, key)
    elif wl.get("prompt_tokens"):
        body["prompt"] = token_prompt(int(wl["prompt_tokens"]), job.get("vocab_size"), key)
    else:
        body["prompt"] = text_prompt(str(wl.get("prompt") or ""), key)
    body.update(
        max_tokens=int(wl["n_predict"]),
        temperature=float(wl.get("temperature", 0.0)),
        top_p=float(wl.get("top_p", 0.95)),
        top_k=int(wl.get("top_k", 40)),
        seed=int(wl.get("seed", 42)),
        ignore_eos=bool(wl.get("ignore_eos", True)),
        cache_prompt=bool(serving.get("cache_prompt", False)),
        stream=True,
        stream_options={"include_usage": True},
    )
    if wl.get("stop"):
        body["stop"] = list(wl["stop"])
    return body


async def _get(client: Any, url: str, timeout_s: float = 5.0) -> tuple[int | None, Any, str | None]:
    """(HTTP status, JSON body or None, the problem) of one GET, whole within ``timeout_s``."""
    return await loadgen.get_json(client, url, timeout_s)


def identity_of(target: str, endpoint: str, models: Any, props: Any) -> dict[str, Any]:
    """What the server says it is: the model ids of ``/v1/models`` (and llama-server's ``meta`` of the
    first), and from ``/props`` its build and model file; a field the server does not offer is None."""
    entries = loadgen.models_reply(models)
    props = loadgen.props_reply(props)
    gen = props.get("default_generation_settings")
    meta = entries[0].get("meta") if entries else None
    return {
        "target": public_url(target),
        "endpoint": endpoint,
        "models": [m["id"] for m in entries] or None,
        "owned_by": entries[0].get("owned_by") if entries else None,
        "model_meta": meta if isinstance(meta, dict) else None,
        "build_info": props.get("build_info"),
        "model_path": props.get("model_path"),
        "total_slots": props.get("total_slots"),
        "slot_n_ctx": gen.get("n_ctx") if isinstance(gen, dict) else None,
    }


def auth_headers(serving: dict[str, Any], env: dict[str, str] | None) -> tuple[dict[str, str], str | None]:
    """(headers, problem): ``Authorization: Bearer`` from the variable ``api_key_env`` names (a key never
    sits in the plan, which is stored with the sweep); the problem when that variable is not set."""
    name = serving.get("api_key_env")
    if not name:
        return {}, None
    key = (os.environ if env is None else env).get(str(name))
    if not key:
        return {}, f"${name} is not set (serving.api_key_env names it for the target's API key)"
    return {"Authorization": f"Bearer {key}"}, None


def control_client(headers: dict[str, str]) -> Any:
    """One kept-alive connection for the driver's own requests (``/v1/models``, ``/props``, ``/metrics``),
    made before anything is timed (as llama-server's driver does)."""
    import httpx

    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    return httpx.AsyncClient(limits=limits, headers=headers)


def run_openai(
    job: dict[str, Any],
    timeout_s: float,
    *,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    heartbeat: Callable[[], None] | None = None,
    env: dict[str, str] | None = None,
) -> ServingResult:
    """One config against the target: identity → warm-ups → the measured level. ``res.props`` is the
    identity; ``t_spawn`` is the config's start (nothing was spawned: no ready or cold-start time)."""
    res = ServingResult(status="error", reason=None, t_spawn=time.monotonic())
    headers, problem = auth_headers(job["serving"], env)
    if problem is not None:
        res.reason = problem
        return res
    if on_event is not None:
        on_event({"event": "start", "pid": None, "runner": "openai"})
    drive = _Drive(job, res, res.t_spawn + timeout_s, on_event, heartbeat, headers)
    try:
        asyncio.run(drive.run())
    except KeyboardInterrupt:
        res.status, res.reason = "interrupted", "stopped by the user (Ctrl-C / SIGTERM) during this run"
    return res


class _Drive(levels.LevelDriver):
    """One config against a running server (its levels are ``levels.LevelDriver``'s, shared with
    llama-server's runner); every way it can stop early is a status and a reason."""

    def __init__(
        self,
        job: dict[str, Any],
        res: ServingResult,
        deadline: float,
        on_event: Callable[[dict[str, Any]], None] | None,
        heartbeat: Callable[[], None] | None,
        headers: dict[str, str],
    ) -> None:
        target = str(job["serving"]["target"]).rstrip("/")
        super().__init__(job, res, target, deadline, on_event, heartbeat)
        self.target, self.headers = target, headers
        self.endpoint_name = str(self.serving.get("endpoint") or "chat")
        self.endpoint = ENDPOINTS[self.endpoint_name]
        self.model: str | None = self.serving.get("model")
        self.has_metrics: bool | None = None  # known at the first read of the counters
        self.control: Any = None

    def control_s(self, cap_s: float = loadgen.CONTROL_DEADLINE_S) -> float:
        return loadgen.deadline_left(self.deadline, cap_s)

    async def run(self) -> None:
        async with control_client(self.headers or {}) as self.control:
            await self.steps()

    async def steps(self) -> None:
        if not await self.identify():
            return
        await self.levels(first_idx=0)

    async def identify(self) -> bool:
        """``/v1/models`` (an unreachable target ends the config here), ``/props`` where offered."""
        code, models, error = await _get(self.control, self.target + "/v1/models", self.control_s())
        if code is None:
            self.res.reason = f"target {public_url(self.target)} unreachable: {error}"
            return False
        _pc, props, _pe = await _get(self.control, self.target + "/props", self.control_s())
        self.res.props = identity_of(self.target, self.endpoint_name, models, props)
        if self.model is None and self.res.props["models"]:
            self.model = self.res.props["models"][0]  # the one it serves (the first, where it lists several)
        self.res.props["model"] = self.model
        return True

    def payload(self, idx: int) -> dict[str, Any]:
        return payload_for(self.job, self.model, idx)

    async def counters(self) -> dict[str, float] | None:
        """``/metrics`` where the server has it (llama-server --metrics; most others: none, and a server
        without it at the first read is not asked again)."""
        if self.has_metrics is False:
            return None
        got = await scrape_metrics(self.target, self.control_s(), client=self.control)
        if self.has_metrics is None:
            self.has_metrics = got is not None
        return got

    async def poll(self, kind: str, concurrency: int) -> dict[str, float] | None:
        """Beats the sweep's lease while requests run; polls ``/metrics`` only where the server has it."""
        self.beat()
        if not self.has_metrics:
            return None
        return await scrape_metrics(self.target, timeout_s=self.control_s(2.0), client=self.control)
