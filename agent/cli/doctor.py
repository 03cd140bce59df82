"""``edgeprof doctor`` (what this machine can measure) and ``edgeprof status`` (what the agent is doing):
looks that change nothing, the database opened read-only. On a terminal each line wraps to its width (a
long reason, a build's flags); ``--json`` and piped output keep whole lines."""

from __future__ import annotations

import json

import typer

from edgeprof.cli.common import (
    DbOption,
    DeviceOption,
    JsonOption,
    fit_text,
    open_db,
    sweep_of_device,
    terminal_width,
)


def doctor(as_json: JsonOption = False) -> None:
    """What this machine can measure: llama.cpp build and backends, GPU offload, device facts, collectors."""
    from edgeprof.device import gather, render

    info = gather()
    if as_json:
        typer.echo(json.dumps(info, indent=2, default=str))
    else:
        typer.echo(fit_text(render(info), terminal_width()))


def status(db: DbOption = None, as_json: JsonOption = False, device: DeviceOption = None) -> None:
    """What the agent is doing: current sweep, config i of N, ETA, last error, collectors."""
    from edgeprof.daemon import gather_status, render_status, status_json
    from edgeprof.storage.db import new_session

    engine = open_db(db, read_only=True)
    with new_session(engine) as session:
        if device is not None:
            sweep_of_device(session, None, device)  # one clear line for a device this DB never saw
        info = gather_status(session, device=device)
    typer.echo(status_json(info) if as_json else fit_text(render_status(info), terminal_width()))


def register(app: typer.Typer) -> None:
    app.command(epilog="Example: edgeprof doctor  ·  edgeprof doctor --json")(doctor)
    app.command(epilog="Example: edgeprof status  ·  watch -n 5 edgeprof status  ·  edgeprof status --json")(
        status
    )
