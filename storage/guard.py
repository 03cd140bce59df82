"""Checks before anything writes to a SQLite database, and one-line descriptions of storage errors.

A sweep must not start writing into a file that is not an edgeprof database (``status`` once added 13 tables
to someone's SQLite file and switched it to WAL), into a damaged one (``run`` once wrote into a DB failing
``integrity_check`` and exited 0), or into one it cannot write (a read-only or immutable file, found out only
at the first commit, mid-sweep). These checks read the file with a read-only connection and change nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from pathlib import Path

SQLITE_HEADER = b"SQLite format 3\x00"
RECOVER_HINT = (
    "restore it from a backup, or recover what is readable: "
    "sqlite3 {path} .recover | sqlite3 {path}.recovered, then use --db {path}.recovered"
)


class StorageGuardError(RuntimeError):
    """Why this database must not be written; one line, with what to do."""


def sqlite_path_of(db: str | Path | None, default: Path) -> Path | None:
    """The file behind ``--db`` (None for a non-SQLite URL), computed without creating anything."""
    if db is None:
        return default
    text = str(db)
    if "://" not in text:
        return Path(text).expanduser()
    for prefix in ("sqlite:///", "sqlite+pysqlite:///"):
        if text.startswith(prefix):
            rest = text[len(prefix) :].split("?", 1)[0]
            return Path(rest.removeprefix("file:")) if rest and rest != ":memory:" else None
    return None


def _read_only_connection(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)


def check_before_write(path: Path, *, integrity: bool = True) -> None:
    """Raise StorageGuardError unless ``path`` is absent or empty (a new DB) or a healthy, writable edgeprof
    DB.

    Call it before this process opens an engine on ``path``: it reads the header through a file descriptor,
    and closing one drops the process's POSIX locks on the file. With an engine already open, use
    ``check_open_engine``."""
    try:
        st = path.stat()
    except FileNotFoundError:
        if path.is_symlink():  # SQLite would create the database wherever the link points
            raise StorageGuardError(dangling_link(path)) from None
        return  # a new database: created by the engine
    except OSError as exc:
        raise StorageGuardError(f"database {path}: cannot stat ({exc.strerror})") from None
    if path.is_dir():
        raise StorageGuardError(f"database {path} is a folder, not a file")
    if st.st_size == 0:
        return
    try:
        with path.open("rb") as fh:
            header = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StorageGuardError(f"database {path}: cannot read ({exc.strerror})") from None
    if header != SQLITE_HEADER:
        raise StorageGuardError(f"{path} is not an SQLite database; nothing was changed (give another --db)")
    try:
        with contextlib.closing(_read_only_connection(path)) as conn:
            _refuse_foreign(path, conn)
            if integrity:
                rows = [r[0] for r in conn.execute("PRAGMA quick_check(5)")]
                if rows != ["ok"]:
                    raise StorageGuardError(
                        f"database {path} is damaged (quick_check: {quick_check_problem(rows)}); "
                        "nothing was written; " + RECOVER_HINT.format(path=path)
                    )
    except sqlite3.DatabaseError as exc:
        raise StorageGuardError(describe_sqlite_error(str(exc), path)) from None
    _check_writable(path)


def quick_check_problem(rows: list[str]) -> str:
    """quick_check's first finding on one line: its text holds newlines of its own ("*** in database main
    ***\nPage 5: ..."), and a refusal is one line."""
    return " ".join(str(rows[0]).split()) if rows else "no answer"


def dangling_link(path: Path) -> str:
    return f"--db {path} is a symbolic link to nothing; not followed (give the database file itself)"


def check_before_read(path: Path) -> None:
    """Raise StorageGuardError when ``path`` is an SQLite file of another application (or no SQLite file):
    a reading command says so in one line instead of "run db upgrade", and nothing in the file changes.

    Only SQLite reads the file (a read-only connection): a reader may already hold an engine on the same
    file (``compare --db-b`` of the same path), and a plain open+close of it would drop that engine's POSIX
    locks. No quick_check here: it reads the whole file, and ``watch edgeprof status`` on a large
    database must stay cheap; a read-only connection cannot damage the file further, and a damaged page is
    still one line where a reader meets it. A missing file is left to the opener ("no edgeprof database")."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    try:
        with contextlib.closing(_read_only_connection(path)) as conn:
            _refuse_foreign(path, conn)
    except sqlite3.OperationalError:
        return  # cannot be opened this way (a read-only folder): the opener says why
    except sqlite3.DatabaseError as exc:
        if "not a database" in str(exc):
            raise StorageGuardError(
                f"{path} is not an SQLite database; nothing was changed (give another --db)"
            ) from None
        raise StorageGuardError(describe_sqlite_error(str(exc), path)) from None


# edgeprof's mark in the SQLite header (``PRAGMA application_id``, bytes 68-71): "EdgP". A table name is no
# mark: other applications have a ``schema_version`` table too (Flyway's, or one shaped exactly like ours).
APPLICATION_ID = 0x45646750
# What edgeprof's first schema step created and recorded: how a database written before the mark existed is
# still known as edgeprof's (it gets the mark when a writer next opens it).
_FIRST_STEP_TABLES = frozenset({"build", "device", "model_file", "sweep", "run", "measurement"})
_FIRST_STEP = "core: device, build, model_file, sweep, run, measurement"


def foreign_reason(conn: sqlite3.Connection) -> str | None:
    """None when ``conn``'s database is edgeprof's (its mark, or nothing in it yet, or, written before the
    mark existed, edgeprof's own first step on record with its tables); otherwise what it is instead, for the
    one-line refusal. Reads only."""
    app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
    if app_id == APPLICATION_ID:
        return None
    if app_id != 0:
        return f"application_id {app_id:#x}"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    shown = "tables: " + ", ".join(sorted(tables)[:5]) + (", …" if len(tables) > 5 else "")
    if not tables:
        return None
    if "schema_version" not in tables:
        return shown
    try:
        rows = conn.execute("SELECT version, description FROM schema_version LIMIT 1000").fetchall()
    except sqlite3.DatabaseError:
        return shown
    return None if edgeprof_history(rows, tables) else shown


def edgeprof_history(rows: list[tuple[object, object]], tables: set[str]) -> bool:
    """Whether ``schema_version``'s (version, description) rows and the database's tables are edgeprof's
    own, for a database written before the mark existed (SQLite's application_id, PostgreSQL's
    ``edgeprof_meta`` row): its first step on record, with that step's tables, and every version a whole
    number (Flyway's ``'1.1'`` is not). Only a ``schema_version`` table with no row is an edgeprof create
    killed before its first step committed."""
    if not rows:
        return tables == {"schema_version"}
    versions_whole = all(type(v) is int for v, _ in rows)
    return versions_whole and (1, _FIRST_STEP) in rows and _FIRST_STEP_TABLES.issubset(tables)


def _refuse_foreign(path: Path, conn: sqlite3.Connection) -> None:
    reason = foreign_reason(conn)
    if reason is not None:
        raise StorageGuardError(
            f"{path} is an SQLite database but not an edgeprof one ({reason}); nothing was "
            "changed (give another --db)"
        )


def new_file_mode() -> int:
    """The mode of a database or cache edgeprof creates, whatever the umask: 0600, or 0640 when this runs
    as a systemd service (``INVOCATION_ID`` is set by systemd for every unit it starts). Both units in
    systemd/ run with ``Group=edgeprof``, whose members read the results; a user's own database is theirs
    alone."""
    return 0o640 if os.environ.get("INVOCATION_ID") else 0o600


def create_database_file(path: Path) -> None:
    """Create the empty file of a new SQLite database with ``new_file_mode()``, never through a link.

    SQLite would create it with 0644 under the usual umask, and gives its -wal and -shm files the mode of
    the database file, so creating that file first is what makes all three private. An existing file is
    left alone; a symbolic link to nothing is refused (SQLite would create its target)."""
    mode = new_file_mode()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, mode)
    except FileExistsError:
        if path.is_symlink() and not path.exists():
            raise StorageGuardError(dangling_link(path)) from None
        return
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _check_writable(path: Path) -> None:
    """access(2), never open(2)+close(2): closing any fd of a database file drops every POSIX lock this
    process holds on it, which breaks SQLite's locking for connections already open (the agent's)."""
    if not os.access(path, os.W_OK):
        err = _access_errno(path)
        what = "immutable" if err == errno.EPERM else "read-only"
        raise StorageGuardError(
            f"database {path} cannot be written ({what}: {os.strerror(err)}); nothing was run "
            "(make it writable, or give another --db)"
        )
    if not os.access(path.parent, os.W_OK):
        raise StorageGuardError(
            f"database {path}: its folder cannot be written (SQLite needs its -wal and -shm files there); "
            "nothing was run"
        )


def _access_errno(path: Path) -> int:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.access(str(path).encode(), os.W_OK) == 0:
        return 0
    return ctypes.get_errno() or errno.EACCES


def check_open_engine(engine: object, path: Path) -> None:
    """The per-sweep check of a long-running agent, through its own engine (no file opened beside it):
    ``PRAGMA quick_check`` and that the file and its folder can be written."""
    from sqlalchemy import Engine, text

    assert isinstance(engine, Engine)
    try:
        with engine.connect() as conn:
            rows = [r[0] for r in conn.execute(text("PRAGMA quick_check(5)"))]
    except Exception as exc:  # noqa: BLE001 - a damaged file may fail the pragma itself
        raise StorageGuardError(describe_sqlite_error(str(getattr(exc, "orig", None) or exc), path)) from None
    if rows != ["ok"]:
        raise StorageGuardError(
            f"database {path} is damaged (quick_check: {quick_check_problem(rows)}); nothing was "
            "written; " + RECOVER_HINT.format(path=path)
        )
    _check_writable(path)


def error_line(exc: BaseException) -> str:
    """The first line of what the driver said, for a one-line message.

    SQLAlchemy's own text can open with a line of its own (an autoflush note) before the driver's, so the
    driver's exception is preferred when there is one.
    """
    driver = getattr(exc, "orig", None)
    lines = str(driver if driver is not None else exc).strip().splitlines()
    for line in lines:
        if line.strip() and not line.lstrip().startswith("(raised as a result of"):
            return line.strip()
    return type(exc).__name__


def describe_sqlite_error(message: str, path: Path | str | None = None) -> str:
    """A storage error as one line that says what happened and what to do."""
    first = (message.strip().splitlines() or ["unknown database error"])[0]
    where = f"database {path}" if path else "the database"
    low = first.lower()
    if "malformed" in low or "not a database" in low:
        hint = RECOVER_HINT.format(path=path) if path else "restore a backup or recover it (sqlite3 .recover)"
        return f"{where} is damaged ({first}); {hint}"
    if "disk is full" in low or "no space" in low:
        return f"{where}: the disk is full ({first}); free space, then run the plan again to resume"
    if "readonly" in low or "read-only" in low:
        return f"{where} cannot be written ({first}); make it writable, or give another --db"
    if "unable to open" in low:
        return f"{where} cannot be opened ({first}); check the path and its folder's permissions"
    return f"{where}: {first}"
