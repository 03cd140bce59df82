"""The openai runner's SSE parsing, on real llama-server streams of both endpoints (the captures' README
names their source): what a record holds after every chunk, how the stream's end settles it, and what a
server that sends no usage is counted as (labelled, never passed off as the server's count)."""

from __future__ import annotations

import json

from support.captures import CAPTURES, read_capture

from edgeprof.runners import loadgen
from edgeprof.runners.llama_server import prompt_key
from edgeprof.runners.openai_api import (
    CHAT,
    COMPLETIONS,
    ENDPOINTS,
    auth_headers,
    identity_of,
    payload_for,
    public_url,
)

SSE = CAPTURES / "openai_sse"


def fold_capture(name: str, drop_usage: bool = False) -> loadgen.RequestRecord:
    """Every line of a capture through the endpoint, as ``loadgen.stream_request`` does, line i at t = i."""
    endpoint = ENDPOINTS[name]
    rec = loadgen.RequestRecord(idx=0, kind="measured")
    for i, line in enumerate(read_capture(f"llama-server_{name}_stream.txt", SSE)):
        if loadgen.is_done_line(line):
            loadgen.settle(rec, endpoint, float(i))
            return rec
        data = loadgen.parse_sse_line(line)
        if data is not None:
            if drop_usage:
                data.pop("usage", None)
            endpoint.fold(rec, data, float(i))
    raise AssertionError("the capture has no [DONE] line")


def usage_of(name: str) -> dict[str, int]:
    lines = read_capture(f"llama-server_{name}_stream.txt", SSE)
    chunks = [d for line in lines if (d := loadgen.parse_sse_line(line)) is not None]
    return next(c["usage"] for c in chunks if isinstance(c.get("usage"), dict))


def test_chat_chunks_give_the_text_times_and_the_usage_counts() -> None:
    rec = fold_capture("chat")
    assert rec.status == "ok" and rec.finish_reason == "length"
    usage = usage_of("chat")
    assert (rec.output_tokens, rec.prompt_tokens, rec.token_source) == (
        usage["completion_tokens"],
        usage["prompt_tokens"],
        "usage",
    )
    # the role chunk (content null) and the finish chunk (empty delta) carry no text: lines 3, 5 and 7 do
    assert rec.t_first == 2.0 and rec.chunk_times == [2.0, 4.0, 6.0]
    assert rec.t_end == 12.0  # the [DONE] line
    assert rec.server_prompt_ms is not None and rec.server_predicted_ms is not None  # llama-server's timings
    assert rec.server_cache_n == 0


def test_completions_chunks_give_the_text_times_and_the_usage_counts() -> None:
    rec = fold_capture("completions")
    assert rec.status == "ok" and rec.finish_reason == "length"
    usage = usage_of("completions")
    assert (rec.output_tokens, rec.prompt_tokens, rec.token_source) == (
        usage["completion_tokens"],
        usage["prompt_tokens"],
        "usage",
    )
    # four text chunks; the last chunk's text is empty (it carries the finish reason and the usage)
    assert rec.chunk_times == [0.0, 2.0, 4.0, 6.0] and rec.t_first == 0.0
    assert rec.server_cache_n == 4  # the server reused 4 prompt tokens from its slot's cache


def test_without_usage_the_text_chunks_are_counted_and_labelled_so() -> None:
    chat = fold_capture("chat", drop_usage=True)
    # three text chunks though the server generated 4 tokens: one chunk held a byte token back
    assert (chat.output_tokens, chat.token_source, chat.prompt_tokens) == (3, "chunks", None)
    assert usage_of("chat")["completion_tokens"] == 4
    comp = fold_capture("completions", drop_usage=True)
    assert (comp.output_tokens, comp.token_source) == (4, "chunks")


def test_a_stream_without_a_finish_reason_is_an_error() -> None:
    rec = loadgen.RequestRecord(idx=0, kind="measured")
    for i, line in enumerate(read_capture("llama-server_chat_stream.txt", SSE)[:6]):  # cut before the finish
        if (data := loadgen.parse_sse_line(line)) is not None:
            CHAT.fold(rec, data, float(i))
    loadgen.settle(rec, CHAT, 6.0)
    assert rec.status == "error" and "finish_reason" in (rec.error or "")
    assert rec.output_tokens is None  # never guessed for a request that did not complete


def test_the_request_bodies_ask_for_usage_and_keep_prompts_apart() -> None:
    wl = {"prompt": "Once upon a time", "n_predict": 4}
    chat = payload_for({"workload": wl, "serving": {"endpoint": "chat", "nonce": "ab12"}}, "m", 3)
    key3 = prompt_key({"nonce": "ab12"}, 3)
    assert chat["messages"] == [{"role": "user", "content": f"[{key3}] Once upon a time"}]
    assert chat["cache_prompt"] is False  # llama.cpp's servers reuse a prompt's prefix unless told not to
    assert chat["stream"] is True and chat["stream_options"] == {"include_usage": True}
    assert (chat["model"], chat["max_tokens"], chat["ignore_eos"]) == ("m", 4, True)
    comp = payload_for(
        {"workload": wl, "serving": {"endpoint": "completions", "cache_prompt": True}}, None, 3
    )
    assert comp["prompt"] == "Once upon a time" and "model" not in comp  # caching on: the same prompt
    assert comp["cache_prompt"] is True
    msgs = {"messages": [["system", "be brief"], ["user", "hi"]], "n_predict": 2}
    body = payload_for({"workload": msgs, "serving": {"endpoint": "chat", "nonce": "ab12"}}, "m", 1)
    assert body["messages"] == [  # the key at the prompt's very start: no two prompts share a prefix
        {"role": "system", "content": f"[{prompt_key({'nonce': 'ab12'}, 1)}] be brief"},
        {"role": "user", "content": "hi"},
    ]
    job = {
        "workload": {"prompt_tokens": 5, "n_predict": 2},
        "serving": {"endpoint": "completions"},
        "vocab_size": 1024,
    }
    tokens = payload_for(job, "m", 0)
    assert isinstance(tokens["prompt"], list) and len(tokens["prompt"]) == 5
    assert COMPLETIONS.path == "/v1/completions" and CHAT.path == "/v1/chat/completions"


def test_the_identity_keeps_what_the_server_offered_and_null_for_the_rest() -> None:
    # /v1/models as the captured chat stream's server lists it (its model id is the chunks' "model")
    first = loadgen.parse_sse_line(read_capture("llama-server_chat_stream.txt", SSE)[0])
    assert first is not None
    models = {"object": "list", "data": [{"id": first["model"], "object": "model", "owned_by": "llamacpp"}]}
    ident = identity_of("http://user:secret@127.0.0.1:8080/", "chat", models, None)
    assert ident["target"] == "http://127.0.0.1:8080"  # no credentials stored
    assert ident["models"] == [first["model"]] and ident["owned_by"] == "llamacpp"
    assert ident["build_info"] is None and ident["total_slots"] is None  # no /props: NULL, never guessed
    bare = identity_of("http://h:1", "completions", {"error": "not found"}, "404 page")
    assert bare["models"] is None and bare["model_meta"] is None
    assert json.dumps(bare)  # storable as it is
    assert public_url("https://[::1]:8443/prefix/") == "https://[::1]:8443/prefix"


def test_the_api_key_is_read_from_the_named_variable_at_run_time() -> None:
    serving = {"api_key_env": "K"}
    assert auth_headers(serving, {"K": "abc"}) == ({"Authorization": "Bearer abc"}, None)
    headers, problem = auth_headers(serving, {})
    assert headers == {} and problem is not None and problem.startswith("$K is not set")
    assert auth_headers({}, {}) == ({}, None)


def test_the_cached_prompt_tokens_come_from_usage_or_llama_servers_timings() -> None:
    """An OpenAI-compatible server's ``usage.prompt_tokens_details.cached_tokens``, or llama-server's own
    ``timings.cache_n``; never ``tokens_cached`` (llama-server's whole slot after the request, generated
    tokens included: 17 for a 14-token prompt with nothing cached)."""
    rec = loadgen.RequestRecord(idx=0, kind="measured")
    usage = {"completion_tokens": 4, "prompt_tokens": 52, "prompt_tokens_details": {"cached_tokens": 48}}
    CHAT.fold(rec, {"choices": [{"delta": {}, "finish_reason": "length"}], "usage": usage}, 1.0)
    assert rec.server_cache_n == 48 and rec.prompt_tokens == 52
    plain = loadgen.RequestRecord(idx=1, kind="measured")
    CHAT.fold(plain, {"choices": [], "usage": {"completion_tokens": 4, "prompt_tokens": 52}}, 1.0)
    assert plain.server_cache_n is None  # not said: not measured, never 0
    native = loadgen.RequestRecord(idx=2, kind="measured")
    timings = {"cache_n": 0, "prompt_n": 14}
    final = {"stop": True, "tokens_cached": 17, "tokens_predicted": 4, "timings": timings}
    loadgen.apply_chunk(native, final, 1.0)
    assert native.server_cache_n == 0
