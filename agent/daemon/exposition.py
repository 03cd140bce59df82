"""Where the metric set goes: an HTTP ``/metrics`` endpoint served from a thread of the agent (Prometheus
scrapes it), or a file for node_exporter's textfile collector (``edgeprof metrics --textfile``).

prometheus_client is imported here, when one of them is used: ``edgeprof status`` imports this package and
should not pay for it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from edgeprof.daemon.metrics import MetricsCollector
from edgeprof.safefs import PROM, output_file

log = logging.getLogger("edgeprof.metrics")

# Loopback unless told otherwise: the figures name the machine's models and its hostname.
DEFAULT_METRICS_ADDR = "127.0.0.1"


class MetricsPortError(RuntimeError):
    """The metrics endpoint cannot listen where it was told to (port taken, address not on this machine)."""


def registry_for(engine: Engine, device: str | None = None) -> Any:
    """A registry of its own with the edgeprof collector only (not prometheus_client's global one, which
    holds the process and platform collectors and would refuse a second agent in one process)."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(MetricsCollector(engine, device))
    return registry


@dataclass
class MetricsServer:
    """The HTTP endpoint's server and thread; ``stop`` shuts it down and frees the port."""

    server: Any
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def stop(self, timeout_s: float = 5.0) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout_s)


# Connections to /metrics: each is served by one of a few pooled threads and given a few seconds to send its
# request; past that many at once, a new one is closed at once. 400 half-open connections once made 403
# threads that waited for ever.
METRICS_THREADS = 4
METRICS_MAX_CONNECTIONS = 16
METRICS_CONNECTION_TIMEOUT_S = 5.0


def _bounded_server_class(family: int) -> type:
    from concurrent.futures import ThreadPoolExecutor
    from wsgiref.simple_server import WSGIServer

    class BoundedWSGIServer(WSGIServer):
        address_family = family
        daemon_threads = True
        # socketserver's listen backlog is 5: a burst of connections past it waits for SYN retransmits
        # (1 s, then 3 s ...) before the slot check even sees them; a deeper queue refuses them at once
        request_queue_size = 128

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            # before the bind: a port that is taken closes the server from inside __init__
            self.pool = ThreadPoolExecutor(max_workers=METRICS_THREADS, thread_name_prefix="edgeprof-metrics")
            self.open_slots = threading.BoundedSemaphore(METRICS_MAX_CONNECTIONS)
            super().__init__(*args, **kwargs)

        def process_request(self, request: Any, client_address: Any) -> None:
            if not self.open_slots.acquire(blocking=False):
                self.shutdown_request(request)  # too many at once: closed, never a thread of its own
                return
            self.pool.submit(self._serve_one, request, client_address)

        def _serve_one(self, request: Any, client_address: Any) -> None:
            try:
                self.finish_request(request, client_address)
            except Exception:  # noqa: BLE001 - one bad connection never stops the endpoint
                self.handle_error(request, client_address)
            finally:
                self.shutdown_request(request)
                self.open_slots.release()

        def server_close(self) -> None:
            super().server_close()
            self.pool.shutdown(wait=False, cancel_futures=True)

    return BoundedWSGIServer


def _quiet_handler_class() -> type:
    from wsgiref.simple_server import WSGIRequestHandler

    class QuietHandler(WSGIRequestHandler):
        timeout = METRICS_CONNECTION_TIMEOUT_S  # the socket's: a request line that never comes ends here

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return QuietHandler


def start_metrics_server(engine: Engine, port: int, addr: str = DEFAULT_METRICS_ADDR) -> MetricsServer:
    """Serve ``/metrics`` on ``addr:port`` (port 0: a free one, see ``MetricsServer.port``) from a small
    pool of threads, each connection with a timeout: a slow or half-open scrape never holds the agent's loop
    nor piles up threads. Raises MetricsPortError when it cannot listen there."""
    import socket
    from wsgiref.simple_server import make_server

    from prometheus_client import make_wsgi_app

    try:
        family = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM)[0][0]
        app = make_wsgi_app(registry_for(engine))
        server: Any = make_server(addr, port, app, _bounded_server_class(family), _quiet_handler_class())
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise MetricsPortError(f"--metrics-port {port}: cannot listen on {addr}: {reason}") from None
    thread = threading.Thread(target=server.serve_forever, name="edgeprof-metrics-server", daemon=True)
    thread.start()
    log.info("metrics: serving http://%s:%d/metrics", addr, int(server.server_address[1]))
    return MetricsServer(server, thread)


def metrics_text(engine: Engine, device: str | None = None) -> bytes:
    """The metric set in Prometheus' text format, read now."""
    from prometheus_client import generate_latest

    return bytes(generate_latest(registry_for(engine, device)))


def write_textfile(
    engine: Engine, path: Path, device: str | None = None, protect: tuple[Path, ...] = ()
) -> int:
    """Write the metric set to ``path`` through the one output guard (safefs.output_file): a temp file +
    rename in its folder, so node_exporter never reads a half-written file; never the database (``protect``)
    or its side files, a symlink, a FIFO or a file edgeprof did not write. Returns its size."""
    data = metrics_text(engine, device)
    with output_file(path, PROM, protect) as fh:
        fh.write(data)
    return len(data)
