"""The unattended agent: the spool-folder daemon that systemd starts, what ``edgeprof status`` reads of it,
and the install of its systemd units. Nothing here imports the CLI: ``edgeprof.cli`` maps options onto
these calls."""

from edgeprof.daemon.agent import (
    Agent,
    AgentConfig,
    configure_logging,
    parse_until,
    recover_interrupted,
    serve,
    window_closed,
)
from edgeprof.daemon.notify import Notifier
from edgeprof.daemon.service import install_command, installed_executable, packaged_file
from edgeprof.daemon.status import STALE_AFTER_S, gather_status, render_status, status_json

__all__ = [
    "STALE_AFTER_S",
    "Agent",
    "AgentConfig",
    "Notifier",
    "configure_logging",
    "gather_status",
    "install_command",
    "installed_executable",
    "packaged_file",
    "parse_until",
    "recover_interrupted",
    "render_status",
    "serve",
    "status_json",
    "window_closed",
]
