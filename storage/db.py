"""Engine and session setup: SQLite in WAL mode by default, any SQLAlchemy URL otherwise."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session

from edgeprof.storage.migrations import check_current, upgrade
from edgeprof.storage.settings import SQLITE_BUSY_TIMEOUT_MS


def default_db_path() -> Path:
    """``$EDGEPROF_DB`` or ``$XDG_DATA_HOME/edgeprof/edgeprof.db`` (``~/.local/share/...``)."""
    env = os.environ.get("EDGEPROF_DB")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "edgeprof" / "edgeprof.db"


class DatabaseError(RuntimeError):
    """A database that cannot be opened, in one line, with any password masked."""


# psycopg 3 is what the [postgres] extra installs; a bare postgresql:// would make SQLAlchemy want psycopg2.
_PG_SCHEMES = ("postgresql://", "postgres://")
POSTGRES_DRIVER_HINT = "PostgreSQL needs its driver: pip install 'edgeprof[postgres]'"


def mask_url(url: str | Path | None) -> str:
    """``url`` fit to print: the password, if any, replaced by ``***`` (a path is returned as it is)."""
    text = str(url) if url is not None else "(default)"
    if "://" not in text:
        return text
    try:
        return make_url(text).render_as_string(hide_password=True)
    except ArgumentError:
        # Not parseable: still never print what sits between user: and @.
        return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", text)


def scrub(message: str, url: str | Path | None) -> str:
    """``message`` without the password of ``url`` (drivers may echo the connection string)."""
    text = str(url or "")
    if "://" in text:
        with contextlib.suppress(ArgumentError):
            password = make_url(text).password
            if password:
                message = message.replace(str(password), "***")
    return message


def db_url(db: str | Path | None, *, create_dir: bool = True) -> str:
    """Turn a path (or None for the default) into a URL; a value containing ``://`` is taken as a URL."""
    if db is None:
        db = default_db_path()
    text = str(db)
    if "://" in text:
        for scheme in _PG_SCHEMES:
            if text.startswith(scheme):
                return "postgresql+psycopg://" + text[len(scheme) :]
        return text
    path = Path(text).expanduser()
    if create_dir:
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


def _pg_read_only(dbapi_connection: Any, _record: Any) -> None:
    # A reading command must never write, even by mistake: the server refuses it for this session.
    cursor = dbapi_connection.cursor()
    cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    cursor.close()
    dbapi_connection.commit()


def open_engine(db: str | Path | None = None, *, migrate: bool = True, read_only: bool = False) -> Engine:
    """Create an engine for ``db`` (path, URL or None = default).

    Writers (``read_only=False``) bring the schema to the head. Readers never migrate, never create a file
    or folder and never write (a read-only SQLite connection; a READ ONLY PostgreSQL session): on a DB older
    than this edgeprof they raise ``SchemaOutdatedError`` ("run `edgeprof db upgrade`"). Errors opening the
    DB are ``DatabaseError`` with the password masked.
    """
    url = db_url(db, create_dir=not read_only)
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise DatabaseError(f"not a database path or URL: {mask_url(url)}") from exc
    is_sqlite = parsed.get_backend_name() == "sqlite"
    connect_args: dict[str, Any] = {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000} if is_sqlite else {}
    if is_sqlite and read_only:
        path = Path(parsed.database or "")
        if not path.is_file():
            raise DatabaseError(f"no edgeprof database at {path}")
        # mode=ro: SQLite itself refuses writes; it also opens a file the user may only read. Where no -shm
        # file can be made beside it (a read-only folder), WAL reading needs immutable=1 (SQLite docs, WAL).
        immutable = not os.access(path, os.W_OK) and not os.access(path.parent, os.W_OK)
        url = f"sqlite:///file:{path}?mode=ro{'&immutable=1' if immutable else ''}&uri=true"
    try:
        engine = create_engine(url, connect_args=connect_args)
    except ImportError as exc:
        hint = POSTGRES_DRIVER_HINT if parsed.get_backend_name() == "postgresql" else f"driver missing: {exc}"
        raise DatabaseError(hint) from None
    except ArgumentError as exc:
        raise DatabaseError(f"cannot use {mask_url(url)}: {scrub(str(exc), url)}") from None
    if is_sqlite and not read_only:
        event.listen(engine, "connect", _sqlite_pragmas)
    elif is_sqlite:
        event.listen(engine, "connect", _sqlite_read_pragmas)
    elif read_only and parsed.get_backend_name() == "postgresql":
        event.listen(engine, "connect", _pg_read_only)
    if read_only:
        with engine.connect() as conn:
            check_current(conn)
    elif migrate:
        upgrade(engine)
    return engine


def _sqlite_read_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.close()


def new_session(engine: Engine) -> Session:
    return Session(engine, expire_on_commit=False)
