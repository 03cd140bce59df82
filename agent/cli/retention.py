"""``edgeprof db compact [--keep-raw 7d]``: downsample old raw telemetry (storage/retention.py)."""

from __future__ import annotations

from typing import Annotated, Any

import typer


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def run_compact(engine: Any, keep_raw_s: float, vacuum: bool, out: Any = None) -> str:
    """Compact, commit, optionally VACUUM (SQLite); returns the one-paragraph summary it printed."""
    from pathlib import Path

    from edgeprof.storage.db import new_session
    from edgeprof.storage.retention import compact

    with new_session(engine) as session:
        res = compact(session, keep_raw_s)
        session.commit()
    lines = [
        f"compacted {res.sweeps} sweep(s), {res.runs} run(s): {res.readings_before:,} raw readings in "
        f"{res.blocks_before} blocks -> {res.readings_after:,} 1 Hz readings in {res.blocks_after} blocks, "
        f"{res.phase_stats} per-phase aggregates; sample data {_mb(res.bytes_before)} -> "
        f"{_mb(res.bytes_after)} (freed {_mb(res.freed_bytes)})"
    ]
    url = engine.url
    if vacuum and url.get_backend_name() == "sqlite" and url.database and res.blocks_before:
        path = Path(url.database)
        before = path.stat().st_size
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.exec_driver_sql("VACUUM")
        after = path.stat().st_size
        freed = _mb(before - after)
        lines.append(f"database file {_mb(before)} -> {_mb(after)} after VACUUM (freed {freed})")
    text = "\n".join(lines)
    typer.echo(text, file=out)
    return text


DbOption = Annotated[
    str | None,
    typer.Option("--db", help="SQLite path or SQLAlchemy URL (default: $EDGEPROF_DB or the user data dir)."),
]


def register(db_app: typer.Typer) -> None:
    @db_app.command("compact", epilog="Example: edgeprof db compact --keep-raw 7d")
    def db_compact(
        db: DbOption = None,
        keep_raw: Annotated[
            str,
            typer.Option(
                "--keep-raw",
                help="Keep raw samples of sweeps newer than this (7d, 12h, 30m; 0 = compact every sweep).",
            ),
        ] = "7d",
        vacuum: Annotated[
            bool, typer.Option("--vacuum/--no-vacuum", help="Shrink the SQLite file afterwards.")
        ] = True,
    ) -> None:
        """Downsample raw telemetry older than --keep-raw to per-phase aggregates plus 1 Hz series
        (measurements, phases and verdicts untouched), and say how much it freed."""
        from edgeprof.cli.app import _guard_write, _open_engine, fail
        from edgeprof.storage.retention import parse_duration

        try:
            keep_s = parse_duration(keep_raw)
        except ValueError as exc:
            fail(str(exc))
        _guard_write(db)
        engine = _open_engine(db)
        run_compact(engine, keep_s, vacuum)
