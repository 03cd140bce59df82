"""Settings every way of opening a database shares: the engine opener (``storage.db``) and the migrator
(``storage.migrations``) both read them, so neither has to import the other for them."""

from __future__ import annotations

# Long enough that a reader (``edgeprof status``/``report``) never sees "database is locked" while the agent
# commits a batch of samples, short enough that a stuck writer is noticed.
SQLITE_BUSY_TIMEOUT_MS = 30_000
