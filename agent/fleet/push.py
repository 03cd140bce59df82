"""The agent's push to a central database: in a background thread, retried with backoff.

A central DB that is down or slow never stops or slows a sweep: the sweep writes to the local DB as always,
and finished sweeps are queued here; a failed push is logged as one warning line and retried later (and
again at the next agent start, which queues every local sweep: pushing what is already there adds nothing).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.engine import make_url

from edgeprof.fleet.sweeps import push_sweeps
from edgeprof.storage.db import db_url, mask_url, open_engine, scrub
from edgeprof.storage.models import Sweep

log = logging.getLogger("edgeprof.agent")

# First retry after a minute, then doubling, never more than 30 minutes apart.
RETRY_FIRST_S = 60.0
RETRY_MAX_S = 1800.0
# A central DB that does not answer at all (a dropped network) must not hold a push thread for minutes.
CONNECT_TIMEOUT_S = 10


def with_connect_timeout(url: str) -> str:
    """``url`` with a connect timeout for PostgreSQL (unless the user gave one)."""
    full = db_url(url, create_dir=False)
    parsed = make_url(full)
    if parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
        parsed = parsed.update_query_dict({"connect_timeout": str(CONNECT_TIMEOUT_S)})
    return parsed.render_as_string(hide_password=False)


class BackgroundPusher:
    """Queue of local sweep ids to push to ``target_url``; one daemon thread works it off."""

    def __init__(self, source: Engine, target_url: str, retry_first_s: float = RETRY_FIRST_S) -> None:
        self.source = source
        self.target_url = with_connect_timeout(target_url)
        self.retry_first_s = retry_first_s
        self._pending: list[int] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._target: Engine | None = None
        self._thread = threading.Thread(target=self._loop, name="edgeprof-push", daemon=True)
        self.pushed: list[int] = []
        self.failures = 0

    def start(self, queue_existing: bool = True) -> BackgroundPusher:
        if queue_existing:
            with self.source.connect() as conn:
                ids = [i for (i,) in conn.execute(select(Sweep.id).where(Sweep.status != "running"))]
            self.request(*ids)
        self._thread.start()
        return self

    def request(self, *sweep_ids: int) -> None:
        with self._lock:
            for sweep_id in sweep_ids:
                if sweep_id not in self._pending:
                    self._pending.append(sweep_id)
            if self._pending:
                self._idle.clear()
        self._wake.set()

    def stop(self, flush_s: float = 30.0) -> None:
        """Give the queue up to ``flush_s`` to drain (the last sweep of a --once run), then stop."""
        self._idle.wait(timeout=flush_s)
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5)
        if self._target is not None:
            self._target.dispose()

    def _loop(self) -> None:
        delay = self.retry_first_s
        while not self._stop.is_set():
            with self._lock:
                batch = list(self._pending)
            if not batch:
                self._idle.set()
                self._wake.wait()
                self._wake.clear()
                continue
            if self._push(batch):
                delay = self.retry_first_s
                continue
            self.failures += 1
            self._idle.set()  # nothing more will happen before the retry: do not hold a shutdown
            log.warning("push to the central database will be retried in %.0f s", delay)
            self._wake.clear()
            self._wake.wait(timeout=delay)
            delay = min(delay * 2, RETRY_MAX_S)

    def _push(self, batch: list[int]) -> bool:
        try:
            if self._target is None:
                self._target = open_engine(self.target_url)
            result = push_sweeps(self.source, self._target, batch)
        except Exception as exc:  # noqa: BLE001 - any failure of the central DB is retried, never fatal
            first = str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__]
            log.warning("push to %s failed: %s", mask_url(self.target_url), scrub(first[0], self.target_url))
            if self._target is not None:
                self._target.dispose()
                self._target = None
            return False
        with self._lock:
            self._pending = [i for i in self._pending if i not in batch]
        self.pushed.extend(batch)
        if result.sent:
            log.info(
                "pushed %d sweep(s) to %s: %d rows added",
                len(result.sent),
                mask_url(self.target_url),
                result.n_added,
            )
        return True


def start_pusher(source: Engine, target_url: str | None, **kw: Any) -> BackgroundPusher | None:
    return BackgroundPusher(source, target_url, **kw).start() if target_url else None

