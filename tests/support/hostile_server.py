"""A hostile OpenAI-compatible server on 127.0.0.1, SYNTHETIC by design: it answers the way an attacker's
or a broken server would (drips bytes, sends a gzip bomb, malformed or absurd JSON), so that the openai
runner's bounds can be tested against a real socket. A well-behaved target is a real llama-server
(support.serving); this stands in only for what no real server does on purpose."""

from __future__ import annotations

import contextlib
import gzip
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODES = (
    "drip-models",  # /v1/models one byte every half second
    "drip-props",  # /props likewise
    "drip-metrics",  # /metrics likewise (a scrape inside the level)
    "bomb-models",  # /v1/models: a gzip bomb (64 MiB of zeros, ~64 KiB sent)
    "models-data-5",  # {"data": 5}
    "models-deep",  # JSON nested 100 000 deep
    "props-nctx-huge",  # default_generation_settings.n_ctx = 10**30
    "sse-choices-5",  # every chunk {"choices": 5}
    "sse-deep",  # a chunk nested 100 000 deep
    "sse-usage-huge",  # completion_tokens = 2**63
    "sse-huge-line",  # one streamed line of 2 MiB
)

_DEEP = b"[" * 100_000 + b"]" * 100_000
_BOMB: list[bytes] = []


def _bomb() -> bytes:
    if not _BOMB:
        _BOMB.append(gzip.compress(b"\0" * (64 << 20), compresslevel=9))
    return _BOMB[0]


class _Handler(BaseHTTPRequestHandler):
    mode = ""
    protocol_version = "HTTP/1.1"

    def log_message(self, *_args: Any) -> None:
        pass

    def _send(
        self, body: bytes, ctype: str = "application/json", headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _drip(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(OSError):
            for byte in body:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.5)

    def do_GET(self) -> None:
        mode = self.mode
        models = json.dumps({"object": "list", "data": [{"id": "hostile", "owned_by": "x"}]}).encode()
        if self.path == "/v1/models":
            if mode == "drip-models":
                return self._drip(models + b" " * 200)
            if mode == "bomb-models":
                return self._send(_bomb(), headers={"Content-Encoding": "gzip"})
            if mode == "models-data-5":
                return self._send(b'{"data": 5}')
            if mode == "models-deep":
                return self._send(_DEEP)
            return self._send(models)
        if self.path == "/props":
            if mode == "drip-props":
                return self._drip(b"{}" + b" " * 200)
            if mode == "props-nctx-huge":
                huge = b"1" + b"0" * 30
                props = b'{"default_generation_settings": {"n_ctx": ' + huge + b'}, "total_slots": 1}'
                return self._send(props)
            return self._send(b'{"total_slots": 1}')
        if self.path == "/metrics":
            text = b"# HELP llamacpp:tokens_predicted_total x\nllamacpp:tokens_predicted_total 1\n"
            if mode == "drip-metrics":
                return self._drip(text * 20)
            return self._send(text, "text/plain")
        self.send_error(404)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        chunk: bytes
        if self.mode == "sse-choices-5":
            chunk = b'{"choices": 5}'
        elif self.mode == "sse-deep":
            chunk = _DEEP
        elif self.mode == "sse-usage-huge":
            chunk = json.dumps(
                {
                    "choices": [{"delta": {"content": "x"}, "finish_reason": "stop"}],
                    "usage": {"completion_tokens": 2**63, "prompt_tokens": 10**30},
                    "timings": {"prompt_ms": 10**400, "cache_n": -5},
                }
            ).encode()
        elif self.mode == "sse-huge-line":
            chunk = b'"' + b"x" * (2 << 20) + b'"'
        else:
            chunk = json.dumps({"choices": [{"delta": {"content": "x"}, "finish_reason": "stop"}]}).encode()
        body = b"data: " + chunk + b"\n\ndata: [DONE]\n\n"
        self._send(body, "text/event-stream")


@contextlib.contextmanager
def hostile_server(mode: str) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a server answering in ``mode`` (one of MODES) until the block ends."""
    assert mode in MODES, mode
    handler = type("Handler", (_Handler,), {"mode": mode})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.handle_error = lambda *_args: None  # type: ignore[method-assign]  # a client hanging up is fine
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
