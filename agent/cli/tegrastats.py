"""The ``import-tegrastats`` command, kept apart from the importer so that registering it costs nothing: the
importer (SQLAlchemy, numpy, the storage layer) is loaded only when the command runs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from edgeprof.cli.common import fail

LogArgument = Annotated[Path, typer.Argument(metavar="LOG", help="A log written by 'tegrastats --logfile'.")]
JsonLinesOption = Annotated[
    bool,
    typer.Option(
        "--json",
        help=(
            "Print one JSON object per line of the log: timestamp, ram, swap, cpus, emc, gpu, temps_c, "
            "temps_second_c, rails_mw, engines (null where the line does not say)."
        ),
    ),
]
StoreOption = Annotated[
    str | None, typer.Option("--db", help="Store the records as samples of a new sweep in this database.")
]


def import_tegrastats(log: LogArgument, as_json: JsonLinesOption = False, db: StoreOption = None) -> None:
    """Read a tegrastats log: summarise it, print it as JSON lines, or store it as samples."""
    from edgeprof.telemetry import TegrastatsImportError, import_log

    try:
        import_log(log, as_json, db, sys.stdout)
    except TegrastatsImportError as exc:
        fail(str(exc))


def register(app: typer.Typer) -> None:
    """Add ``import-tegrastats`` to ``app``; bad input is ``edgeprof: error: <msg>`` on stderr, exit 2."""
    app.command(
        "import-tegrastats",
        epilog=(
            "Example: edgeprof import-tegrastats tegrastats.log  ·  "
            "edgeprof import-tegrastats tegrastats.log --db night.db"
        ),
    )(import_tegrastats)
