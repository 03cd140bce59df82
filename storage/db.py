"""Engine and session setup: SQLite in WAL mode by default, any SQLAlchemy URL otherwise."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from edgeprof.storage.migrations import upgrade

# Long enough that a reader (``edgeprof status``/``report``) never sees "database is locked" while the agent
# commits a batch of samples, short enough that a stuck writer is noticed.
SQLITE_BUSY_TIMEOUT_MS = 30_000


def default_db_path() -> Path:
    """``$EDGEPROF_DB`` or ``$XDG_DATA_HOME/edgeprof/edgeprof.db`` (``~/.local/share/...``)."""
    env = os.environ.get("EDGEPROF_DB")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "edgeprof" / "edgeprof.db"


def db_url(db: str | Path | None) -> str:
    """Turn a path (or None for the default) into a URL; a value containing ``://`` is taken as a URL."""
    if db is None:
        db = default_db_path()
    text = str(db)
    if "://" in text:
        return text
    path = Path(text).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets readers run while the agent writes, and survives kill -9 / power loss with at most the last
    # uncommitted transaction lost.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def open_engine(db: str | Path | None = None, *, migrate: bool = True) -> Engine:
    """Create an engine for ``db`` (path, URL or None = default) and bring its schema to the head."""
    url = db_url(db)
    is_sqlite = make_url(url).get_backend_name() == "sqlite"
    connect_args: dict[str, Any] = {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000} if is_sqlite else {}
    engine = create_engine(url, connect_args=connect_args)
    if is_sqlite:
        event.listen(engine, "connect", _sqlite_pragmas)
    if migrate:
        upgrade(engine)
    return engine


def new_session(engine: Engine) -> Session:
    return Session(engine, expire_on_commit=False)
