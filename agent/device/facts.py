"""Facts about the machine a number was measured on (the ``device`` row every result points to: model, SoC,
cores, memory, kernel, power mode), read under a ``root`` path."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import socket
from pathlib import Path
from typing import Any


def _read(root: Path, absolute: str) -> str | None:
    try:
        return (root / absolute.lstrip("/")).read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None


def board_model(root: Path) -> str | None:
    """``/proc/device-tree/model`` (Jetson and other DT boards); the kernel ends it with a NUL."""
    text = _read(root, "/proc/device-tree/model")
    if text is None:
        return None
    text = text.replace("\x00", "").strip()
    return text or None


def l4t_release(root: Path) -> str | None:
    """'R36.4.4' style release from ``/etc/nv_tegra_release`` ('# R36 (release), REVISION: 4.4, ...')."""
    text = _read(root, "/etc/nv_tegra_release")
    if not text:
        return None
    first = text.strip().splitlines()[0]
    major = None
    revision = None
    for part in first.lstrip("# ").split(","):
        part = part.strip()
        if part.startswith("R") and "(release)" in part:
            major = part.split()[0]
        elif part.upper().startswith("REVISION:"):
            revision = part.split(":", 1)[1].strip()
    if major and revision:
        return f"{major}.{revision}"
    return major or first.strip()


def cpu_model(root: Path) -> str | None:
    text = _read(root, "/proc/cpuinfo") or ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "Hardware", "cpu model"):
            return value.strip() or None
    return None


def ram_total_mb(root: Path) -> float | None:
    text = _read(root, "/proc/meminfo") or ""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 1024.0
    return None


def os_release(root: Path) -> str | None:
    text = _read(root, "/etc/os-release") or ""
    for line in text.splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return None


def gpu_name(root: Path) -> str | None:
    """A dGPU's name via nvidia-smi's procfs twin, when the driver is loaded (no subprocess needed)."""
    gpus = root / "proc/driver/nvidia/gpus"
    try:
        for entry in sorted(gpus.iterdir()):
            info = _read(root, f"/proc/driver/nvidia/gpus/{entry.name}/information") or ""
            for line in info.splitlines():
                if line.startswith("Model:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


# A device's name in the database when it is not the hostname (`edgeprof --device-name`): two devices behind
# one hostname, or a name that says more than the hostname does
DEVICE_NAME_ENV = "EDGEPROF_DEVICE_NAME"
MAX_DEVICE_NAME = 64


def device_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a device (None when it can): it is shown in tables, labels and journals."""
    if not name.strip():
        return "the device name is empty"
    if len(name) > MAX_DEVICE_NAME:
        return f"the device name is longer than {MAX_DEVICE_NAME} characters"
    if any(not ch.isprintable() for ch in name):
        return "the device name holds a control character"
    return None


def _hostname(root: Path) -> str:
    given = os.environ.get(DEVICE_NAME_ENV, "")
    if given and device_name_problem(given) is None:
        return given.strip()
    if str(root) == "/":
        return socket.gethostname()
    return (_read(root, "/etc/hostname") or "").strip()


def collect_device_facts(root: Path | str = "/") -> dict[str, Any]:
    root = Path(root)
    machine_id = (_read(root, "/etc/machine-id") or "").strip() or None
    facts: dict[str, Any] = {
        "hostname": _hostname(root),
        "machine_id": machine_id,
        "arch": platform.machine(),
        "cpu_model": cpu_model(root),
        "cpu_count": os.cpu_count(),
        "ram_total_mb": ram_total_mb(root),
        "board_model": board_model(root),
        "l4t_release": l4t_release(root),
        "gpu": gpu_name(root),
        "kernel": platform.release(),
        "os_release": os_release(root),
        "python": platform.python_version(),
        "nvcc": shutil.which("nvcc") is not None,
    }
    return facts


def device_fingerprint(facts: dict[str, Any]) -> str:
    """Identity of a device: the facts that do not change between boots (not the kernel or Python)."""
    keys = ("hostname", "machine_id", "arch", "cpu_model", "cpu_count", "board_model", "gpu")
    ident = {k: facts.get(k) for k in keys}
    ident["ram_total_gb"] = round((facts.get("ram_total_mb") or 0) / 1024.0)
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()


def backend_of(system_info: str, gpu_offload: bool) -> str:
    text = system_info.upper()
    for name in ("CUDA", "METAL", "VULKAN", "SYCL", "HIP", "OPENCL", "CANN", "MUSA"):
        if name in text:
            return name.lower()
    return "gpu" if gpu_offload else "cpu"
