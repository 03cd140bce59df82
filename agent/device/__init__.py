"""The machine a number was measured on: facts, Jetson power state, noise sources, doctor.

Other packages import from here, not from the modules inside: ``facts`` (what the machine is), ``jetson``
(nvpmodel, jetson_clocks, fan: the power state a number depends on), ``syscheck`` (what on the machine would
disturb a measurement), ``record`` (its stored row) and ``doctor`` (``edgeprof doctor``).
"""

from edgeprof.device.doctor import gather, llama_build_info, llama_server_info, render
from edgeprof.device.facts import (
    backend_of,
    board_model,
    collect_device_facts,
    device_fingerprint,
    l4t_release,
)
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
from edgeprof.device.syscheck import busy_processes, system_warnings

__all__ = [
    "backend_of",
    "board_model",
    "busy_processes",
    "collect_device_facts",
    "comparable_state",
    "device_fingerprint",
    "gather",
    "get_or_create_device",
    "jetson_state",
    "l4t_release",
    "llama_build_info",
    "llama_server_info",
    "nvpmodel_modes",
    "parse_jetson_clocks_show",
    "parse_nvpmodel_q",
    "read_fan",
    "render",
    "switch_power_mode",
    "system_warnings",
]
