"""The ``power_mode`` matrix axis: nvpmodel modes a sweep switches between, and what validation may ask of
the machine to allow it.

Switching nvpmodel changes the device for everyone on it, so the axis is refused unless the plan permits it
(``[run] allow_power_mode_change = true``), the sweep runs as root on a Jetson, and every mode exists.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.device import nvpmodel_modes
from edgeprof.plan.checker import Checker, as_list


@dataclass(frozen=True)
class SystemProbe:
    """What validation may ask of the machine (injected in tests): its root, our uid, where a tool is."""

    root: Path = Path("/")
    euid: int = field(default_factory=lambda: os.geteuid())
    which: Any = None  # Callable[[str], str | None]; shutil.which by default

    def find(self, tool: str) -> str | None:
        import shutil

        return (self.which or shutil.which)(tool)


def parse_power_modes(
    chk: Checker, matrix: dict[str, Any], run_t: dict[str, Any], system: SystemProbe
) -> tuple[str, ...]:
    """The plan's power modes (none without the axis); the permission is checked even without the axis."""
    allowed = run_t.get("allow_power_mode_change", False)
    if not isinstance(allowed, bool):
        chk.add("run.allow_power_mode_change", f"expected true or false, got {allowed!r}")
        allowed = False
    if "power_mode" not in matrix:
        return ()
    return check_power_modes(chk, matrix["power_mode"], allowed, system)


def check_power_modes(chk: Checker, raw: Any, allowed: bool, system: SystemProbe) -> tuple[str, ...]:
    """Every refusal is reported before anything runs: permission, a Jetson, root, known modes."""
    items = as_list(raw)
    names: list[str] = []
    for i, item in enumerate(items):
        place = f"matrix.power_mode[{i}]" if isinstance(raw, list) else "matrix.power_mode"
        value = chk.string(item, place)
        if value is not None:
            names.append(value)
    if not items:
        chk.add("matrix.power_mode", "empty list: give mode names, or drop the key")
    if not allowed:
        chk.add(
            "matrix.power_mode",
            "switching the power mode changes the device for everything running on it; set "
            "[run] allow_power_mode_change = true to permit it",
        )
        return tuple(names)
    if system.find("nvpmodel") is None or not (system.root / "etc/nv_tegra_release").exists():
        chk.add("matrix.power_mode", "needs a Jetson with nvpmodel; this machine has none")
        return tuple(names)
    if system.euid != 0:
        chk.add(
            "matrix.power_mode",
            "nvpmodel -m needs root: run the sweep as root (the edgeprof service user cannot), or drop "
            "power_mode and compare modes as separate sweeps (edgeprof compare A B)",
        )
    _check_known_modes(chk, names, nvpmodel_modes(system.root))
    return tuple(dict.fromkeys(names))


def _check_known_modes(chk: Checker, names: list[str], modes: dict[str, int]) -> None:
    for name in names:
        if modes and name not in modes:
            chk.add("matrix.power_mode", f"unknown mode {name!r}; /etc/nvpmodel.conf has {', '.join(modes)}")
    if not modes:
        chk.add("matrix.power_mode", "no modes found in /etc/nvpmodel.conf")
    if len(set(names)) != len(names):
        chk.add("matrix.power_mode", "duplicate values")
