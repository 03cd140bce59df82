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


def start_metrics_server(engine: Engine, port: int, addr: str = DEFAULT_METRICS_ADDR) -> MetricsServer:
    """Serve ``/metrics`` on ``addr:port`` (port 0: a free one, see ``MetricsServer.port``) from daemon
    threads, one per request: a slow scrape never holds the agent's loop. Raises MetricsPortError when it
    cannot listen there."""
    from prometheus_client import start_http_server

    try:
        server, thread = start_http_server(port, addr=addr, registry=registry_for(engine))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise MetricsPortError(f"--metrics-port {port}: cannot listen on {addr}: {reason}") from None
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
