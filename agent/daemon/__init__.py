"""The unattended agent: the spool-folder daemon that systemd starts, what ``edgeprof status`` reads of it,
the install of its systemd units, and its Prometheus metrics (an HTTP endpoint in the agent, or a file for
node_exporter). Nothing here imports the CLI: ``edgeprof.cli`` maps options onto these calls.

The names below are the ones callers use; each is imported from its module on first use
(``edgeprof.lazy``), so importing the package alone costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgeprof.lazy import lazy_exports

if TYPE_CHECKING:
    from edgeprof.daemon.agent import (
        Agent,
        AgentConfig,
        configure_logging,
        parse_until,
        recover_interrupted,
        serve,
        window_closed,
    )
    from edgeprof.daemon.exposition import MetricsPortError, metrics_text, write_textfile
    from edgeprof.daemon.fleet import FleetAgent
    from edgeprof.daemon.metrics import MetricsCollector
    from edgeprof.daemon.notify import Notifier
    from edgeprof.daemon.service import install_command
    from edgeprof.daemon.status import gather_status, render_status, status_json

# module of this package -> the public names it defines, imported on first use
_HOMES: dict[str, tuple[str, ...]] = {
    "agent": (
        "Agent",
        "AgentConfig",
        "configure_logging",
        "parse_until",
        "recover_interrupted",
        "serve",
        "window_closed",
    ),
    "exposition": ("MetricsPortError", "metrics_text", "write_textfile"),
    "fleet": ("FleetAgent",),
    "metrics": ("MetricsCollector",),
    "notify": ("Notifier",),
    "service": ("install_command",),
    "status": ("gather_status", "render_status", "status_json"),
}

__all__ = [
    "Agent",
    "AgentConfig",
    "FleetAgent",
    "MetricsCollector",
    "MetricsPortError",
    "Notifier",
    "configure_logging",
    "gather_status",
    "install_command",
    "metrics_text",
    "parse_until",
    "recover_interrupted",
    "render_status",
    "serve",
    "status_json",
    "window_closed",
    "write_textfile",
]

__getattr__ = lazy_exports(__name__, _HOMES)
