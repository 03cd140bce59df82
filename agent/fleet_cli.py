"""Fleet commands (issue 13): ``db upgrade`` / ``db version``, ``sweeps``, ``push``, ``export``, ``import``.

Registered onto the main Typer app by ``edgeprof.cli``. Reading commands open the DB read-only (never
migrate, never write); ``db upgrade``, ``push`` and ``import`` are the writers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

DbOption = Annotated[
    str | None,
    typer.Option("--db", help="SQLite path or SQLAlchemy URL (default: $EDGEPROF_DB or the user data dir)."),
]


def _fail(message: str) -> Any:
    from edgeprof.cli import fail

    fail(message)


def _engine(db: str | None, *, read_only: bool = False, migrate: bool = True) -> Any:
    """``open_engine`` with every expected failure as one line (password masked), exit 2."""
    from sqlalchemy.exc import SQLAlchemyError

    from edgeprof.storage.db import DatabaseError, mask_url, open_engine, scrub
    from edgeprof.storage.migrations import SchemaOutdatedError, SchemaTooNewError

    try:
        return open_engine(db, read_only=read_only, migrate=migrate)
    except DatabaseError as exc:
        _fail(scrub(str(exc), db))
    except (SchemaTooNewError, SchemaOutdatedError) as exc:
        _fail(f"{mask_url(db)}: {scrub(str(exc), db)}")
    except (SQLAlchemyError, OSError) as exc:
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__]
        _fail(f"cannot open database {mask_url(db)}: {scrub(first[0], db)}")


def db_version(
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """The schema version of the database and what this edgeprof would apply (changes nothing)."""
    from edgeprof.storage.db import mask_url
    from edgeprof.storage.migrations import (
        HEAD_VERSION,
        SchemaTooNewError,
        applied_versions,
        missing_versions,
    )

    if not _exists(db):
        _fail(f"no edgeprof database at {mask_url(db)}")
    engine = _engine(db, migrate=False)
    with engine.connect() as conn:
        applied = sorted(applied_versions(conn))
        try:
            missing = missing_versions(conn)
        except SchemaTooNewError as exc:
            _fail(str(exc))
    info = {
        "database": mask_url(db),
        "version": max(applied) if applied else 0,
        "applied": applied,
        "missing": missing,
        "code_head": HEAD_VERSION,
    }
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    state = "up to date"
    if missing:
        state = f"missing {', '.join(map(str, missing))}: run `edgeprof db upgrade`"
    typer.echo(f"schema version {info['version']} (this edgeprof: {HEAD_VERSION}); {state}")


def _exists(db: str | None) -> bool:
    """A URL is assumed to exist (the server says otherwise); a SQLite path must be a file."""
    from edgeprof.storage.db import db_url

    url = db_url(db, create_dir=False)
    return not url.startswith("sqlite:///") or Path(url.removeprefix("sqlite:///")).is_file()


def db_upgrade(db: DbOption = None) -> None:
    """Apply the schema steps this database lacks (each in one transaction; safe to interrupt and rerun)."""
    from edgeprof.storage.db import mask_url
    from edgeprof.storage.migrations import SchemaTooNewError, current_version, upgrade

    engine = _engine(db, migrate=False)
    try:
        applied = upgrade(engine)
    except SchemaTooNewError as exc:
        _fail(str(exc))
    with engine.connect() as conn:
        version = current_version(conn)
    what = f"applied {', '.join(map(str, applied))}" if applied else "already up to date"
    typer.echo(f"{mask_url(db)}: schema version {version} ({what})")


def register(app: typer.Typer, db_app: typer.Typer) -> None:
    db_app.command("version")(db_version)
    db_app.command("upgrade")(db_upgrade)
