"""The unattended agent: the spool-folder daemon that systemd starts, what ``edgeprof status`` reads of it,
the install of its systemd units, and its Prometheus metrics (an HTTP endpoint in the agent, or a file for
node_exporter). Nothing here imports the CLI: ``edgeprof.cli`` maps options onto these calls."""

from edgeprof.daemon.agent import (
    Agent,
    AgentConfig,
    configure_logging,
    parse_until,
    recover_interrupted,
    serve,
    window_closed,
)
from edgeprof.daemon.exposition import (
    DEFAULT_METRICS_ADDR,
    MetricsPortError,
    MetricsServer,
    metrics_text,
    start_metrics_server,
    write_textfile,
)
from edgeprof.daemon.metrics import MetricsCollector
from edgeprof.daemon.notify import Notifier
from edgeprof.daemon.service import install_command, installed_executable, packaged_file
from edgeprof.daemon.status import STALE_AFTER_S, gather_status, render_status, status_json

__all__ = [
    "DEFAULT_METRICS_ADDR",
    "STALE_AFTER_S",
    "Agent",
    "AgentConfig",
    "MetricsCollector",
    "MetricsPortError",
    "MetricsServer",
    "Notifier",
    "configure_logging",
    "gather_status",
    "install_command",
    "installed_executable",
    "metrics_text",
    "packaged_file",
    "parse_until",
    "recover_interrupted",
    "render_status",
    "serve",
    "start_metrics_server",
    "status_json",
    "window_closed",
    "write_textfile",
]
