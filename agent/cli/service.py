"""``edgeprof service install``: the systemd units of this installation (its steps: edgeprof.daemon)."""

from __future__ import annotations

import subprocess
from typing import Annotated

import typer

from edgeprof.cli.common import App, fail

service_app = App(help="Run edgeprof as a systemd service (always-on agent or nightly timer).")

TimerOption = Annotated[
    bool,
    typer.Option("--timer", help="Nightly timer (01:00, stops by 07:00) instead of the always-on agent."),
]
StartOption = Annotated[bool, typer.Option("--start", help="Also start it now.")]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Print every step instead of doing it (no root needed).")
]


@service_app.command(
    "install",
    epilog="Example: sudo edgeprof service install --start  ·  edgeprof service install --timer --dry-run",
)
def install(timer: TimerOption = False, start: StartOption = False, dry_run: DryRunOption = False) -> None:
    """Install the systemd units for this installation: a service user, the queue folder, the units."""
    from edgeprof.daemon import install_command

    try:
        cmd = install_command(timer=timer, start=start, dry_run=dry_run)
    except FileNotFoundError as exc:
        fail(str(exc))
    raise typer.Exit(subprocess.call(cmd))


def register(app: typer.Typer) -> None:
    app.add_typer(service_app, name="service")
