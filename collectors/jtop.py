"""Jetson telemetry from the jetson-stats ``jtop`` client (talks to ``jtop.service`` over ``/run/jtop.sock``).

Metric names match the tegrastats collector, so either source fills the same columns:

- ``mem.ram_used_mb``, ``mem.ram_total_mb``, ``mem.swap_used_mb`` (MB): jtop's ``memory['RAM']`` /
  ``memory['SWAP']`` (kB there; MiB here). jtop's RAM "used" excludes buffers and page cache.
- ``mem.shared_mb`` (MB): ``memory['RAM']['shared']``, NvMap memory shared between CPU and GPU (what the
  iGPU has allocated); kB -> MiB.
- ``cpu.util_pct`` (pct): 100 - ``cpu['total']['idle']``; ``cpu{i}.util_pct`` (pct) and ``cpu{i}.freq_mhz``
  (MHz, from kHz) per core in jtop's order (cpu0 first); None while a core is offline.
- ``gpu.util_pct`` (pct) and ``gpu.freq_mhz`` (MHz, from kHz): the first GPU in ``jtop.gpu``.
- ``emc.util_pct`` (pct) and ``emc.freq_mhz`` (MHz): ``memory['EMC']`` where the board reports it.
- ``temp.<sensor>_c`` (C): ``temperature[<sensor>]['temp']``, the name lower-cased; None when the sensor is
  offline (jtop reports -256).
- ``power.<rail>_mw`` (mW): ``power['rail'][<rail>]['power']``, the name lower-cased. jtop moves the board
  input rail (``VDD_IN``, ``POM_5V_IN`` or ``VIN``) out of the rails into ``power['tot']``; it is reported
  under its own name (``power.vdd_in_mw``, as tegrastats gives it). On boards without one, jtop's total is
  the sum of the rails and is reported as ``power.total_mw``.
- ``fan.<name>_pct`` (pct) and ``fan.<name>_rpm`` (rpm): ``fan[<name>]['speed'][0]`` / ``['rpm'][0]``;
  further fans of one controller get ``_2``, ``_3``, ...

Names that are not ``[a-z0-9_]`` are squeezed to ``_``; values that are missing, not numbers or offline are
None, never zeros. Values refresh at the jtop service interval (1 s unless its first client asked for
another), however often ``sample`` is called.

Access (see ``jtop_access_problems``): ``jtop.service`` must be running (it creates ``/run/jtop.sock``,
group ``jtop``, mode 660) and this process must be root or carry the ``jtop`` group: ``sudo usermod -aG
jtop $USER``, then log out and back in.
"""

from __future__ import annotations

import getpass
import grp
import importlib
import logging
import math
import os
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from edgeprof.collectors.base import Availability, Collector, Metric, SampleValues, numbered_names
from edgeprof.collectors.evidence import celsius_or_none
from edgeprof.collectors.roles import MetricRole
from edgeprof.collectors.tegrastats import jetson_role

log = logging.getLogger(__name__)

INSTALL_HINT = "jetson-stats not installed (pip install edgeprof[jetson])"
JTOP_SOCKET = "/run/jtop.sock"
JTOP_GROUP = "jtop"
KIB_PER_MIB = 1024.0
KHZ_PER_MHZ = 1000.0

# Always present (None when the board lacks them), so every sample has the same columns on a board.
_FIXED: tuple[tuple[str, str, str], ...] = (
    ("mem.ram_used_mb", "MB", "RAM used excluding buffers/cache (jtop)"),
    ("mem.ram_total_mb", "MB", "RAM total (jtop)"),
    ("mem.swap_used_mb", "MB", "swap used (jtop)"),
    ("mem.shared_mb", "MB", "NvMap memory shared by CPU and GPU (jtop RAM 'shared')"),
    ("cpu.util_pct", "pct", "all CPUs busy share (jtop)"),
    ("gpu.util_pct", "pct", "GPU load (jtop, first GPU)"),
    ("gpu.freq_mhz", "MHz", "GPU clock (jtop, first GPU)"),
    ("emc.util_pct", "pct", "memory controller bandwidth use (jtop)"),
    ("emc.freq_mhz", "MHz", "memory controller clock (jtop)"),
)
_UNITS: tuple[tuple[str, str, str], ...] = (
    ("_mb", "MB", "memory"),
    ("_pct", "pct", "share"),
    ("_mhz", "MHz", "clock"),
    ("_mw", "mW", "power draw"),
    ("_c", "C", "temperature"),
    ("_rpm", "rpm", "fan speed"),
)
_NAME_RE = re.compile(r"[^a-z0-9_]+")


def _import_jtop_factory() -> Callable[[], Any]:
    module = importlib.import_module("jtop")
    factory: Callable[[], Any] = module.jtop
    return factory


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _mapping(value: Any) -> Mapping[Any, Any]:
    """A dict, or a jtop dict-like view (``GPU``, ``Memory``, ``Fan`` have ``items``); else {}."""
    if isinstance(value, Mapping):
        return value
    items = getattr(value, "items", None)
    if callable(items):
        try:
            return dict(items())
        except Exception:  # noqa: BLE001 - junk from the client reads as "nothing"
            return {}
    return {}


def _sequence(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _key(name: Any) -> str:
    key = _NAME_RE.sub("_", str(name).lower()).strip("_")
    return key or "unnamed"


def _scaled(value: float | None, divisor: float) -> float | None:
    return value / divisor if value is not None else None


def _online(entry: Mapping[Any, Any]) -> bool:
    """jtop marks sensors, rails and cores with ``online``; absent means online."""
    return entry.get("online", True) is not False


def jtop_access_problems(root: Path | str = "/", group: str = JTOP_GROUP) -> list[str]:
    """Why this process probably cannot talk to jtop.service: missing socket, missing group or membership.

    The socket is looked up under ``root``; the group database and this process's groups are the live ones.
    """
    problems: list[str] = []
    socket = Path(root) / JTOP_SOCKET.lstrip("/")
    is_root = os.geteuid() == 0
    if not socket.exists():
        problems.append(
            f"{JTOP_SOCKET} is missing, so jtop.service is not running "
            "(sudo systemctl enable --now jtop.service)"
        )
    elif not is_root and not os.access(socket, os.R_OK | os.W_OK):
        problems.append(f"{JTOP_SOCKET} is not readable and writable by this user")
    try:
        entry = grp.getgrnam(group)
    except KeyError:
        problems.append(f"group '{group}' does not exist (jetson-stats' service install creates it)")
        return problems
    if is_root:
        return problems
    if entry.gr_gid in os.getgroups() or entry.gr_gid == os.getegid():
        return problems
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name is still a diagnosis
        user = str(os.geteuid())
    if user in entry.gr_mem:
        problems.append(
            f"user {user} is in group '{group}' but this session started before that: log out and back in"
        )
    else:
        problems.append(
            f"user {user} is not in group '{group}': "
            f"sudo usermod -aG {group} {user}, then log out and back in"
        )
    return problems


class JtopCollector(Collector):
    name = "jtop"

    @classmethod
    def role_of(cls, metric: str) -> MetricRole | None:
        return jetson_role(metric)

    def __init__(self, root: Path | str = "/", jtop_factory: Callable[[], Any] | None = None) -> None:
        super().__init__(root)
        self._factory = jtop_factory
        self._lock = threading.Lock()
        self._client: Any | None = None
        self._metrics: dict[str, Metric] = {}
        self._logged: set[str] = set()

    # -- contract --------------------------------------------------------------------------------------

    def available(self) -> Availability:
        factory = self._factory
        if factory is None:
            try:
                factory = _import_jtop_factory()
            except ImportError:
                return Availability(False, INSTALL_HINT)
            except Exception as exc:  # noqa: BLE001 - a broken install is "not here" too
                return Availability(False, f"jtop: import failed: {_one_line(str(exc))}")
        self.close()
        client: Any | None = None
        try:
            client = factory()
            client.start()
        except Exception as exc:  # noqa: BLE001 - JtopException, socket and permission errors alike
            if client is not None:
                _close_quietly(client)
            message = _one_line(str(exc)) or type(exc).__name__
            reason = f"jtop: {message}"
            problems = jtop_access_problems(self.root)
            if problems:
                reason += " [" + "; ".join(problems) + "]"
            return Availability(False, reason)
        first = self._read(client)
        with self._lock:
            self._client = client
            self._metrics = {}
            self._declare(first)
        return Availability(True, self._summary(client, first))

    def metrics(self) -> list[Metric]:
        with self._lock:
            return list(self._metrics.values())

    def sample(self) -> SampleValues:
        with self._lock:
            client = self._client
        if client is None:
            return {}
        values: SampleValues = {}
        try:
            if _client_ok(client):
                values = self._read(client)
            else:
                self._log_once("not-ok", "jtop: client reports no fresh data (service stopped?)")
        except Exception as exc:  # noqa: BLE001 - sample() never raises
            self._log_once(f"ok:{type(exc).__name__}", f"jtop: client failed: {_one_line(str(exc))}")
            values = {}
        with self._lock:
            self._declare(values)
            out: SampleValues = dict.fromkeys(self._metrics)
        out.update(values)
        return out

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            _close_quietly(client)

    # -- reading ---------------------------------------------------------------------------------------

    def _read(self, client: Any) -> SampleValues:
        """Every metric the client offers now; each section is read on its own so one bad one costs only
        its own values."""
        values: SampleValues = {name: None for name, _, _ in _FIXED}
        for section, reader in (
            ("memory", _read_memory),
            ("cpu", _read_cpu),
            ("gpu", _read_gpu),
            ("temperature", _read_temperature),
            ("power", _read_power),
            ("fan", _read_fan),
        ):
            try:
                values.update(reader(getattr(client, section)))
            except Exception as exc:  # noqa: BLE001 - junk from the client is data loss, not a crash
                self._log_once(f"read:{section}", f"jtop: cannot read {section}: {type(exc).__name__}: {exc}")
        return values

    def _declare(self, values: SampleValues) -> None:
        """Add metric declarations for names seen for the first time (caller holds the lock)."""
        fixed = {name: (unit, text) for name, unit, text in _FIXED}
        for name in values:
            if name in self._metrics:
                continue
            if name in fixed:
                unit, text = fixed[name]
            else:
                unit, text = next(((u, t) for suffix, u, t in _UNITS if name.endswith(suffix)), ("", ""))
                text = f"{name.split('.')[0]} {text} (jtop)"
            self._metrics[name] = Metric(name, unit, "gauge", text)

    def _summary(self, client: Any, first: SampleValues) -> str:
        parts = ["jtop.service connected"]
        version = _jtop_version() if self._factory is None else None
        if version:
            parts[0] = f"jtop {version}: service connected"
        cores = sum(1 for name in first if re.fullmatch(r"cpu\d+\.util_pct", name))
        rails = sum(1 for name in first if name.startswith("power."))
        temps = sum(1 for name in first if name.startswith("temp."))
        parts.append(f"{cores} CPUs, {rails} power readings, {temps} temperatures")
        interval = _number(getattr(client, "interval", None))
        if interval is not None:
            parts.append(f"service interval {interval:g} s")
        return ", ".join(parts)

    def _log_once(self, key: str, message: str) -> None:
        if key in self._logged or len(self._logged) > 64:
            return
        self._logged.add(key)
        log.warning("%s", message)


def _jtop_version() -> str | None:
    try:
        version = getattr(importlib.import_module("jtop"), "__version__", None)
    except Exception:  # noqa: BLE001
        return None
    return str(version) if version else None


def _client_ok(client: Any) -> bool:
    """``ok(spin=True)``: does not block waiting for the next update (plain ``ok()`` waits up to 3
    intervals); raises what the client's reader thread raised, e.g. a lost connection."""
    ok = client.ok
    try:
        result = ok(spin=True)
    except TypeError:  # a client without the spin parameter
        result = ok()
    return bool(result)


def _close_quietly(client: Any) -> None:
    try:
        client.close()
    except Exception as exc:  # noqa: BLE001 - closing must not fail
        log.debug("jtop: close failed: %s", exc)


def _read_memory(memory: Any) -> SampleValues:
    mem = _mapping(memory)
    ram = _mapping(mem.get("RAM"))
    swap = _mapping(mem.get("SWAP"))
    emc = _mapping(mem.get("EMC"))
    values: SampleValues = {
        "mem.ram_used_mb": _scaled(_number(ram.get("used")), KIB_PER_MIB),
        "mem.ram_total_mb": _scaled(_number(ram.get("tot")), KIB_PER_MIB),
        "mem.swap_used_mb": _scaled(_number(swap.get("used")), KIB_PER_MIB),
        "mem.shared_mb": _scaled(_number(ram.get("shared")), KIB_PER_MIB),
    }
    if emc and _online(emc):
        values["emc.util_pct"] = _number(emc.get("val"))
        values["emc.freq_mhz"] = _scaled(_number(emc.get("cur")), KHZ_PER_MHZ)
    return values


def _busy_pct(entry: Mapping[Any, Any]) -> float | None:
    idle = _number(entry.get("idle"))
    return max(0.0, min(100.0, 100.0 - idle)) if idle is not None else None


def _read_cpu(cpu: Any) -> SampleValues:
    data = _mapping(cpu)
    values: SampleValues = {"cpu.util_pct": _busy_pct(_mapping(data.get("total")))}
    for index, raw in enumerate(_sequence(data.get("cpu"))):
        core = _mapping(raw)
        online = bool(core) and _online(core)
        freq = _mapping(core.get("freq"))
        values[f"cpu{index}.util_pct"] = _busy_pct(core) if online else None
        values[f"cpu{index}.freq_mhz"] = _scaled(_number(freq.get("cur")), KHZ_PER_MHZ) if online else None
    return values


def _read_gpu(gpu: Any) -> SampleValues:
    gpus = _mapping(gpu)
    first = _mapping(next(iter(gpus.values()), None))
    status = _mapping(first.get("status"))
    freq = _mapping(first.get("freq"))
    return {
        "gpu.util_pct": _number(status.get("load")),
        "gpu.freq_mhz": _scaled(_number(freq.get("cur")), KHZ_PER_MHZ),
    }


def _read_temperature(temperature: Any) -> SampleValues:
    sensors = _mapping(temperature)
    values: SampleValues = {}
    for key, raw in zip(numbered_names(_key(n) for n in sensors), sensors.values(), strict=True):
        # jetson-stats 4.x: {'online': bool, 'temp': float}; a bare number is accepted too.
        entry = _mapping(raw)
        celsius = _number(entry.get("temp")) if entry else _number(raw)
        if entry and not _online(entry):
            celsius = None
        values[f"temp.{key}_c"] = celsius_or_none(celsius)
    return values


def _read_power(power: Any) -> SampleValues:
    data = _mapping(power)
    rails = _mapping(data.get("rail"))
    total = _mapping(data.get("tot"))
    names = [_key(n) for n in rails]
    total_name = total.get("name")
    names.append(_key(total_name) if isinstance(total_name, str) and total_name else "total")
    entries = [*(_mapping(r) for r in rails.values()), total]
    values: SampleValues = {}
    for key, entry in zip(numbered_names(names), entries, strict=True):
        if not entry:
            continue
        values[f"power.{key}_mw"] = _number(entry.get("power")) if _online(entry) else None
    return values


def _read_fan(fan: Any) -> SampleValues:
    fans = _mapping(fan)
    values: SampleValues = {}
    for key, raw in zip(numbered_names(_key(n) for n in fans), fans.values(), strict=True):
        entry = _mapping(raw)
        for field, unit in (("speed", "pct"), ("rpm", "rpm")):
            for index, reading in enumerate(_sequence(entry.get(field))):
                suffix = "" if index == 0 else f"_{index + 1}"
                values[f"fan.{key}{suffix}_{unit}"] = _number(reading)
    return values
