"""The agent's /metrics endpoint under many half-open connections: a few pooled threads, a connection
timeout, and connections past the limit closed at once; a scrape is served again once they are gone."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from support.hostile_cases import case

from edgeprof.daemon.exposition import (
    METRICS_CONNECTION_TIMEOUT_S,
    METRICS_THREADS,
    start_metrics_server,
)
from edgeprof.storage.db import open_engine

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("hostile", [case("metrics-half-open")], ids=lambda c: c.id)
def test_four_hundred_half_open_connections_hold_a_few_threads_and_time_out(
    tmp_path: Path, hostile: object
) -> None:
    engine = open_engine(tmp_path / "m.db")
    server = start_metrics_server(engine, 0)
    before = threading.active_count()
    held: list[socket.socket] = []
    try:
        for _ in range(400):
            held.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
        time.sleep(0.5)
        assert threading.active_count() <= before + METRICS_THREADS, threading.active_count()
        # a connection that never sends its request is closed by the server after its timeout
        first = held[0]
        first.settimeout(METRICS_CONNECTION_TIMEOUT_S + 10)
        assert first.recv(1) == b""
    finally:
        for sock in held:
            with contextlib.suppress(OSError):
                sock.close()
    deadline = time.monotonic() + 30
    while True:  # the held ones are gone: a scrape is served again
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as resp:
                assert b"edgeprof_" in resp.read()
            break
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.5)
    server.stop()
    engine.dispose()
