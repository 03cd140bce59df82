"""``edgeprof doctor``: what this machine can measure, and why not where it cannot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from edgeprof.device.facts import backend_of, collect_device_facts

_PROBE = """
import json, llama_cpp as ll
ll.llama_backend_init()
print(json.dumps({
    "version": getattr(ll, "__version__", "unknown"),
    "system_info": ll.llama_print_system_info().decode(errors="replace").strip(),
    "gpu_offload": bool(ll.llama_supports_gpu_offload()),
    "mmap": bool(ll.llama_supports_mmap()),
    "mlock": bool(ll.llama_supports_mlock()),
    "max_devices": int(ll.llama_max_devices()),
}))
"""


def llama_build_info() -> dict[str, Any]:
    """Probe llama-cpp-python in a child, so a broken build (SIGILL on import) cannot take doctor down."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"ok": False, "reason": f"probe failed: {exc}"}
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"ok": False, "reason": f"llama-cpp-python unusable (exit {proc.returncode}): {last}"}
    info: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    info["ok"] = True
    flags = Path(sys.prefix) / "share" / "edgeprof" / "llama-build.json"
    info["build_flags"] = flags.read_text().strip() if flags.exists() else None
    info["backend"] = backend_of(info["system_info"], info["gpu_offload"])
    return info


def collectors_info(root: Path) -> list[dict[str, Any]]:
    try:
        from edgeprof.collectors import describe
    except ImportError as exc:
        return [{"name": "collectors", "ok": False, "reason": f"registry unavailable: {exc}", "metrics": []}]
    return describe(root)


def llama_server_info() -> dict[str, Any]:
    """The llama-server the serving runner would use, where it came from, whether it can offload."""
    from edgeprof.runners.llama_server import find_server, probe_server

    path, where = find_server()
    if path is None:
        return {"ok": False, "reason": where}
    info = probe_server(path)
    info.update(ok="error" not in info, source=where)
    return info


def gather(root: Path | str = "/") -> dict[str, Any]:
    return {
        "device": collect_device_facts(root),
        "llama_cpp": llama_build_info(),
        "llama_server": llama_server_info(),
        "collectors": collectors_info(Path(root)),
        "system_check": system_check(root),
    }


def system_check(root: Path | str = "/") -> list[str]:
    """pyperf-style warnings about what will make numbers noisy here (``edgeprof.device.syscheck``)."""
    from edgeprof.device.jetson import jetson_state
    from edgeprof.device.syscheck import system_warnings

    return system_warnings(root, jetson=jetson_state(root))


def render(info: dict[str, Any]) -> str:
    dev = info["device"]
    lines = ["device"]
    for key in (
        "hostname",
        "arch",
        "cpu_model",
        "cpu_count",
        "ram_total_mb",
        "board_model",
        "l4t_release",
        "gpu",
        "kernel",
        "os_release",
    ):
        value = dev.get(key)
        if key == "ram_total_mb" and value is not None:
            value = f"{value:.0f}"
        lines.append(f"  {key:14s} {value if value is not None else '— (not present)'}")
    ll = info["llama_cpp"]
    lines.append("llama.cpp")
    if not ll.get("ok"):
        lines.append(f"  unusable: {ll.get('reason')}")
    else:
        lines.append(f"  llama-cpp-python {ll['version']}, backend {ll['backend']}")
        offload = "yes" if ll["gpu_offload"] else "no (CPU-only build: -ngl has no effect)"
        lines.append(f"  GPU offload      {offload}")
        lines.append(f"  mmap / mlock     {ll['mmap']} / {ll['mlock']}")
        lines.append(f"  system_info      {ll['system_info']}")
        lines.append(
            f"  build flags      {ll['build_flags'] or 'unknown (not installed by scripts/setup.sh)'}"
        )
    srv = info.get("llama_server")
    if srv is not None:
        lines.append("llama-server (serving runner)")
        if not srv.get("ok"):
            lines.append(f"  unavailable: {srv.get('reason') or srv.get('error')}")
        else:
            lines.append(f"  path             {srv['path']} ({srv['source']})")
            version = srv.get("version") or "?"
            lines.append(f"  llama.cpp        version {version}, commit {srv.get('commit') or 'unknown'}")
            devices = srv.get("devices") or []
            offload = f"yes: {'; '.join(devices)}" if devices else "no (CPU-only build: -ngl has no effect)"
            lines.append(f"  GPU offload      {offload}")
            setup = srv.get("setup")
            if setup:
                lines.append(f"  build flags      {setup.get('cmake_args') or '(llama.cpp defaults)'}")
    checks = info.get("system_check")
    if checks is not None:
        lines.append("system check (what will make numbers noisy)")
        lines += [f"  warning: {w}" for w in checks] or ["  nothing found"]
    lines.append("collectors")
    for c in info["collectors"]:
        state = "available" if c["ok"] else "unavailable"
        lines.append(f"  {c['name']:16s} {state}: {c['reason']}")
        if c["ok"] and c.get("metrics"):
            names = ", ".join(f"{m['name']} [{m['unit']}]" for m in c["metrics"][:8])
            more = f" (+{len(c['metrics']) - 8} more)" if len(c["metrics"]) > 8 else ""
            lines.append(f"  {'':16s} {names}{more}")
    return "\n".join(lines)
