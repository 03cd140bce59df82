"""One writer per sweep: a lease row with its owner (host, pid, process start time) and a heartbeat.

Why a row and not a file lock: the database may be PostgreSQL shared by a fleet, where no file lock reaches;
a row is taken with a plain INSERT (the primary key makes exactly one of two concurrent writers win) and
taken over with a compare-and-swap UPDATE on its token, which every SQL database does atomically.

Why the process start time: pids are reused. A lease whose pid is alive but whose process started at another
moment (or before another boot) belongs to a dead owner. An owner on another host cannot be probed: it is dead
only once its heartbeat is older than ``STALE_AFTER_S``.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import Engine, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from edgeprof.storage.models import Run, Sweep, SweepLease

# The owner writes its heartbeat this often (from the run loop, so a hung owner stops beating) ...
HEARTBEAT_EVERY_S = 10.0
# ... and an owner on another host whose heartbeat is this old is taken for dead. Far above the beat period
# so that a slow database commit or a long cold load never makes a live owner look dead.
STALE_AFTER_S = 600.0

INTERRUPTED_REASON = (
    "the agent stopped during this run (the edgeprof process was killed, crashed or lost power); "
    "it is redone on resume"
)


def _utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return "?"


def process_start(pid: int) -> str | None:
    """``<boot id>:<start time in clock ticks>`` of a live process (Linux), None when it cannot be read.

    Field 22 of /proc/PID/stat; the command name (field 2) may hold spaces and parentheses, so the fields
    are counted from the last ')'.
    """
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) < 20:
        return None
    return f"{_boot_id()}:{fields[19]}"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OverflowError:
        return False
    return True


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    proc_start: str | None

    @classmethod
    def me(cls) -> Owner:
        return cls(socket.gethostname(), os.getpid(), process_start(os.getpid()))


def owner_dead(lease: SweepLease, now: datetime | None = None, here: str | None = None) -> bool:
    """True when the lease's owner can no longer be writing (released, dead pid, reused pid, stale)."""
    if lease.released_at is not None:
        return True
    here = here or socket.gethostname()
    if lease.host == here:
        if not pid_alive(lease.pid):
            return True
        current = process_start(lease.pid)
        # A differing start time: the pid now belongs to another process (or another boot).
        return lease.proc_start is not None and current is not None and current != lease.proc_start
    now = now or _utcnow()
    return (now - lease.heartbeat_at).total_seconds() > STALE_AFTER_S


def describe(lease: SweepLease) -> str:
    since = lease.acquired_at.strftime("%Y-%m-%d %H:%M:%S")
    beat = lease.heartbeat_at.strftime("%H:%M:%S")
    return f"pid {lease.pid} on {lease.host} (since {since} UTC, last heartbeat {beat} UTC)"


class LeaseHeld(RuntimeError):
    """Another live process holds the lease; the message names it in one line."""

    def __init__(self, key: str, holder: str) -> None:
        self.key = key
        self.holder = holder
        super().__init__(f"this sweep is already being run by {holder}")


class Lease:
    """The held lease: ``beat()`` from the run loop, ``attach()`` once the sweep exists, ``release()``."""

    def __init__(self, engine: Engine, key: str, token: str) -> None:
        self.engine = engine
        self.key = key
        self.token = token
        self._last_beat = time.monotonic()

    def attach(self, session: Session, sweep_id: int) -> None:
        """Record the sweep in the caller's transaction (committed with the sweep row itself)."""
        session.execute(
            update(SweepLease)
            .where(SweepLease.lease_key == self.key, SweepLease.token == self.token)
            .values(sweep_id=sweep_id)
        )

    def beat(self, force: bool = False) -> None:
        """Refresh the heartbeat at most every HEARTBEAT_EVERY_S; a busy DB costs one beat, not the sweep."""
        if not force and time.monotonic() - self._last_beat < HEARTBEAT_EVERY_S:
            return
        self._last_beat = time.monotonic()
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    update(SweepLease)
                    .where(SweepLease.lease_key == self.key, SweepLease.token == self.token)
                    .values(heartbeat_at=_utcnow())
                )
        except Exception:  # noqa: BLE001 - the next beat retries; staleness is 60 beats away
            pass

    def release(self) -> None:
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    update(SweepLease)
                    .where(SweepLease.lease_key == self.key, SweepLease.token == self.token)
                    .values(released_at=_utcnow(), heartbeat_at=_utcnow())
                )
        except Exception:  # noqa: BLE001 - an unreleased lease of a dead pid is taken over anyway
            pass


def acquire(
    engine: Engine,
    key: str,
    *,
    wait: bool = False,
    poll_s: float = 2.0,
    on_wait: Callable[[str], None] | None = None,
    owner: Owner | None = None,
) -> Lease:
    """Take the lease ``key`` or raise LeaseHeld (``wait``: poll until the holder is gone)."""
    owner = owner or Owner.me()
    told = False
    while True:
        token = str(uuid.uuid4())
        now = _utcnow()
        holder = _try_take(engine, key, token, owner, now)
        if holder is None:
            return Lease(engine, key, token)
        if not wait:
            raise LeaseHeld(key, holder)
        if on_wait is not None and not told:
            on_wait(holder)
            told = True
        time.sleep(poll_s)


def _try_take(engine: Engine, key: str, token: str, owner: Owner, now: datetime) -> str | None:
    """None when taken; else the live holder's description."""
    values = {
        "token": token,
        "host": owner.host,
        "pid": owner.pid,
        "proc_start": owner.proc_start,
        "acquired_at": now,
        "heartbeat_at": now,
        "released_at": None,
    }
    try:
        with engine.begin() as conn:
            conn.execute(insert(SweepLease).values(lease_key=key, sweep_id=None, **values))
        return None
    except IntegrityError:
        pass  # a row exists: live holder, or a dead one to take over
    with Session(engine) as session:
        row = session.get(SweepLease, key)
        if row is None:
            return "a process that just released it"  # vanished between the two statements: retry
        mine = row.host == owner.host and row.pid == owner.pid and row.proc_start == owner.proc_start
        # ``mine``: left by this very process (an earlier sweep of the agent that failed before releasing).
        if not mine and not owner_dead(row, now=now, here=owner.host):
            return describe(row)
        old = row.token
    # Compare-and-swap on the old token: of two processes taking over one dead lease, exactly one matches.
    with engine.begin() as conn:
        taken = conn.execute(
            update(SweepLease).where(SweepLease.lease_key == key, SweepLease.token == old).values(**values)
        ).rowcount
    return None if taken == 1 else "another process that took it over just now"


def reconcile_dead_owners(session: Session, sweep_ids: list[int] | None = None) -> dict[int, int]:
    """Sweeps left ``running`` by an owner that is gone, and their ``running`` runs, become ``interrupted``.

    Sweeps without any lease row predate leases (or died before attaching one, which cannot happen: the
    sweep and its lease link are one commit) and are left to the caller. Returns {sweep id: runs marked}.
    """
    query = select(Sweep).where(Sweep.status == "running")
    if sweep_ids is not None:
        query = query.where(Sweep.id.in_(sweep_ids))
    now = _utcnow()
    done: dict[int, int] = {}
    for sweep in session.scalars(query).all():
        lease = session.scalars(
            select(SweepLease).where(SweepLease.sweep_id == sweep.id).order_by(SweepLease.heartbeat_at.desc())
        ).first()
        if lease is None or not owner_dead(lease, now=now):
            continue
        done[sweep.id] = mark_interrupted(session, sweep, f"owner {describe(lease)} is gone")
    return done


def mark_interrupted(session: Session, sweep: Sweep, why: str | None = None) -> int:
    """Mark ``sweep`` and its ``running`` runs interrupted (not committed); returns the runs marked."""
    n = 0
    for run in session.scalars(select(Run).where(Run.sweep_id == sweep.id, Run.status == "running")):
        run.status = "interrupted"
        run.reason = INTERRUPTED_REASON + (f" ({why})" if why else "")
        run.ended_at = run.ended_at or _utcnow()
        n += 1
    sweep.status = "interrupted"
    sweep.ended_at = sweep.ended_at or _utcnow()
    return n


def lease_key(plan_hash: str, device_id: int) -> str:
    """One writer per plan on a device: the key a resume would look its sweep up by."""
    return f"plan:{device_id}:{plan_hash}"


def reconcile_plan(session: Session, plan_hash: str, device_id: int) -> int:
    """Called while holding the plan's lease: every sweep of this plan still ``running`` has a dead writer
    (all writers take the lease first), including sweeps written before leases existed."""
    n = 0
    for sweep in session.scalars(
        select(Sweep).where(
            Sweep.plan_hash == plan_hash, Sweep.device_id == device_id, Sweep.status == "running"
        )
    ).all():
        n += mark_interrupted(session, sweep, "found running when its plan was started again")
    return n


def owner_gone(session: Session, sweep_id: int) -> str | None:
    """Why a ``running`` sweep's writer is gone (None: alive, or no lease to judge by). Reads only."""
    lease = session.scalars(
        select(SweepLease).where(SweepLease.sweep_id == sweep_id).order_by(SweepLease.heartbeat_at.desc())
    ).first()
    if lease is None or not owner_dead(lease):
        return None
    return f"its owner {describe(lease)} is gone"
