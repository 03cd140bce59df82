"""``edgeprof agent``: the unattended sweeper that systemd starts.

It takes plans from a spool directory (``queue/*.toml``, oldest first) or a single plan, runs one sweep at a
time, and moves each plan to ``done/`` or ``failed/`` (with a ``.error.txt`` beside it). Whatever happens at
3 a.m. the morning shows every result taken so far:

* start: runs a previous agent left ``running`` (kill -9, power loss) are marked ``interrupted``; their sweep
  is resumed when its plan comes round again, and a finished run is never redone;
* SIGTERM/SIGINT: the current child is stopped, its run marked ``interrupted``, samples flushed, exit 0;
* SIGHUP: the queue is read again now;
* ``--until HH:MM``: no new config starts after that time (the sweep is ``paused``, resumed next time);
* disk guard: no new run while the DB's filesystem has less than ``--min-free-mb`` free;
* systemd: READY/STATUS/WATCHDOG datagrams to ``$NOTIFY_SOCKET``; the watchdog is fed only while the main
  loop itself makes progress, or inside a step bounded in time (validating a plan, archiving, compacting),
  so a hung agent is restarted and a slow but bounded step is not;
* the queue (agent/daemon/queue.py): a plan is taken once complete, never deleted, and one that cannot be
  archived is set aside with a growing retry delay instead of being read again and again.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import logging
import os
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from edgeprof.daemon.exposition import DEFAULT_METRICS_ADDR, MetricsServer, start_metrics_server
from edgeprof.daemon.notify import Notifier
from edgeprof.daemon.queue import DEFAULT_SETTLE_S, ChangedWhileRead, Identity, PlanQueue, encodable_name
from edgeprof.fleet import BackgroundPusher, start_pusher
from edgeprof.gguf import probe_bandwidth
from edgeprof.plan import Plan, PlanError, parse_plan
from edgeprof.run_states import utcnow
from edgeprof.safefs import UnsafePath, lock_queue, read_nofollow
from edgeprof.safetext import SafeLogFormatter
from edgeprof.storage.db import db_url
from edgeprof.storage.guard import StorageGuardError, check_open_engine
from edgeprof.storage.models import AgentState
from edgeprof.sweep import LeaseHeld

# The plan parser and the sweep loop are imported where a plan is read or run: `edgeprof status` imports
# this package and only reads the database, and a status that `watch` runs every few seconds should not
# load the whole sweep machinery each time.
if TYPE_CHECKING:
    from edgeprof.fleet.queue import FleetConfig
    from edgeprof.plan import Plan
    from edgeprof.sweep import SweepOutcome

log = logging.getLogger("edgeprof.agent")


def parse_until(text: str | None) -> dt.time | None:
    if not text:
        return None
    try:
        hours, minutes = text.split(":")
        return dt.time(int(hours), int(minutes))
    except (ValueError, OverflowError):  # 99999999999999999999:00 overflows C's int
        raise ValueError(f"--until expects HH:MM (24 h), got {text!r}") from None


def window_closed(until: dt.time | None, started: dt.datetime, now: dt.datetime) -> bool:
    """True once the first ``until`` after ``started`` has passed (a 23:00 start with --until 07:00 runs
    through midnight and stops at 07:00 the next morning)."""
    if until is None:
        return False
    deadline = started.replace(hour=until.hour, minute=until.minute, second=0, microsecond=0)
    if deadline <= started:
        deadline += dt.timedelta(days=1)
    return now >= deadline


def _storable(text: str | None) -> str | None:
    """A text the database can hold: a non-UTF-8 plan name once made every state write fail (stale status)."""
    return encodable_name(text) if text is not None else None


def recover_interrupted(session: Session) -> int:
    """Mark what a dead owner left running as interrupted; returns how many runs were marked.

    Only sweeps whose lease owner is gone (dead pid, reused pid, stale heartbeat on another host): another
    agent or ``edgeprof run`` that is alive keeps its runs (a starting agent used to mark them interrupted).
    Sweeps without a lease (written by an older edgeprof) are reconciled when their plan runs again.
    """
    from edgeprof.sweep import pid_alive, reconcile_dead_owners
    n = sum(reconcile_dead_owners(session).values())
    here = socket.gethostname()
    for state in session.scalars(select(AgentState).where(AgentState.stopped_at.is_(None))):
        if state.hostname == here and state.pid != os.getpid() and not pid_alive(state.pid):
            state.stopped_at = state.heartbeat_at
            state.state = "died"
    session.commit()
    return n


@dataclass
class AgentConfig:
    queue: Path | None
    plan: Path | None
    until: dt.time | None = None
    min_free_mb: int = 500
    once: bool = False
    poll_s: float = 10.0
    telemetry: bool = True
    wait: bool = False  # another agent holds the queue / another process runs the plan: wait, not exit 2
    # Power-mode switching is the machine owner's decision: the agent's own flag, never a dropped plan's.
    allow_power_mode_change: bool = False
    # Push each finished sweep to this central DB, in the background (agent/fleet/push.py).
    push_to: str | None = None
    # After each finished sweep, downsample raw telemetry older than this (``db compact``), so that a device
    # that sweeps every night does not fill its disk.
    compact_keep_raw_s: float | None = None
    # Serve Prometheus' /metrics on this port (0: any free one) from a thread (agent/daemon/exposition.py).
    metrics_port: int | None = None
    metrics_addr: str = DEFAULT_METRICS_ADDR
    # A dropped plan is taken once it has been unchanged this long (a plan renamed in is taken at once).
    settle_s: float = DEFAULT_SETTLE_S
    # Take jobs from a central PostgreSQL queue instead of a spool folder (agent/daemon/fleet.py).
    fleet: FleetConfig | None = None


# How long each step outside a sweep may keep the watchdog fed without a heartbeat of its own: each is
# bounded (reads, GGUF walks and template renders are), so a step past its bound is a hang, restarted.
VALIDATE_BOUND_S = 300.0
HOUSEKEEPING_BOUND_S = 1800.0  # compaction after a sweep, on a large database and a slow card


class Agent:
    def __init__(
        self,
        engine: Engine,
        db_path: Path | None,
        config: AgentConfig,
        notifier: Notifier | None = None,
        now: Callable[[], dt.datetime] = dt.datetime.now,
    ) -> None:
        self.engine = engine
        self.db_path = db_path
        self.config = config
        self.notifier = notifier or Notifier()
        self.now = now
        self.started = now()
        self.stop_requested = threading.Event()
        self.wake = threading.Event()
        self._last_beat = time.monotonic()
        self._state_id: int | None = None
        self._last_db_beat = 0.0
        self._current_sweep: int | None = None
        self._current_plan: str | None = None
        self.exit_code = 0
        self._last_state: tuple[str, str | None] | None = None
        self._queue_lock: Any = None
        self._pusher: BackgroundPusher | None = None  # when push_to is set
        self.metrics: MetricsServer | None = None  # when metrics_port is set
        self._busy_until = 0.0  # a bounded long step is under way until then (see long_step)
        self._settling = False  # a plan in the queue is still being written
        self.queue = PlanQueue(config.queue, config.settle_s) if config.queue is not None else None

    # -- signals ----------------------------------------------------------------------------------------
    def install_signals(self) -> None:
        signal.signal(signal.SIGHUP, self._on_hup)

    def _on_hup(self, _signum: int, _frame: Any) -> None:
        log.info("SIGHUP: re-reading the queue")
        self.wake.set()

    # -- heartbeat / status -----------------------------------------------------------------------------
    def beat(self) -> None:
        self._last_beat = time.monotonic()
        if time.monotonic() - self._last_db_beat >= 5.0:
            self._last_db_beat = time.monotonic()
            self._write_state(None, None)

    def _write_state(self, state: str | None, message: str | None) -> None:
        try:
            with Session(self.engine) as session:
                row = session.get(AgentState, self._state_id) if self._state_id else None
                if row is None:
                    row = AgentState(
                        pid=os.getpid(),
                        hostname=socket.gethostname(),
                        started_at=utcnow(),
                        heartbeat_at=utcnow(),
                        state=state or "starting",
                        message=message,
                    )
                    session.add(row)
                row.heartbeat_at = utcnow()
                if state is not None:
                    row.state, row.message = state, _storable(message)
                row.sweep_id, row.plan_path = self._current_sweep, _storable(self._current_plan)
                session.commit()
                self._state_id = row.id
        except Exception as exc:  # noqa: BLE001 - a busy DB must not stop the agent; status will show the age
            log.warning("could not record agent state: %s", exc)

    def set_state(self, state: str, message: str | None = None) -> None:
        if (state, message) != self._last_state:  # one log line per change, not one per idle poll
            log.info("%s%s", state, f": {message}" if message else "")
            self._last_state = (state, message)
        self._write_state(state, message)
        self.notifier.send(status=f"{state}{': ' + message if message else ''}"[:200])

    def _watchdog_loop(self, interval_s: float) -> None:
        # Feed the watchdog only while the main loop is alive, or inside a long step that is bounded; a
        # hung main loop (or a step past its bound) lets systemd restart us.
        period = max(1.0, interval_s / 4)
        while not self.stop_requested.wait(period):
            if self.main_loop_alive(time.monotonic(), interval_s):
                self.notifier.send(watchdog="1")

    def main_loop_alive(self, now: float, interval_s: float) -> bool:
        """A heartbeat within half the watchdog interval, or a bounded long step not past its bound."""
        return now - self._last_beat < interval_s / 2 or now < self._busy_until

    @contextlib.contextmanager
    def long_step(self, bound_s: float) -> Iterator[None]:
        """A step with no heartbeat of its own (validating a plan, checking the DB, compacting) keeps the
        watchdog fed for at most ``bound_s``: a watchdog shorter than the step no longer restarts the agent
        into the same plan, and a step that overruns its bound is still a hang."""
        self.beat()
        outer = self._busy_until  # a step inside another keeps the outer one's bound when it ends
        self._busy_until = max(outer, time.monotonic() + bound_s)
        try:
            yield
        finally:
            self._busy_until = outer
            self.beat()

    # -- guards -----------------------------------------------------------------------------------------
    def free_mb(self) -> float | None:
        if self.db_path is None:
            return None
        try:
            usage = shutil.disk_usage(self.db_path.parent)
        except OSError:
            return None
        return usage.free / (1024 * 1024)

    def should_start(self) -> str | None:
        """None when a new config may start; else why not (checked before every config)."""
        self.beat()
        if self.stop_requested.is_set():
            return "stop requested"
        if window_closed(self.config.until, self.started, self.now()):
            return f"time window closed (--until {self.config.until:%H:%M})"
        free = self.free_mb()
        if free is not None and free < self.config.min_free_mb:
            return f"only {free:.0f} MiB free on the database's filesystem (< {self.config.min_free_mb} MiB)"
        return None

    # -- queue ------------------------------------------------------------------------------------------
    def next_plan(self) -> Path | None:
        if self.config.plan is not None:
            return self.config.plan
        assert self.queue is not None
        self.queue.retry_held(self._stamp())
        plan, self._settling = self.queue.scan()
        return plan

    def _stamp(self) -> str:
        return self.now().strftime("%Y%m%d-%H%M%S")

    def _archive(
        self, plan: Path, folder: str, error: str | None, data: bytes, ident: Identity | None
    ) -> None:
        """After a plan: the text that ran into ``done/``, a refused one moved whole into ``failed/``
        (agent/daemon/queue.py); a plan that cannot be archived is set aside, never deleted."""
        if self.queue is None or plan.parent != self.queue.folder:
            return
        with self.long_step(HOUSEKEEPING_BOUND_S):
            if folder == "done":
                self.queue.finish(plan, ident, data, self._stamp())
            else:
                self.queue.refuse(plan, ident, error or "", self._stamp())

    def _telemetry_factory(self, plan: Plan) -> Callable[[int], Any] | None:
        if not self.config.telemetry:
            return None
        from edgeprof.sweep import Telemetry

        def make(sweep_id: int) -> Telemetry:
            return Telemetry(self.engine, sweep_id, plan.collect, plan.cooldown, heartbeat=self.beat)

        return make

    # -- main loop --------------------------------------------------------------------------------------
    def run(self) -> int:
        """Serve the queue; raises QueueLocked when another agent serves it (``wait``: wait for it)."""
        if self.config.queue is not None and self._queue_lock is None:
            self._queue_lock = lock_queue(
                self.config.queue,
                wait=self.config.wait,
                on_wait=lambda holder: log.info("waiting: queue held by %s", holder),
            )
        try:
            return self._serve()
        finally:
            if self._queue_lock is not None:
                self._queue_lock.release()
                self._queue_lock = None

    def _serve(self) -> int:
        with self.long_step(VALIDATE_BOUND_S), Session(self.engine) as session:
            n = recover_interrupted(session)
        if n:
            log.warning("marked %d run(s) left running by a dead owner as interrupted", n)
        interval = self.notifier.watchdog_interval_s()
        if interval:
            threading.Thread(target=self._watchdog_loop, args=(interval,), daemon=True).start()
        if self.config.metrics_port is not None:  # before "ready": a port that is taken stops the start
            port, addr = self.config.metrics_port, self.config.metrics_addr
            self.metrics = start_metrics_server(self.engine, port, addr)
        self.set_state("ready", "waiting for plans")
        self.notifier.send(ready="1")
        self._pusher = start_pusher(self.engine, self.config.push_to)
        try:
            return self._loop()
        except KeyboardInterrupt:
            self.set_state("stopped", "stopped by signal")
            return 0
        finally:
            if self._pusher is not None:
                self._pusher.stop()
            if self.metrics is not None:
                self.metrics.stop()
            self.stop_requested.set()
            self._current_sweep = None
            self._finish_state()

    def _finish_state(self) -> None:
        try:
            with Session(self.engine) as session:
                row = session.get(AgentState, self._state_id) if self._state_id else None
                if row is not None:
                    row.stopped_at = utcnow()
                    if row.state not in ("stopped", "died"):  # its last state ("idle") is over
                        row.state = "stopped"
                    session.commit()
        except Exception as exc:  # noqa: BLE001 - shutting down; nothing else to do
            log.warning("could not record agent stop: %s", exc)

    def _loop(self) -> int:
        tried_single = False
        while not self.stop_requested.is_set():
            self.beat()
            reason = self.should_start()
            if reason and reason.startswith("time window"):
                self.set_state("stopped", reason)
                return 0
            if reason:
                self.set_state("paused", reason)
                self._idle()
                continue
            plan_path = None if (self.config.plan is not None and tried_single) else self.next_plan()
            if plan_path is None and self._settling:
                self._idle(min(self.config.poll_s, max(0.2, self.config.settle_s / 4)))  # being written
                continue
            if plan_path is None:
                if self.config.once or self.config.plan is not None:
                    self.set_state("stopped", "queue empty" if self.config.queue else "plan done")
                    return self.exit_code
                self.set_state("idle", "queue empty")
                self._idle()
                continue
            tried_single = True
            self._run_one(plan_path)
        return self.exit_code

    def _idle(self, seconds: float | None = None) -> None:
        self.wake.clear()
        end = time.monotonic() + (self.config.poll_s if seconds is None else seconds)
        while time.monotonic() < end and not self.wake.is_set() and not self.stop_requested.is_set():
            self.beat()
            self.wake.wait(min(1.0, end - time.monotonic()))

    def _read_plan(self, plan_path: Path) -> tuple[bytes, Identity | None, Plan]:
        """The plan's bytes, read once without following a link (a symlinked plan could make the agent,
        often root, quote another file into ``.error.txt``), then validated; raises PlanError (UnsafePath
        for a symlink, ChangedWhileRead for a plan still being written)."""
        from edgeprof.plan import MAX_PLAN_BYTES, PlanError

        source = str(plan_path)
        ident: Identity | None = None
        try:
            if self.queue is not None and plan_path.parent == self.queue.folder:
                data, ident = self.queue.read(plan_path, MAX_PLAN_BYTES)
            else:
                data = read_nofollow(plan_path, MAX_PLAN_BYTES)
        except (FileNotFoundError, ChangedWhileRead):
            raise
        except UnsafePath as exc:
            if exc.errno == errno.ELOOP:
                raise
            raise PlanError(source, [exc.strerror or str(exc)]) from None
        except OSError as exc:
            raise PlanError(source, [exc.strerror or str(exc)]) from None
        try:
            return data, ident, self._validate(plan_path, data)
        except PlanError as exc:
            exc.identity = ident  # type: ignore[attr-defined]  # the refusal moves this very file
            raise

    def _validate(self, plan_path: Path, data: bytes) -> Plan:
        from edgeprof.plan import MAX_PLAN_BYTES, PlanError

        source = str(plan_path)
        if len(data) > MAX_PLAN_BYTES:
            raise PlanError(source, [f"more than {MAX_PLAN_BYTES} bytes; a plan is a page of TOML"])
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise PlanError(source, ["not UTF-8 text"]) from None
        plan = parse_plan(text, source=source, base=plan_path.resolve().parent)
        if plan.power_modes and not self.config.allow_power_mode_change:
            raise PlanError(
                source,
                [
                    "matrix.power_mode: the agent was not started with --allow-power-mode-change; a "
                    "dropped plan cannot grant itself that permission"
                ],
            )
        return plan

    def _run_one(self, plan_path: Path) -> None:
        """One plan: read and check it, check the database, run its sweep, then archive it."""
        self._current_plan = str(plan_path)
        with self.long_step(VALIDATE_BOUND_S):
            read = self._read_or_reject(plan_path)
            if read is None or not self._database_ok():
                return
        data, ident, plan = read
        self.set_state("running", f"plan {plan.name!r}: {plan.n_specs()} configs")
        outcome = self._sweep(plan_path, plan, data, ident)
        if outcome is not None:
            self._finish(plan_path, data, ident, outcome)

    def _read_or_reject(self, plan_path: Path) -> tuple[bytes, Identity | None, Plan] | None:
        """The plan, or None after a plan that vanished or is still being written (skipped) or is bad
        (moved to failed/). Whatever a dropped file does to the checks, it never stops the agent."""
        try:
            return self._read_plan(plan_path)
        except FileNotFoundError:
            log.warning("plan %s was removed before it could be read; skipped", plan_path.name)
        except ChangedWhileRead:
            log.info("plan %s is still being written; read again once it settles", plan_path.name)
        except UnsafePath as exc:  # a symlink: refused unread
            self._reject(plan_path, PlanError(str(plan_path), [exc.strerror or str(exc)]), None)
        except PlanError as exc:
            self._reject(plan_path, exc, getattr(exc, "identity", None))
        except Exception as exc:  # a check that broke on this file is this file's fault, not a crash
            log.exception("plan %s could not be checked", plan_path.name)
            why = f"edgeprof could not check this plan: {type(exc).__name__}: {exc}"
            self._reject(plan_path, PlanError(str(plan_path), [why]), None)
        return None

    def _reject(self, plan_path: Path, exc: PlanError, ident: Identity | None) -> None:
        message = "\n".join(exc.lines())
        log.error("plan %s rejected: %s", plan_path.name, "; ".join(exc.problems))
        self.set_state("error", f"plan {plan_path.name} rejected ({len(exc.problems)} problems)")
        if self.queue is not None and plan_path.is_symlink():
            self.queue.drop_link(plan_path, message, self._stamp())
        else:
            self._archive(plan_path, "failed", message, b"", ident)
        if self.config.plan is not None:
            self.exit_code = 2  # a single bad plan is bad input: say so to the caller (and to systemd)

    def _database_ok(self) -> bool:
        """Before every sweep, not only at start: the DB may have been damaged or made read-only since (a
        long-running agent, a full SD card, someone's chattr). A bad one stops the agent (exit 2)."""
        if self.db_path is None:
            return True
        try:
            check_open_engine(self.engine, self.db_path)
        except StorageGuardError as exc:
            self._stop_on_storage_error(str(exc))
            return False
        return True

    def _stop_on_storage_error(self, message: str) -> None:
        log.error("%s", message)
        self.set_state("error", message[:300])
        self.exit_code = 2
        self.stop_requested.set()

    def _sweep(self, plan_path: Path, plan: Plan, data: bytes, ident: Identity | None) -> SweepOutcome | None:
        """Run the plan's sweep; None when it did not finish in a way that archives the plan."""
        from edgeprof.sweep import SweepAborted, run_plan

        try:
            return run_plan(
                self.engine,
                plan,
                telemetry=self._telemetry_factory(plan),
                heartbeat=self.beat,
                should_start=self.should_start,
                wait=self.config.wait,
                bandwidth_probe=probe_bandwidth,  # once per sweep: the report's share of the bandwidth limit
            )
        except KeyboardInterrupt:
            raise
        except LeaseHeld as exc:
            # Someone else (``edgeprof run``, another agent on another queue) runs this plan: not a bad plan.
            self.set_state("waiting", f"plan {plan_path.name}: {exc}")
            if self.config.plan is not None:
                self.exit_code = 2
            else:
                self._idle()
        except SweepAborted as exc:
            # Storage failed (disk full, damaged or read-only DB): the plan is fine and stays queued.
            self._stop_on_storage_error(str(exc))
        except Exception as exc:
            log.exception("sweep of %s failed unexpectedly", plan_path.name)
            self.set_state("error", f"plan {plan_path.name}: {type(exc).__name__}: {exc}")
            self._archive(plan_path, "failed", f"{type(exc).__name__}: {exc}", data, ident)
        return None

    def _finish(self, plan_path: Path, data: bytes, ident: Identity | None, outcome: SweepOutcome) -> None:
        """After the sweep: stop (a signal), stay queued (paused), or push, archive and compact."""
        self._current_sweep = outcome.sweep_id
        summary = ", ".join(f"{n} {s}" for s, n in sorted(outcome.counts.items())) or "nothing new"
        if outcome.interrupted:
            raise KeyboardInterrupt
        if outcome.paused:
            self.set_state("paused", f"sweep {outcome.sweep_id} paused: {outcome.paused}")
            return
        log.info("sweep %d of %s finished: %s", outcome.sweep_id, plan_path.name, summary)
        if self._pusher is not None:
            self._pusher.request(outcome.sweep_id)  # in the background: a slow central DB never holds a sweep
        self.set_state("idle", f"sweep {outcome.sweep_id} finished: {summary}")
        self._archive(plan_path, "done", None, data, ident)
        if self.config.compact_keep_raw_s is not None:
            with self.long_step(HOUSEKEEPING_BOUND_S):
                self._compact(self.config.compact_keep_raw_s)

    def _compact(self, keep_raw_s: float) -> None:
        # Imported here: compaction needs numpy, which `edgeprof status` (it imports this package) must not
        # load.
        from edgeprof.storage.retention import run_compact

        try:  # retention is housekeeping: a failure is logged, never a failed sweep or a stopped agent
            log.info("db compact: %s", run_compact(self.engine, keep_raw_s, vacuum=False))
        except Exception:
            log.exception("db compact after the sweep failed")


class OneLineFormatter(SafeLogFormatter):
    """A message with its control characters escaped (``SafeLogFormatter``), and a traceback folded into its
    event's line (" | " between its lines): the journal keeps one line per event, and a reader of
    ``journalctl -u edgeprof-agent`` sees which event it belongs to."""

    def format(self, record: logging.LogRecord) -> str:
        return " | ".join(line for line in super().format(record).splitlines() if line.strip())


# Libraries that log each request at INFO (httpx's "HTTP Request: GET .../metrics" twice a second while a
# server is polled): WARNING unless -v, so the journal holds the agent's events
QUIET_LOGGERS = ("httpx", "httpcore", "urllib3", "asyncio", "matplotlib", "PIL", "prometheus_client")


def configure_logging(verbose: bool = False) -> None:
    """One line per event on stderr (the journal under systemd), each marked as the agent's; other
    libraries' lines only from WARNING up, unless ``verbose``."""
    handler = logging.StreamHandler()
    handler.setFormatter(OneLineFormatter("edgeprof-agent %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
    logging.getLogger("edgeprof").setLevel(logging.DEBUG if verbose else logging.INFO)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if verbose else logging.WARNING)


def serve(engine: Engine, db: str | None, config: AgentConfig, agent_class: type[Agent] | None = None) -> int:
    """Run the agent in the foreground until its queue or plan is done or a signal stops it; returns the
    exit code. SIGTERM (systemd's stop) stops the current run as Ctrl-C would: marked interrupted, exit 0.
    Raises QueueLocked when another agent serves the queue (and ``config.wait`` is off)."""
    url = db_url(db)
    db_path = Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None

    def on_term(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    agent = (agent_class or Agent)(engine, db_path, config)
    agent.install_signals()
    return agent.run()
