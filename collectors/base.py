"""The collector contract every telemetry source follows.

A collector is built with a ``root`` path (``/`` on a real machine, a fixture tree in tests), says whether it
can run here and why not, declares its metrics with unit and kind, and samples without ever raising into the
sampling loop: missing hardware is data, not a crash.

Metric names follow ``<domain>[.<instance>].<name>_<unit>`` (the unit in the name), e.g. ``temp.cpu_c``,
``cpu3.freq_mhz``, ``energy.package_uj``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar, Literal, NamedTuple

from edgeprof.collectors.roles import MetricRole

log = logging.getLogger(__name__)

MetricKind = Literal["gauge", "counter"]
SampleValues = dict[str, float | None]


@dataclass(frozen=True)
class Metric:
    """A declared metric. ``wrap`` is the value at which a counter rolls over to 0 (None: never wraps).
    ``role`` is what the metric is (``edgeprof.collectors.roles``); ``Collector.declared_metrics`` fills it
    from the collector's ``role_of`` where a constructor left it out."""

    name: str
    unit: str
    kind: MetricKind = "gauge"
    description: str = ""
    wrap: float | None = None
    role: MetricRole | None = None


class Availability(NamedTuple):
    ok: bool
    reason: str


class SampleResult(NamedTuple):
    values: SampleValues
    error: str | None


class Collector(ABC):
    """Base class: subclasses set ``name`` and implement ``available``, ``metrics`` and ``sample``."""

    name: str = "collector"
    # Cumulative counters read straight from files (CPU time, energy): cheap enough to read once more at
    # the end of every repetition, so even a rep shorter than the sampling interval has a reading on each
    # side (``Sampler.mark_boundary``). Gauges and streamed sources (tegrastats, jtop) stay on the grid.
    reads_at_boundaries: ClassVar[bool] = False

    def __init__(self, root: Path | str = "/") -> None:
        self.root = Path(root)

    def path(self, absolute: str) -> Path:
        """Map an absolute system path ('/sys/...') under this collector's root."""
        return self.root / absolute.lstrip("/")

    @abstractmethod
    def available(self) -> Availability:
        """Whether this source can be sampled here; the reason says why not (or what was found)."""

    @abstractmethod
    def metrics(self) -> list[Metric]:
        """The metrics ``sample`` returns (valid after ``available`` said ok)."""

    @abstractmethod
    def sample(self) -> SampleValues:
        """One reading: metric name -> value; None where a metric could not be read this time."""

    @classmethod
    def role_of(cls, metric: str) -> MetricRole | None:
        """The role of ``metric`` if this collector emits it (None otherwise). A pure function of the name,
        so stored samples can be classified on a machine without this hardware; override per collector."""
        return None

    def declared_metrics(self) -> list[Metric]:
        """``metrics()`` with every role filled in (from ``role_of``; ``other`` where it has none)."""
        out: list[Metric] = []
        for m in self.metrics():
            role = m.role or type(self).role_of(m.name)
            if role is None:
                role = MetricRole("other", m.unit)
            if m.wrap is not None and role.wrap is None:
                role = replace(role, wrap=m.wrap)
            out.append(replace(m, role=role))
        return out

    def close(self) -> None:  # noqa: B027 - optional hook, most collectors hold nothing open
        """Release anything held open (files, child processes)."""

    def safe_sample(self) -> SampleResult:
        """``sample`` that never raises: an exception becomes an error string for the sampler to count."""
        try:
            return SampleResult(self.sample(), None)
        except Exception as exc:  # noqa: BLE001 - the sampling loop must survive any collector bug
            return SampleResult({}, f"{type(exc).__name__}: {exc}")


def counter_delta(prev: float | None, cur: float | None, wrap: float | None) -> float | None:
    """Increase of a monotonic counter between two readings, handling one wraparound at ``wrap``.

    Returns None when either reading is missing or when the counter went backwards without a known wrap
    value (a reset we cannot size): better no number than an invented one.
    """
    if prev is None or cur is None:
        return None
    if cur >= prev:
        return cur - prev
    if wrap is None or wrap <= 0:
        return None
    return (wrap - prev) + cur


def numbered_names(names: Iterable[str]) -> list[str]:
    """``['nc', 'x', 'nc']`` -> ``['nc', 'x', 'nc_2']``: repeated names (tegrastats' ``NC`` rails, jtop
    sensors that collide after sanitising) stay distinct, in order; shared so both sources name alike."""
    seen: dict[str, int] = {}
    out: list[str] = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}_{seen[name]}")
    return out


def numbered_entries(base: Path, prefix: str) -> list[tuple[int, Path]]:
    """``(N, path)`` of every entry of ``base`` named ``<prefix>N`` (``thermal_zone3``, ``policy4``,
    ``cpu12``), in numeric order; [] where ``base`` is absent or cannot be listed. The discovery every
    sysfs collector starts with, and the same never-raising rule for all of them."""
    pattern = re.compile(re.escape(prefix) + r"(\d+)")
    try:
        entries = list(base.iterdir())
    except OSError:
        return []
    found = [(int(m.group(1)), p) for p in entries if (m := pattern.fullmatch(p.name))]
    return sorted(found, key=lambda item: item[0])


def listed_names(base: Path) -> list[str]:
    """The names in the folder ``base`` ([] where it cannot be listed)."""
    try:
        return [p.name for p in base.iterdir()]
    except OSError:
        return []


def count_of(n: int, one: str, many: str | None = None) -> str:
    """``3 zones``, ``1 zone``, ``2 policies``: the counts every ``available()`` reason starts with."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def nothing_found(what: str, where: str, why: str) -> Availability:
    """The "not here" answer of a sysfs collector: what was looked for, where, and the usual reason."""
    return Availability(False, f"no {what} under {where} ({why})")


def read_text(path: Path) -> str | None:
    """Contents of a small sysfs/procfs file, stripped; None if it is absent or unreadable."""
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


class KeptFiles:
    """Kernel-generated files (``/proc``) read again and again through a descriptor kept open: ``pread``
    at offset 0 makes the kernel print the file afresh, one system call instead of a path walk, an open and
    a close (about 4 µs a read instead of 16 on a small VM). It matters to a sampler that reads a dozen such
    files five times a second on the cores the model decodes on.

    Only a file of the live ``/proc`` or ``/sys`` is kept open (procfs and sysfs print a file afresh for a
    read at offset 0); a file under any other root (a fixture tree in tests, rewritten between readings) is
    opened for each reading as ``read_text`` does. A file that can no longer be read (its process or thread
    has gone: ``ESRCH``) is dropped and reads None. One thread reads and drops (the sampler's): a descriptor
    closed under another thread's read could be reused by any open.
    """

    KERNEL_FOLDERS = ("/proc/", "/sys/")

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}

    def read(self, path: Path) -> str | None:
        key = str(path)
        fd = self._fds.get(key)
        kept = fd is not None
        if fd is None:
            try:
                fd = os.open(key, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
            kept = key.startswith(self.KERNEL_FOLDERS)
            if kept:
                self._fds[key] = fd
        try:
            data = _read_fd(fd)
        except OSError:
            data = None
        if not kept:  # opened for this reading only
            os.close(fd)
        elif data is None:
            self.drop(key)
        return data.decode(errors="replace").strip() if data is not None else None

    def drop(self, key: str) -> None:
        """Close the descriptor kept for ``key`` (a path as a string), if any."""
        fd = self._fds.pop(key, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def drop_under(self, folder: Path) -> None:
        """Close every descriptor kept for a file under ``folder`` (a process that was left)."""
        prefix = str(folder).rstrip("/") + "/"
        for key in [key for key in self._fds if key.startswith(prefix)]:
            self.drop(key)

    def close(self) -> None:
        for key in list(self._fds):
            self.drop(key)


_CHUNK = 16384


def _read_fd(fd: int) -> bytes:
    """The whole file from offset 0, however long (``/proc/stat`` of a large machine passes 16 KiB)."""
    parts = [os.pread(fd, _CHUNK, 0)]
    while len(parts[-1]) == _CHUNK:
        parts.append(os.pread(fd, _CHUNK, _CHUNK * len(parts)))
    return b"".join(parts)


def read_int(path: Path) -> int | None:
    text = read_text(path)
    if text is None:
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


def monotonic_s() -> float:
    return time.monotonic()


def declared_units(metrics: list[Metric]) -> Mapping[str, str]:
    return {m.name: m.unit for m in metrics}
