"""A fleet: many devices, one central database (list sweeps by device, push, export, import, and the agent's
push in the background). The copying itself is ``edgeprof.storage.transfer``; this package chooses what to
copy and when, builds the central DB's per-second series (``series``) and ships a Grafana dashboard over
it."""

from edgeprof.fleet.dashboard import grafana_dashboard
from edgeprof.fleet.push import BackgroundPusher, start_pusher, with_connect_timeout
from edgeprof.fleet.sweeps import (
    EXPORT_FORMAT,
    SWEEPS_HEADERS,
    FleetError,
    PushResult,
    check_sweep_device,
    device_filter,
    export_sweeps,
    import_export,
    latest_sweep_of,
    list_sweeps,
    open_export,
    push_sweeps,
    render_sweeps,
    select_sweeps,
    sweep_cells,
    sweep_scope,
)

__all__ = [
    "EXPORT_FORMAT",
    "SWEEPS_HEADERS",
    "BackgroundPusher",
    "FleetError",
    "PushResult",
    "check_sweep_device",
    "device_filter",
    "export_sweeps",
    "grafana_dashboard",
    "import_export",
    "latest_sweep_of",
    "list_sweeps",
    "open_export",
    "push_sweeps",
    "render_sweeps",
    "select_sweeps",
    "start_pusher",
    "sweep_cells",
    "sweep_scope",
    "with_connect_timeout",
]
