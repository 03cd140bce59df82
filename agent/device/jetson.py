"""Jetson state that changes what a number means: power mode (nvpmodel), jetson_clocks, fan.

Read at sweep start and again before each config; a change mid-sweep is stored with the run and flagged in
the report. edgeprof records this state and never changes it silently (a power-mode axis in a plan is the only
thing that switches nvpmodel, and only where permitted).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

RunCmd = Callable[[list[str]], "str | None"]


def run_cmd(argv: list[str], timeout_s: float = 10.0) -> str | None:
    """stdout of a command, or None when it is missing, fails or hangs (state unknown, not an error)."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def parse_nvpmodel_q(text: str) -> dict[str, Any] | None:
    """``nvpmodel -q``: 'NV Power Mode: MAXN' then the mode id on the next line (last block wins)."""
    name: str | None = None
    mode_id: int | None = None
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    for i, line in enumerate(lines):
        if line.startswith("NV Power Mode:"):
            name = line.split(":", 1)[1].strip()
            mode_id = None
            if i + 1 < len(lines) and lines[i + 1].isdigit():
                mode_id = int(lines[i + 1])
    if name is None:
        return None
    return {"name": name, "id": mode_id}


_KV = re.compile(r"(\w+)=(\S+)")


def parse_jetson_clocks_show(text: str) -> dict[str, Any]:
    """``jetson_clocks --show`` (root only): per-CPU governor/min/max/current, GPU and EMC limits, fan.

    ``locked`` is True when every listed CPU and the GPU have min == max: that is what jetson_clocks does,
    and it makes numbers incomparable with a board left to DVFS.
    """
    out: dict[str, Any] = {"cpus": {}, "gpu": None, "emc": None, "fan": None, "power_mode": None}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("SOC family:"):
            m = re.match(r"SOC family:(\S+)\s+Machine:(.+)", line)
            if m:
                out["soc_family"], out["machine"] = m.group(1), m.group(2).strip()
        elif re.match(r"cpu\d+:", line):
            cpu, rest = line.split(":", 1)
            kv = dict(_KV.findall(rest))
            out["cpus"][cpu] = {
                "online": kv.get("Online", "1") == "1",
                # the TX1-era script prints the typo 'Gonvernor'
                "governor": kv.get("Governor") or kv.get("Gonvernor"),
                "min_khz": _int(kv.get("MinFreq")),
                "max_khz": _int(kv.get("MaxFreq")),
                "cur_khz": _int(kv.get("CurrentFreq")),
            }
        elif line.startswith(("GPU ", "EMC ")):
            kv = dict(_KV.findall(line))
            out[line[:3].lower()] = {
                "min_hz": _int(kv.get("MinFreq")),
                "max_hz": _int(kv.get("MaxFreq")),
                "cur_hz": _int(kv.get("CurrentFreq")),
            }
        elif line.startswith("FAN"):
            kv = dict(_KV.findall(line))
            pwm = next((v for k, v in kv.items() if k.endswith("pwm1")), None)
            out["fan"] = {"pwm": _int(pwm), "dynamic": "Dynamic Speed control=active" in line}
        elif line.startswith("NV Power Mode:"):
            out["power_mode"] = line.split(":", 1)[1].strip()
    cpus = [c for c in out["cpus"].values() if c["online"]]
    limits = [(c["min_khz"], c["max_khz"]) for c in cpus]
    if out["gpu"]:
        limits.append((out["gpu"]["min_hz"], out["gpu"]["max_hz"]))
    out["locked"] = bool(limits) and all(lo is not None and lo == hi for lo, hi in limits)
    return out


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def read_fan(root: Path) -> dict[str, Any] | None:
    """The board fan from hwmon (``pwmfan``/``pwm-fan``): PWM 0–255 and RPM where the driver reports it."""
    hwmon = root / "sys/class/hwmon"
    try:
        entries = sorted(hwmon.iterdir())
    except OSError:
        return None
    for entry in entries:
        try:
            name = (entry / "name").read_text().strip()
        except OSError:
            continue
        if name not in ("pwmfan", "pwm-fan", "pwm_fan"):
            continue
        fan: dict[str, Any] = {"hwmon": entry.name}
        for key, fname in (("pwm", "pwm1"), ("rpm", "fan1_input"), ("rpm", "rpm")):
            try:
                fan[key] = int((entry / fname).read_text().split()[0])
            except (OSError, ValueError, IndexError):
                fan.setdefault(key, None)
        return fan
    return None


def jetson_state(root: Path | str = "/", cmd: RunCmd | None = None) -> dict[str, Any] | None:
    """Power mode, jetson_clocks and fan state; None on a machine that is not a Jetson."""
    root = Path(root)
    if not (root / "etc/nv_tegra_release").exists():
        return None
    runner = cmd or run_cmd
    nvp = runner(["nvpmodel", "-q"])
    clocks = runner(["jetson_clocks", "--show"])
    parsed_clocks = parse_jetson_clocks_show(clocks) if clocks else None
    return {
        "nvpmodel": parse_nvpmodel_q(nvp) if nvp else None,
        "jetson_clocks": (
            {"locked": parsed_clocks["locked"], "power_mode": parsed_clocks.get("power_mode")}
            if parsed_clocks
            else None
        ),
        "fan": read_fan(root),
    }


def comparable_state(state: dict[str, Any] | None) -> dict[str, Any] | None:
    """The part of the state that makes numbers incomparable when it changes (not the fan's momentary PWM)."""
    if state is None:
        return None
    nvp = state.get("nvpmodel") or {}
    jc = state.get("jetson_clocks") or {}
    return {"power_mode": nvp.get("name"), "power_mode_id": nvp.get("id"), "clocks_locked": jc.get("locked")}


def switch_power_mode(name: str, root: Path | str = "/", settle_s: float = 3.0) -> str | None:
    """``nvpmodel -m ID`` for a mode name from ``/etc/nvpmodel.conf``; None on success, else why not.

    Only reached when a plan has a ``power_mode`` axis and ``[run] allow_power_mode_change = true`` and runs
    as root (validation refuses otherwise). A reboot prompt, which some mode changes raise, is declined:
    such a mode cannot be switched between configs, and the run says so.
    """
    modes = nvpmodel_modes(Path(root))
    if name not in modes:
        return f"mode {name!r} is not in /etc/nvpmodel.conf"
    if shutil.which("nvpmodel") is None:
        return "nvpmodel not found"
    try:
        proc = subprocess.run(
            ["nvpmodel", "-m", str(modes[name])],
            input="NO\n",
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvpmodel -m {modes[name]} failed: {exc}"
    if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        return f"nvpmodel -m {modes[name]} exited {proc.returncode}: {last}"
    import time

    time.sleep(settle_s)  # clocks and fan follow the new mode within a second or two
    return None


def nvpmodel_modes(root: Path) -> dict[str, int]:
    """Power modes defined in ``/etc/nvpmodel.conf`` (``< POWER_MODEL ID=0 NAME=MAXN >``): name -> id."""
    import re

    try:
        text = (root / "etc/nvpmodel.conf").read_text(errors="replace")
    except OSError:
        return {}
    modes: dict[str, int] = {}
    for m in re.finditer(r"<\s*POWER_MODEL\s+ID=(\d+)\s+NAME=([^\s>]+)\s*>", text):
        modes[m.group(2)] = int(m.group(1))
    return modes
