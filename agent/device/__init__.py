"""The machine a number was measured on: facts, Jetson power state, noise sources, doctor.

The modules: ``facts`` (what the machine is), ``jetson``
(nvpmodel, jetson_clocks, fan: the power state a number depends on), ``syscheck`` (what on the machine would
disturb a measurement), ``record`` (its stored row) and ``doctor`` (``edgeprof doctor``).

The names below are the ones callers use; each is imported from its module on first use
(``edgeprof.lazy``), so importing the package alone costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgeprof.lazy import lazy_exports

if TYPE_CHECKING:
    from edgeprof.device.doctor import gather, llama_server_info, render
    from edgeprof.device.facts import backend_of, board_model, collect_device_facts, l4t_release
    from edgeprof.device.jetson import (
        comparable_state,
        jetson_state,
        nvpmodel_modes,
        parse_jetson_clocks_show,
        parse_nvpmodel_q,
        read_fan,
        switch_power_mode,
    )
    from edgeprof.device.record import get_or_create_device
    from edgeprof.device.syscheck import BusyScan, busy_processes, system_warnings

# module of this package -> the public names it defines, imported on first use
_HOMES: dict[str, tuple[str, ...]] = {
    "doctor": ("gather", "llama_server_info", "render"),
    "facts": ("backend_of", "board_model", "collect_device_facts", "l4t_release"),
    "jetson": (
        "comparable_state",
        "jetson_state",
        "nvpmodel_modes",
        "parse_jetson_clocks_show",
        "parse_nvpmodel_q",
        "read_fan",
        "switch_power_mode",
    ),
    "record": ("get_or_create_device",),
    "syscheck": ("BusyScan", "busy_processes", "system_warnings"),
}

__all__ = [
    "BusyScan",
    "backend_of",
    "board_model",
    "busy_processes",
    "collect_device_facts",
    "comparable_state",
    "gather",
    "get_or_create_device",
    "jetson_state",
    "l4t_release",
    "llama_server_info",
    "nvpmodel_modes",
    "parse_jetson_clocks_show",
    "parse_nvpmodel_q",
    "read_fan",
    "render",
    "switch_power_mode",
    "system_warnings",
]

__getattr__ = lazy_exports(__name__, _HOMES)
