"""Engine and session setup: SQLite in WAL mode by default, any SQLAlchemy URL otherwise."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session

import edgeprof.storage.task_models  # noqa: F401 - registers the task tables on the models' metadata
from edgeprof.storage.guard import StorageGuardError, check_before_read, create_database_file
from edgeprof.storage.migrations import check_current, refuse_foreign, upgrade
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


def _split_authority(text: str) -> tuple[str, str, str] | None:
    """(``scheme://``, user info, the rest from the host on) of a URL; None without a user info part.

    The user info ends at the *last* ``@`` before the path: a password with an unencoded ``@`` is still
    all of it (SQLAlchemy's parser takes the first, and printed the password's tail as the host)."""
    scheme, sep, rest = text.partition("://")
    if not sep:
        return None
    end = len(rest)
    for stop in "/?#":
        where = rest.find(stop, rest.rfind("@") + 1 if "@" in rest else 0)
        if where != -1:
            end = min(end, where)
    authority = rest[:end]
    if "@" not in authority:
        return None
    userinfo, _, host = authority.rpartition("@")
    return scheme + sep, userinfo, host + rest[end:]


def _key_pattern(name: str) -> str:
    """A parameter name as a pattern that also matches it percent-encoded, letter by letter: libpq decodes
    a URL's query, so ``?%70assword=pw`` is a password."""
    return "".join(
        f"(?:{re.escape(ch)}|%{ord(ch.lower()):02x}|%{ord(ch.upper()):02x})" for ch in name
    )  # letters in either case, hex digits too: the pattern is compiled case-insensitive


# libpq's secret parameters, in a URL's query (``?password=...``) or a conninfo string (``password=...``): a
# quoted value (a backslash escapes a quote inside) or one word up to the next separator.
_SECRET_PARAM = re.compile(
    r"(?i)(?<![A-Za-z0-9_%])((?:"
    + _key_pattern("ssl")
    + ")?"
    + _key_pattern("password")
    + "|"
    + _key_pattern("passfile")
    + r")(\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&;#]*)"
)

# Every PostgreSQL connection has a deadline: a server that accepts TCP and never answers (a wedged host,
# a firewall that drops) once held `report`, `sweeps` and `push` past 90 s. libpq's connect_timeout bounds
# the connection (psycopg applies it to each address it tries), TCP keepalives a connection that goes
# silent later, and the server's statement_timeout any one statement. A URL's own value of a parameter is
# kept (``?connect_timeout=30``).
PG_CONNECT_TIMEOUT_S = 5
PG_STATEMENT_TIMEOUT_MS = 300_000
PG_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}


# A libpq "key=value key=value" connection string, which would otherwise be taken for a file name.
_CONNINFO = re.compile(
    r"\s*(host|hostaddr|port|dbname|user|password|passfile|sslmode|service|connect_timeout)\s*=",
    re.IGNORECASE,
)


def _mask_params(text: str) -> str:
    return _SECRET_PARAM.sub(lambda m: f"{m.group(1)}{m.group(2)}***" if m.group(3) else m.group(0), text)


def mask_url(url: str | Path | None) -> str:
    """``url`` fit to print: the password, if any, replaced by ``***`` (a path is returned as it is), and
    the value of every ``password=``, ``sslpassword=`` and ``passfile=`` parameter too (a URL's query or a
    libpq conninfo string such as ``host=h password=pw``).

    Masked by splitting the text itself, not by a URL parser: no malformed URL (a bracket not closed, a
    port that is no number, an unencoded ``@``) can make any part of the password show."""
    text = str(url) if url is not None else _default_url() or "(default)"
    parts = _split_authority(text)
    if parts is not None:
        scheme, userinfo, rest = parts
        user, colon, _password = userinfo.partition(":")
        text = f"{scheme}{user}{':***' if colon else ''}@{rest}"
    return _mask_params(text)


def _default_url() -> str | None:
    """``$EDGEPROF_DB`` when it is a URL (what ``--db`` left out means), else None."""
    env = os.environ.get("EDGEPROF_DB") or ""
    return env if "://" in env else None


def _secrets(url: str) -> list[str]:
    """Every secret ``url`` holds: the userinfo password and the values of its secret parameters."""
    found = [m.group(3).strip("'") for m in _SECRET_PARAM.finditer(url) if m.group(3).strip("'")]
    parts = _split_authority(url)
    if parts is not None:
        _user, colon, password = parts[1].partition(":")
        if colon and password:
            found.append(password)
    return found


def scrub(message: str, url: str | Path | None) -> str:
    """``message`` without the secrets of ``url`` (drivers may echo the connection string), and with any
    secret parameter it quotes masked."""
    from urllib.parse import unquote

    for secret in sorted(set(_secrets(str(url or _default_url() or ""))), key=len, reverse=True):
        for form in {secret, unquote(secret)}:
            if len(form) >= 1:
                message = message.replace(form, "***")
    return _mask_params(message)


def parse_db_url(url: str, given: str | Path | None = None) -> URL:
    """The SQLAlchemy URL of ``url``; DatabaseError (one line, password masked) when it is not one. The
    message shows ``given`` (what the user typed, before ``db_url`` added a driver) when there is one."""
    shown = mask_url(given if given is not None and "://" in str(given) else url)
    parts = _split_authority(url)
    if parts is not None and "@" in parts[1]:
        raise DatabaseError(
            f"{shown}: the password contains an unencoded '@'; write it as %40 (percent-encode "
            "the password: urllib.parse.quote(password, safe=''))"
        )
    try:
        parsed = make_url(url)
        port = parsed.port
    except (ArgumentError, ValueError):
        raise DatabaseError(
            f"not a database path or URL: {shown} (its host or port cannot be read; an IPv6 host "
            "is written [::1]:5432)"
        ) from None
    if port is not None and not 1 <= port <= 65535:
        raise DatabaseError(f"{shown}: port {port} is not between 1 and 65535")
    return parsed


def db_url(db: str | Path | None, *, create_dir: bool = True) -> str:
    """Turn a path (or None for the default) into a URL; a value containing ``://`` is taken as a URL."""
    if db is None:
        # a URL in $EDGEPROF_DB is a URL (a Path would fold its '//' and print its password as a file name)
        db = _default_url() or default_db_path()
    text = str(db)
    if "://" not in text and _CONNINFO.match(text):
        raise DatabaseError(
            f"--db {mask_url(text)} is a libpq connection string, not a path; give a postgresql:// URL "
            "(postgresql://user@host:5432/dbname, the password in ~/.pgpass or PGPASSWORD)"
        )
    if text.lower().startswith("sqlite:") and any(ch in text for ch in "?#"):
        # sqlite:///x.db?mode=ro&uri=true was opened as a file named 'x.db?mode=ro' and written to
        raise DatabaseError(
            f"{mask_url(text)}: an sqlite URL with a query or fragment is not supported (it would open "
            "another file); give the database's path"
        )
    if "://" in text:
        for scheme in _PG_SCHEMES:
            if text.startswith(scheme):
                return "postgresql+psycopg://" + text[len(scheme) :]
        return text
    if any(ch in text for ch in "?#%"):
        # sqlite:///PATH is a URL: '?' starts its query, '#' a fragment, '%41' is 'A'; "c#1.db" opened "c"
        raise DatabaseError(
            f"--db {mask_url(text)}: a file name with '?', '#' or '%' would open another file; rename it"
        )
    path = Path(text).expanduser()
    if create_dir:
        path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def pg_connect_args(parsed: URL) -> dict[str, Any]:
    """The deadlines of a PostgreSQL connection (see ``PG_CONNECT_TIMEOUT_S``), less those the URL sets."""
    given = {key.lower() for key in parsed.query}
    args: dict[str, Any] = {} if "connect_timeout" in given else {"connect_timeout": PG_CONNECT_TIMEOUT_S}
    args.update({key: value for key, value in PG_KEEPALIVES.items() if key not in given})
    statement = f"-c statement_timeout={PG_STATEMENT_TIMEOUT_MS}"
    options = parsed.query.get("options")
    if options is None:
        args["options"] = statement
    elif "statement_timeout" not in str(options):
        args["options"] = f"{options if isinstance(options, str) else ' '.join(options)} {statement}"
    return args


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
    than this edgeprof they raise ``SchemaOutdatedError`` ("run `edgeprof db upgrade`"), unless
    ``migrate=False`` (``db version``, which says itself what is missing). A new SQLite file is created
    private (storage/guard.py create_database_file). Errors opening the DB are ``DatabaseError`` with the
    password masked.
    """
    url = db_url(db, create_dir=not read_only)
    parsed = parse_db_url(url, db)
    is_sqlite = parsed.get_backend_name() == "sqlite"
    connect_args: dict[str, Any] = {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000} if is_sqlite else {}
    if parsed.get_backend_name() == "postgresql":
        connect_args = pg_connect_args(parsed)
    if is_sqlite and parsed.database not in (None, "", ":memory:"):
        try:  # every command, before any pragma or write: a database that is not edgeprof's stays as it is
            check_before_read(Path(parsed.database or ""))
        except StorageGuardError as exc:
            raise DatabaseError(str(exc)) from None
    if is_sqlite and read_only:
        path = Path(parsed.database or "")
        if not path.is_file():
            raise DatabaseError(f"no edgeprof database at {path}")
        # mode=ro: SQLite itself refuses writes; it also opens a file the user may only read. Where no -shm
        # file can be made beside it (a read-only folder), WAL reading needs immutable=1 (SQLite docs, WAL).
        immutable = not os.access(path, os.W_OK) and not os.access(path.parent, os.W_OK)
        url = f"sqlite:///file:{path}?mode=ro{'&immutable=1' if immutable else ''}&uri=true"
    elif is_sqlite and parsed.database not in (None, "", ":memory:") and not parsed.query.get("uri"):
        try:
            create_database_file(Path(parsed.database or ""))
        except StorageGuardError as exc:
            raise DatabaseError(str(exc)) from None
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
    if read_only and migrate:  # migrate=False for a reader: `db version`, which reports what is missing
        with engine.connect() as conn:
            check_current(conn)
    elif read_only and not is_sqlite:  # `db version` too never reads another application's database
        with engine.connect() as conn:
            refuse_foreign(conn)
    elif migrate and not read_only:
        upgrade(engine)
    return engine


def _sqlite_read_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.close()


def new_session(engine: Engine) -> Session:
    return Session(engine, expire_on_commit=False)
