"""``edgeprof metrics``: the agent's Prometheus metric set, once, to stdout or to a file for node_exporter's
textfile collector (a timer runs it; ``edgeprof agent --metrics-port`` serves the same set over HTTP)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from edgeprof.cli.common import DbOption, DeviceOption, fail, open_db, sqlite_file, sweep_of_device

TextfileOption = Annotated[
    Path | None,
    typer.Option(
        "--textfile",
        help="Write to this *.prom file (temp file + rename) instead of stdout, for node_exporter's textfile "
        "collector.",
    ),
]

EPILOG = (
    "Example: edgeprof metrics  ·  "
    "edgeprof metrics --textfile /var/lib/node_exporter/textfile_collector/edgeprof.prom"
)


def metrics(textfile: TextfileOption = None, db: DbOption = None, device: DeviceOption = None) -> None:
    """Prometheus metrics of the agent and of every finished config, read from the database now."""
    from edgeprof.daemon import metrics_text, write_textfile
    from edgeprof.storage.db import new_session

    protect = tuple(p for p in (sqlite_file(db),) if p is not None)
    if textfile is not None:
        _check_textfile(textfile, protect)  # before the database is opened
    engine = open_db(db, read_only=True)
    if device is not None:
        with new_session(engine) as session:
            sweep_of_device(session, None, device)  # one clear line for a device this DB never saw
    if textfile is None:
        typer.echo(metrics_text(engine, device).decode(), nl=False)
        return
    try:
        write_textfile(engine, textfile, device, protect)
    except OSError as exc:  # UnsafePath too: a symlinked or non-directory folder
        fail(f"--textfile {textfile}: {exc.strerror or exc}")


def _check_textfile(textfile: Path, protect: tuple[Path, ...]) -> None:
    from edgeprof.safefs import PROM, UnsafePath, check_output

    # node_exporter reads only *.prom files; the suffix also keeps a mistyped --textfile off the database
    if textfile.suffix != ".prom":
        fail(f"--textfile {textfile}: node_exporter's textfile collector reads only *.prom files")
    try:
        check_output(textfile, PROM, protect)
    except UnsafePath as exc:
        fail(f"--textfile {exc.strerror or exc}")


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(metrics)
