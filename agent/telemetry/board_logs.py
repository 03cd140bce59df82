"""The logs CPU-board users already have (sbc-bench results, a CSV through a column map, stressberry's
files) as one shape, ``BoardLog``, stored and judged like a tegrastats log: one imported sweep, one log
verdict (``edgeprof.verdicts.log_verdict``).

Unlike tegrastats, jtop and nvidia-smi logs, these have no live collector whose roles their metrics share:
each reader declares the role of every metric it writes (``BoardLog.roles``), and the import stores those
roles with the sweep (as a collector's status), so ``analyse`` judges the stored log by what each metric is.

Metric names: ``temp.<zone>_c`` (a thermometer), ``cpu.util_pct`` (the CPU load),
``cpufreq.<cluster>.cur_mhz`` (a cpufreq clock: what the kernel asked for), ``rpi.arm_clock_mhz`` (the
Raspberry Pi firmware's measured ARM clock: what ran), ``cpu.clock_mhz`` (a CSV's clock column),
``log.throttle_flag`` (a CSV's 0/1 throttle column), ``rpi.throttled_flags`` (a CSV's throttle column of
``get_throttled`` words, ``0x50005``: decoded as the Pi firmware's, under-voltage named as its own cause).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from edgeprof.collectors import MetricRole
from edgeprof.collectors.evidence import thermometer_role
from edgeprof.collectors.rpi_firmware import ARM_CLOCK, THROTTLED, rpi_firmware_role
from edgeprof.telemetry.tegrastats_import import TegrastatsImportError

SBC_BENCH, COLUMN_CSV, STRESSBERRY = "sbc_bench", "column_csv", "stressberry"
BOARD_FORMATS = (SBC_BENCH, COLUMN_CSV, STRESSBERRY)
# the sample source an import of each format writes (what ``log_store`` reads back)
BOARD_SOURCES = {
    SBC_BENCH: "sbc_bench_import",
    COLUMN_CSV: "column_csv_import",
    STRESSBERRY: "stressberry_import",
}

CPU_LOAD = "cpu.util_pct"
# the Raspberry Pi firmware's measured ARM clock and get_throttled word: the live collector's names and roles
FIRMWARE_CLOCK = ARM_CLOCK
FIRMWARE_FLAGS = THROTTLED
CSV_CLOCK = "cpu.clock_mhz"
THROTTLE_FLAG = "log.throttle_flag"

Row = tuple[float, dict[str, float | None]]


def temperature_metric(zone: str) -> str:
    """``temp.<zone>_c`` for a zone name as a log gives it (``cpu-thermal`` -> ``temp.cpu_thermal_c``)."""
    clean = "".join(c if c.isalnum() else "_" for c in zone.lower()).strip("_") or "soc"
    return f"temp.{clean}_c"


def cpufreq_clock(cluster: str) -> str:
    return f"cpufreq.{cluster}.cur_mhz"


def role_of(metric: str) -> MetricRole | None:
    """The role of each metric name the board-log readers write (see the module docstring)."""
    if metric.startswith("temp.") and metric.endswith("_c"):
        return thermometer_role(metric[5:-2], "soc")
    if metric == CPU_LOAD:
        return MetricRole("utilization", "pct", "cpu")
    if metric in (FIRMWARE_CLOCK, FIRMWARE_FLAGS):
        return rpi_firmware_role(metric)
    if metric == CSV_CLOCK or (metric.startswith("cpufreq.") and metric.endswith(".cur_mhz")):
        return MetricRole("clock", "MHz", "cpu", domain="cpu")
    if metric == THROTTLE_FLAG:
        return MetricRole("throttle_flags", "flag", "soc")
    return None


@dataclass
class BoardLog:
    """A board's log as plain data: ``rows`` of (seconds from the start, readings); ``wall_t0`` the epoch of
    t = 0 where the log says when it started (None: only elapsed seconds are known); ``phases`` the named
    spans of the log (sbc-bench's tests); ``device`` what the log says of its board (name, kernel, cores);
    ``notes`` facts the log states that no series holds; ``columns`` the column map used, as text."""

    fmt: str
    rows: list[Row]
    wall_t0: float | None = None
    phases: list[tuple[str, float, float]] = field(default_factory=list)
    device: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    columns: str | None = None
    # trip points by thermometer where the log states them or the board's table knows them, and from where
    trip_points: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    trip_source: str | None = None

    @property
    def metrics(self) -> list[str]:
        return sorted({m for _, values in self.rows for m in values})

    @property
    def roles(self) -> dict[str, MetricRole]:
        return {m: r for m in self.metrics if (r := role_of(m)) is not None}

    @property
    def spacing_s(self) -> float:
        """The spacing the verdict splits sessions by: the median step between rows, and for an sbc-bench
        result (one run, each section sampled at its own interval) its longest step."""
        steps = sorted(b[0] - a[0] for a, b in pairwise(self.rows) if b[0] > a[0])
        if not steps:
            return 1.0
        return steps[-1] if self.fmt == SBC_BENCH else steps[len(steps) // 2]

    def series(self) -> dict[str, list[tuple[float, float | None]]]:
        out: dict[str, list[tuple[float, float | None]]] = {}
        for t, values in self.rows:
            for metric, value in values.items():
                out.setdefault(metric, []).append((t, value))
        return out

    def summary(self, path: Path) -> str:
        span = self.rows[-1][0] - self.rows[0][0] if self.rows else 0.0
        board = self.device.get("board") or "board not named"
        said = f"{path.name}: {len(self.rows)} records ({self.fmt}, {board}), {span:.0f} s"
        if self.columns:
            said += f"; columns {self.columns}"
        return said


def checked(log: BoardLog, path: Path) -> BoardLog:
    """``log`` with its rows in time order from t = 0 (its start moved to match); raises when no row holds
    a reading."""
    rows = sorted((r for r in log.rows if any(v is not None for v in r[1].values())), key=lambda r: r[0])
    if not rows:
        raise TegrastatsImportError(f"no readings in {path} (read as {log.fmt})")
    first = rows[0][0]
    log.rows = [(t - first, values) for t, values in rows]
    log.phases = [(name, a - first, b - first) for name, a, b in log.phases]
    if log.wall_t0 is not None:
        log.wall_t0 += first
    if not log.trip_points:
        log.trip_points, log.trip_source = board_trip_points(log.device.get("board"), log.metrics)
    return log


# Trip points known per board family, with their source, for logs that state none. Raspberry Pi: the
# firmware throttles the ARM cores progressively from 80 °C and the ARM and GPU from 85 °C (Raspberry Pi
# documentation, "Frequency management and thermal control", raspberrypi/documentation).
BOARD_TRIPS: dict[str, tuple[list[tuple[str, float]], str]] = {
    "raspberry pi": (
        [("passive", 80.0), ("hot", 85.0)],
        "Raspberry Pi documentation: the firmware throttles from 80 °C",
    ),
}


def board_trip_points(
    board: str | None, metrics: list[str]
) -> tuple[dict[str, list[tuple[str, float]]], str | None]:
    """The trip points of ``board``'s family for each of its thermometers, and their source."""
    lowered = (board or "").lower()
    for family, (trips, source) in BOARD_TRIPS.items():
        if family in lowered:
            temps = [m for m in metrics if m.startswith("temp.")]
            return {m: list(trips) for m in temps}, source
    return {}, None


def facts_of(log: BoardLog, device_name: str | None) -> dict[str, Any]:
    """The device row's facts: the board and kernel the log names, nothing it does not."""
    board = log.device.get("board")
    cores = log.device.get("cpu_count")
    return {
        "hostname": device_name or "imported",
        "machine_id": None,
        "arch": log.device.get("arch") or "unknown",
        "cpu_model": log.device.get("cpu_model"),
        "cpu_count": cores,
        "ram_total_mb": None,
        "board_model": f"imported {log.fmt} log: " + (board or "board not named in the log"),
        "l4t_release": None,
        "gpu": None,
        "kernel": log.device.get("kernel"),
        "os_release": None,
        "source": f"{log.fmt} log import: only what the log shows is known",
    }


def _sweep(path: Path, log: BoardLog, device_id: int) -> Any:
    from edgeprof import __version__
    from edgeprof.storage.models import Sweep
    from edgeprof.telemetry.tegrastats_import import SWEEP_STATUS, file_sha256, utc_naive

    meta: dict[str, Any] = {"source": BOARD_SOURCES[log.fmt], "format": log.fmt, "file": path.name}
    # "elapsed": the log's seconds are real, its wall clock unknown; dated then by the file's last write
    meta |= {"records": len(log.rows), "clock": "timestamps" if log.wall_t0 is not None else "elapsed"}
    meta |= {"phases": log.phases, "notes": log.notes, "columns": log.columns}
    meta |= {"trip_points": log.trip_points, "trip_source": log.trip_source, "spacing_s": log.spacing_s}
    start = log.wall_t0 if log.wall_t0 is not None else path.stat().st_mtime - log.rows[-1][0]
    return Sweep(
        name=f"import:{path.name}",
        plan_path=str(path.resolve()),
        plan_text="",  # no plan: nothing was run, a log was read
        plan_hash=file_sha256(path),  # the same log imported twice is recognisable
        device_id=device_id,
        edgeprof_version=__version__,
        started_at=utc_naive(start + log.rows[0][0]),
        ended_at=utc_naive(start + log.rows[-1][0]),
        status=SWEEP_STATUS,
        n_specs=0,
        sampler_json=json.dumps(meta, sort_keys=True),
    )


def _status(sweep_id: int, log: BoardLog) -> Any:
    """The reader's declared roles, stored as its collector status: ``analyse`` reads them back."""
    from edgeprof.storage.models import CollectorStatus

    entries = [{"name": m, "role": r.as_json()} for m, r in log.roles.items()]
    return CollectorStatus(
        sweep_id=sweep_id,
        name=BOARD_SOURCES[log.fmt],
        ok=True,
        reason=f"read from a {log.fmt} log",
        metrics_json=json.dumps(entries, sort_keys=True),
    )


def store_board_log(db: str, path: Path, log: BoardLog, device_name: str | None) -> tuple[int, bool]:
    """Store a board log as samples of a new imported sweep: (sweep id, True), or (the sweep the same file
    went into, False) without storing anything."""
    from sqlalchemy.exc import SQLAlchemyError

    from edgeprof.device import get_or_create_device
    from edgeprof.storage.samples import MAX_TICKS_PER_BLOCK, Tick, write_ticks
    from edgeprof.telemetry.tegrastats_import import already_imported, open_import_session

    session = open_import_session(db)
    try:
        existing = already_imported(session, path)
        if existing is not None:
            return existing, False
        device = get_or_create_device(session, facts_of(log, device_name))
        sweep = _sweep(path, log, device.id)
        session.add(sweep)
        session.flush()
        session.add(_status(sweep.id, log))
        wall0 = log.wall_t0 or 0.0
        ticks = [Tick(t, wall0 + t, values) for t, values in log.rows]
        for start in range(0, len(ticks), MAX_TICKS_PER_BLOCK):
            chunk = ticks[start : start + MAX_TICKS_PER_BLOCK]
            write_ticks(session, sweep.id, None, BOARD_SOURCES[log.fmt], chunk)
        session.commit()
        return sweep.id, True
    except SQLAlchemyError as exc:
        session.rollback()
        raise TegrastatsImportError(f"cannot store samples: {str(exc).splitlines()[0]}") from None
    finally:
        session.close()
