"""Whose lease is dead (agent/sweep/lease.py): a reused pid is told apart by the process start time, and
another host's owner (which cannot be probed) by its heartbeat."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from edgeprof.storage.models import SweepLease
from edgeprof.sweep import Owner, owner_dead


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def test_reused_pid_and_other_hosts_are_judged_by_start_time_and_heartbeat() -> None:
    me = Owner.me()
    now = utcnow()
    lease = SweepLease(
        lease_key="k",
        sweep_id=None,
        token="t",
        host=me.host,
        pid=me.pid,
        proc_start=me.proc_start,
        acquired_at=now,
        heartbeat_at=now,
        released_at=None,
    )
    assert not owner_dead(lease)
    lease.proc_start = "another-boot:123"  # same pid, another process: the owner is gone
    assert owner_dead(lease)
    lease.host = "some-other-host"  # cannot be probed: alive while it beats
    assert not owner_dead(lease, now=now + timedelta(seconds=60))
    assert owner_dead(lease, now=now + timedelta(hours=2))
