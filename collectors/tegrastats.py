"""Run NVIDIA ``tegrastats`` as a child process and sample its latest line (Jetson power rails, GPU, EMC).

tegrastats prints one line per ``--interval`` milliseconds and has no query mode, so the collector keeps one
child running for its whole life: a supervisor thread starts ``tegrastats --interval N`` in its own session,
reads stdout line by line, parses every line with ``edgeprof.collectors.tegrastats_parse.parse_line`` and
keeps only the latest record and its monotonic arrival time. ``sample`` then returns that record flattened by
``record_to_metrics`` -- if it is fresh: a record that arrived since the previous sample, or within two
intervals. Anything older is not fresh data and every value is None.

If the child dies, it is started again (at most once per second, backing off up to 30 s while it keeps dying
without printing a line) and the time without data is recorded in ``gaps`` as ``(start, end)`` on the
monotonic clock: from the last line of the dead child (or its death, if it printed none) to the first line
of its successor. A gap still open when the collector is closed ends at ``close``. ``restarts`` counts the
children started after the first.

tegrastats needs root for some fields: without it recent L4T releases leave out ``EMC_FREQ`` and print
``GR3D_FREQ`` without a clock. ``available`` waits briefly for the first line and says so in its reason.

The child runs in its own session so that ``close`` can signal its whole process group (SIGTERM, then SIGKILL
after ``term_timeout_s``) and reap it. Should this process die without ``close``, tegrastats gets SIGPIPE on
its next line, as nothing reads the pipe any more, and exits within one interval.

Limitation: a child that hangs without printing and without exiting is not restarted; its values simply
turn None once they are two intervals old.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import threading
from collections import deque
from pathlib import Path
from typing import IO

from edgeprof.collectors.base import Availability, Collector, Metric, SampleValues, monotonic_s, read_text
from edgeprof.collectors.evidence import thermometer_role
from edgeprof.collectors.roles import Component, MetricRole, component_of_sensor
from edgeprof.collectors.tegrastats_parse import (
    SECOND_TEMP_SUFFIX,
    TEGRASTATS_METRIC_UNITS,
    TegrastatsRecord,
    parse_line,
    record_to_metrics,
)

log = logging.getLogger(__name__)

NOT_FOUND_REASON = "tegrastats not found (not a Jetson, or L4T tools not installed)"
NV_TEGRA_RELEASE = "/etc/nv_tegra_release"
# /usr/bin since L4T 32 (JetPack 4); L4T 28 and older shipped it in the default user's home directory.
FALLBACK_PATHS = ("/usr/bin/tegrastats", "/home/nvidia/tegrastats", "/home/ubuntu/tegrastats")

MIN_RESTART_INTERVAL_S = 1.0
MAX_RESTART_INTERVAL_S = 30.0
FRESH_INTERVALS = 2
# A real line is under 2 kB; anything longer is garbage and is dropped rather than buffered without bound.
MAX_LINE_CHARS = 64 * 1024
MESSAGES_KEPT = 5

_FALLBACK_UNITS = (("_pct", "%"), ("_mhz", "MHz"), ("_mb", "MB"), ("_mw", "mW"), ("_c", "degC"))


def metric_for(name: str) -> Metric:
    """Declare one metric of ``record_to_metrics``: unit and meaning from ``TEGRASTATS_METRIC_UNITS``."""
    for family in TEGRASTATS_METRIC_UNITS:
        if name.startswith(family.prefix) and name.endswith(family.suffix):
            return Metric(name, family.unit, "gauge", f"tegrastats: {family.meaning}")
    for suffix, unit in _FALLBACK_UNITS:
        if name.endswith(suffix):
            return Metric(name, unit, "gauge", "tegrastats")
    return Metric(name, "", "gauge", "tegrastats")


def has_data(rec: TegrastatsRecord) -> bool:
    """Whether a parsed line said anything measurable (a warning line printed on stdout does not)."""
    fields = (rec.ram, rec.swap, rec.iram, rec.cpus, rec.emc, rec.gpu, rec.temps_c, rec.rails, rec.engines)
    return any(bool(f) for f in fields)


def root_note(rec: TegrastatsRecord) -> str | None:
    """What a line lacking EMC or GPU clocks suggests (tegrastats run without root), or None."""
    missing = []
    if rec.emc is None:
        missing.append("EMC")
    if not rec.gpu or not rec.gpu[0].freq_mhz:
        missing.append("GR3D clock")
    if not missing:
        return None
    return f"no {' or '.join(missing)} in its output: run as root for memory-controller and GPU clocks"


class TegrastatsCollector(Collector):
    name = "tegrastats"

    @classmethod
    def role_of(cls, metric: str) -> MetricRole | None:
        return jetson_role(metric)

    def __init__(
        self,
        root: Path | str = "/",
        executable: str | None = None,
        interval_ms: int = 200,
        *,
        startup_timeout_s: float | None = None,
        term_timeout_s: float = 2.0,
    ) -> None:
        super().__init__(root)
        if interval_ms <= 0:
            raise ValueError("interval_ms must be positive")
        self.executable = executable
        self.interval_ms = int(interval_ms)
        self.interval_s = self.interval_ms / 1000.0
        self.startup_timeout_s = (
            startup_timeout_s if startup_timeout_s is not None else max(2.0, 5 * self.interval_s)
        )
        self.term_timeout_s = term_timeout_s
        # Public, read under ``_lock`` by anyone who wants a consistent view.
        self.gaps: list[tuple[float, float]] = []
        self.restarts = 0
        self.last_error: str | None = None

        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._exe: str | None = None
        self._latest: TegrastatsRecord | None = None
        self._latest_t: float | None = None
        self._seq = 0
        self._sampled_seq = 0
        self._first: TegrastatsRecord | None = None
        self._declared: list[Metric] | None = None
        self._gap_start: float | None = None
        self._starts = 0
        self._exits = 0
        self._last_exit: str | None = None
        self._messages: deque[str] = deque(maxlen=MESSAGES_KEPT)
        self._closed = False

    # -- discovery -------------------------------------------------------------------------------------

    def find_executable(self) -> str | None:
        """The tegrastats to run: the explicit one, else PATH (live root only), else the L4T locations."""
        if self.executable is not None:
            path = Path(self.executable)
            if path.is_file():
                return str(path)
            if os.sep not in self.executable:
                return shutil.which(self.executable)
            return None
        if self.root == Path("/"):
            found = shutil.which("tegrastats")
            if found:
                return found
        for absolute in FALLBACK_PATHS:
            candidate = self.path(absolute)
            if candidate.is_file():
                return str(candidate)
        return None

    def _not_found_reason(self) -> str:
        if self.executable is not None:
            return f"tegrastats not found at {self.executable} (given explicitly)"
        release = read_text(self.path(NV_TEGRA_RELEASE))
        if release is not None:
            first = release.splitlines()[0].lstrip("# ").strip() if release else ""
            where = "on PATH or at " if self.root == Path("/") else "at "
            return (
                f"Jetson detected ({NV_TEGRA_RELEASE}: {first[:60] or 'empty'}) but tegrastats not found "
                f"{where}{', '.join(FALLBACK_PATHS)}; install the L4T tools (nvidia-l4t-tools)"
            )
        return NOT_FOUND_REASON

    # -- contract --------------------------------------------------------------------------------------

    def available(self) -> Availability:
        exe = self.find_executable()
        if exe is None:
            return Availability(False, self._not_found_reason())
        if not os.access(exe, os.X_OK):
            return Availability(False, f"{exe} is not executable")
        if not self._ensure_started(exe):
            return Availability(False, f"cannot start {exe}: {self.last_error}")
        deadline = monotonic_s() + self.startup_timeout_s
        with self._changed:
            while self._first is None and self._exits == 0 and not self._closed:
                left = deadline - monotonic_s()
                if left <= 0:
                    break
                self._changed.wait(left)
            first, exits, last_exit = self._first, self._exits, self._last_exit
            messages = " | ".join(self._messages)
        if first is None:
            if exits:
                self.close()
                detail = f": {messages[:300]}" if messages else ""
                return Availability(False, f"{exe} {last_exit} before printing a line{detail}")
            return Availability(
                True,
                f"{exe} every {self.interval_ms} ms started, but no line within "
                f"{self.startup_timeout_s:g} s (values stay None until one comes)",
            )
        n_metrics = len(self.metrics())
        reason = f"{exe} every {self.interval_ms} ms, {n_metrics} metrics"
        note = root_note(first)
        if note is not None:
            reason += f"; {note}"
        return Availability(True, reason)

    def metrics(self) -> list[Metric]:
        """The metrics of the first line seen; before any line, the fixed names every line maps to."""
        with self._lock:
            if self._declared is not None:
                return list(self._declared)
        return [metric_for(name) for name in record_to_metrics(TegrastatsRecord())]

    def sample(self) -> SampleValues:
        try:
            return self._sample()
        except Exception as exc:  # noqa: BLE001 - sampling must never raise; a bug reads as missing data
            log.warning("tegrastats: sample failed: %s: %s", type(exc).__name__, exc)
            return {m.name: None for m in self.metrics()}

    def _sample(self) -> SampleValues:
        if self._thread is None and not self._closed:
            exe = self.find_executable()
            if exe is not None:
                self._ensure_started(exe)
        now = monotonic_s()
        with self._lock:
            latest, latest_t, seq = self._latest, self._latest_t, self._seq
            declared = list(self._declared) if self._declared is not None else None
            new = seq > self._sampled_seq
            self._sampled_seq = seq
        names = [m.name for m in declared] if declared is not None else [m.name for m in self.metrics()]
        values: SampleValues = dict.fromkeys(names)
        fresh = new or (latest_t is not None and now - latest_t <= FRESH_INTERVALS * self.interval_s)
        if latest is not None and fresh and not self._closed:
            values.update(record_to_metrics(latest))
        return values

    def close(self) -> None:
        """Stop the child (SIGTERM, SIGKILL after ``term_timeout_s``), reap it, join the reader thread."""
        with self._lock:
            self._closed = True
            self._stop.set()
            proc = self._proc
            self._changed.notify_all()
        if proc is not None:
            self._terminate(proc)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self.term_timeout_s + 5.0)
        with self._lock:
            if self._gap_start is not None:
                self.gaps.append((self._gap_start, monotonic_s()))
                self._gap_start = None
            self._thread = None

    # -- introspection ---------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """Process id of the running tegrastats child, if any."""
        with self._lock:
            proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def records(self) -> int:
        """How many lines with data have been read so far (all children together)."""
        with self._lock:
            return self._seq

    # -- the child -------------------------------------------------------------------------------------

    def _ensure_started(self, exe: str) -> bool:
        """Start the supervisor (and its first child) once; False when the first start failed."""
        with self._lock:
            if self._closed:
                self.last_error = "collector closed"
                return False
            if self._thread is not None:
                return True
            self._exe = exe
            try:
                self._spawn_locked()
            except OSError as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
                return False
            self._thread = threading.Thread(target=self._supervise, name="edgeprof-tegrastats", daemon=True)
            self._thread.start()
            return True

    def _spawn_locked(self) -> subprocess.Popen[str]:
        assert self._exe is not None
        proc = subprocess.Popen(
            [self._exe, "--interval", str(self.interval_ms)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,  # its own process group: a wrapper script and its children die together
        )
        self._proc = proc
        self._starts += 1
        if self._starts > 1:
            self.restarts += 1
        self._messages.clear()
        if proc.stderr is not None:
            threading.Thread(
                target=self._drain_stderr, args=(proc.stderr,), name="edgeprof-tegrastats-err", daemon=True
            ).start()
        return proc

    def _drain_stderr(self, stream: IO[str]) -> None:
        """Keep the last few stderr lines for reasons; this thread alone reads and closes ``stream``."""
        with contextlib.suppress(OSError, ValueError):
            for line in iter(lambda: stream.readline(MAX_LINE_CHARS), ""):
                self._note(line)
        with contextlib.suppress(OSError, ValueError):
            stream.close()

    def _note(self, line: str) -> None:
        text = line.strip()
        if text:
            with self._lock:
                self._messages.append(text[:200])

    def _supervise(self) -> None:
        backoff = MIN_RESTART_INTERVAL_S
        while True:
            with self._lock:
                proc = self._proc
            if proc is None:
                return
            started = monotonic_s()
            got_line = self._read(proc)
            self._reap(proc)
            died = monotonic_s()
            with self._changed:
                self._exits += 1
                self._last_exit = _describe_exit(proc.returncode)
                if self._stop.is_set():
                    self._proc = None
                    self._changed.notify_all()
                    return
                self.last_error = f"tegrastats {self._last_exit}"
                if self._gap_start is None:
                    last = self._latest_t
                    self._gap_start = last if got_line and last is not None else died
                self._proc = None
                self._changed.notify_all()
            log.warning("tegrastats %s; restarting", _describe_exit(proc.returncode))
            backoff = MIN_RESTART_INTERVAL_S if got_line else min(backoff * 2, MAX_RESTART_INTERVAL_S)
            while True:
                delay = max(0.0, started + backoff - monotonic_s())
                if self._stop.wait(delay):
                    return
                with self._lock:
                    if self._stop.is_set():
                        return
                    try:
                        self._spawn_locked()
                        break
                    except OSError as exc:
                        self.last_error = f"cannot restart tegrastats: {type(exc).__name__}: {exc}"
                started = monotonic_s()
                backoff = min(backoff * 2, MAX_RESTART_INTERVAL_S)

    def _read(self, proc: subprocess.Popen[str]) -> bool:
        """Read lines until EOF; True if at least one line with data came."""
        stream = proc.stdout
        if stream is None:
            return False
        got = False
        discarding = False
        with contextlib.suppress(OSError, ValueError):
            for line in iter(lambda: stream.readline(MAX_LINE_CHARS), ""):
                complete = line.endswith("\n")
                if discarding or (not complete and len(line) >= MAX_LINE_CHARS):
                    discarding = not complete
                    continue
                rec = parse_line(line)
                if not has_data(rec):
                    self._note(line)  # a warning printed on stdout, not a reading
                    continue
                got = True
                self._store(rec)
        return got

    def _store(self, rec: TegrastatsRecord) -> None:
        now = monotonic_s()
        with self._changed:
            self._latest, self._latest_t = rec, now
            self._seq += 1
            if self._first is None:
                self._first = rec
                self._declared = [metric_for(name) for name in record_to_metrics(rec)]
            if self._gap_start is not None:
                self.gaps.append((self._gap_start, now))
                self._gap_start = None
            self._changed.notify_all()

    def _terminate(self, proc: subprocess.Popen[str]) -> None:
        """SIGTERM the child's process group, SIGKILL it after ``term_timeout_s``, and wait for it.

        Streams are left to the supervisor thread, which may still be reading them.
        """
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=self.term_timeout_s)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5.0)

    def _reap(self, proc: subprocess.Popen[str]) -> None:
        """After EOF on stdout (supervisor thread only): collect the exit status, close stdout."""
        try:
            proc.wait(timeout=self.term_timeout_s)
        except subprocess.TimeoutExpired:
            # Its stdout closed but it lives on: it will not print again, so it goes.
            _signal_group(proc, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5.0)
        if proc.stdout is not None:
            with contextlib.suppress(OSError, ValueError):
                proc.stdout.close()


def _signal_group(proc: subprocess.Popen[str], sig: signal.Signals) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)  # start_new_session made it the leader of group ``pid``
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(OSError):
            proc.send_signal(sig)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


# A Jetson's board input rails: what the whole board draws (jtop uses the same names as its total).
# VIN_SYS_5V0 is not one of them: on Thor, tegrastats prints VIN beside it at several times its value
# (tests/fixtures/captures/tegrastats_jp7), so it is one supply among the others.
BOARD_INPUT_RAILS = frozenset({"power.vdd_in_mw", "power.pom_5v_in_mw", "power.vin_mw"})


def jetson_role(metric: str) -> MetricRole | None:
    """Roles of the metric names tegrastats and jtop share (``record_to_metrics``, ``collectors/jtop``)."""
    head, _, leaf = metric.partition(".")
    is_core = head.startswith("cpu") and head[3:].isdigit()
    if head == "mem":
        return MetricRole("memory", "MB", "soc" if leaf == "shared_mb" else "dram")
    if leaf == "util_pct" and (head == "cpu" or is_core):
        return MetricRole("utilization", "pct", "cpu")
    if leaf == "freq_mhz" and is_core:
        return MetricRole("clock", "MHz", "cpu", domain="cpu", per_core=True, measured=True)
    if head in ("gpu", "emc") and leaf in ("util_pct", "freq_mhz"):
        component: Component = "gpu" if head == "gpu" else "dram"
        if leaf == "util_pct":
            return MetricRole("utilization", "pct", component)
        return MetricRole(
            "clock", "MHz", component, domain="gpu" if head == "gpu" else None, measured=True
        )
    if head == "temp" and leaf.endswith("_c"):
        if leaf.endswith(SECOND_TEMP_SUFFIX + "_c"):
            # JetPack 7's undocumented second value of ``name@a/bC``: stored, never judged.
            return MetricRole("other", "C", component_of_sensor(leaf))
        return thermometer_role(leaf[:-2])
    if head == "power" and leaf.endswith("_mw"):
        rail = leaf[:-3]
        if metric in BOARD_INPUT_RAILS:
            return MetricRole("power", "mW", "board", whole_board=True, scope="board_input")
        if rail == "total":
            return MetricRole("power", "mW", "board", scope="rails_total")
        if rail == "nc" or rail.startswith("nc_"):
            return MetricRole("other", "mW")  # an unconnected channel (AGX Orin), as jtop skips it
        return MetricRole("power", "mW", component_of_sensor(rail), scope="rail")
    if head == "fan":
        return MetricRole("other", "pct" if leaf.endswith("_pct") else "rpm", "board")
    return None
