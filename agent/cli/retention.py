"""``edgeprof db compact [--keep-raw 7d]``: downsample old raw telemetry (storage/retention.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from edgeprof.cli.common import DbOption, fail, guard_write, open_db

KeepRawOption = Annotated[
    str,
    typer.Option(
        "--keep-raw",
        help="Keep raw samples of sweeps newer than this (7d, 12h, 30m; 0 = compact every sweep).",
    ),
]
VacuumOption = Annotated[
    bool, typer.Option("--vacuum/--no-vacuum", help="Shrink the SQLite file afterwards.")
]


def db_compact(db: DbOption = None, keep_raw: KeepRawOption = "7d", vacuum: VacuumOption = True) -> None:
    """Downsample raw telemetry older than --keep-raw to per-phase aggregates plus 1 Hz series
    (measurements, phases and verdicts untouched), and say how much it freed."""
    from edgeprof.storage.retention import parse_duration, run_compact

    try:
        keep_s = parse_duration(keep_raw)
    except ValueError as exc:
        fail(str(exc))
    guard_write(db)
    engine = open_db(db)
    typer.echo(run_compact(engine, keep_s, vacuum))


def register(db_app: typer.Typer) -> None:
    db_app.command("compact", epilog="Example: edgeprof db compact --keep-raw 7d")(db_compact)
