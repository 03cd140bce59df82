"""A fleet: many devices, one central database (list sweeps by device, push, export, import, and the agent's
push in the background). The copying itself is ``edgeprof.storage.transfer``; this package chooses what to
copy and when, builds the central DB's per-second series (``series``) and ships a Grafana dashboard over
it.

The names below are the ones callers use; each is imported from its module on first use
(``edgeprof.lazy``), so importing the package alone costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgeprof.lazy import lazy_exports

if TYPE_CHECKING:
    from edgeprof.fleet.dashboard import grafana_dashboard
    from edgeprof.fleet.push import BackgroundPusher, start_pusher, with_connect_timeout
    from edgeprof.fleet.sweeps import (
        SWEEPS_HEADERS,
        FleetError,
        check_sweep_device,
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

# module of this package -> the public names it defines, imported on first use
_HOMES: dict[str, tuple[str, ...]] = {
    "dashboard": ("grafana_dashboard",),
    "push": ("BackgroundPusher", "start_pusher", "with_connect_timeout"),
    "sweeps": (
        "SWEEPS_HEADERS",
        "FleetError",
        "check_sweep_device",
        "export_sweeps",
        "import_export",
        "latest_sweep_of",
        "list_sweeps",
        "open_export",
        "push_sweeps",
        "render_sweeps",
        "select_sweeps",
        "sweep_cells",
        "sweep_scope",
    ),
}

__all__ = [
    "SWEEPS_HEADERS",
    "BackgroundPusher",
    "FleetError",
    "check_sweep_device",
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

__getattr__ = lazy_exports(__name__, _HOMES)
