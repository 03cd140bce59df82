"""The ``edgeprof`` command line: the Typer app, its command groups, and the console entry point.

Each command lives in the module of its group (run, report, models, doctor, agent, metrics, fleet,
retention, tegrastats, service) and maps its options onto one call below the CLI; this module only puts them
together, in the order ``edgeprof --help`` lists them. Every expected failure (bad plan, missing file,
unknown sweep) is one line on stderr and exit code 2 (edgeprof.cli.common).
"""

from __future__ import annotations

import sys
from typing import Annotated, NoReturn

import typer

from edgeprof.cli import (
    agent,
    bench,
    doctor,
    fleet,
    metrics,
    models,
    report,
    retention,
    run,
    service,
    tegrastats,
)
from edgeprof.cli.common import EXIT_BAD_INPUT, EXIT_INTERNAL_ERROR, EXIT_INTERRUPTED, App, fail

app = App(
    name="edgeprof",
    help="Measure how llama.cpp models really run on this device: quant x ctx x ngl sweeps in SQLite.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    epilog="Start with: edgeprof doctor, then edgeprof demo. Completion: edgeprof --install-completion.",
)
models_app = App(help="Model helpers (demo GGUF models).", no_args_is_help=True)
app.add_typer(models_app, name="models")
# Database maintenance: `db upgrade` / `db version` (cli/fleet.py), `db compact` (cli/retention.py).
db_app = App(help="Database maintenance: schema version, upgrade, compact.", no_args_is_help=True)
app.add_typer(db_app, name="db")


def _print_version(value: bool) -> None:
    if value:
        from edgeprof.version import version_text

        typer.echo(version_text())
        raise typer.Exit()


VersionOption = Annotated[
    bool,
    typer.Option(
        "--version",
        "-V",
        help="Show edgeprof's version, the llama.cpp build it uses, and exit.",
        callback=_print_version,
        is_eager=True,
    ),
]


def _set_device_name(value: str | None) -> str | None:
    if value is None:
        return None
    import os

    from edgeprof.device.facts import DEVICE_NAME_ENV, device_name_problem

    problem = device_name_problem(value)
    if problem is not None:
        fail(f"--device-name {value!r}: {problem}")
    # the environment, so that the sweep's children and the agent's sweeps name the device the same
    os.environ[DEVICE_NAME_ENV] = value.strip()
    return value


DeviceNameOption = Annotated[
    str | None,
    typer.Option(
        "--device-name",
        help="Name this device in the database instead of its hostname (or $EDGEPROF_DEVICE_NAME).",
        callback=_set_device_name,
        is_eager=True,
    ),
]


@app.callback()
def _main_options(version: VersionOption = False, device_name: DeviceNameOption = None) -> None:
    """Measure how llama.cpp models really run on this device: quant x ctx x ngl sweeps in SQLite."""
    if device_name is None:
        import os

        from edgeprof.device.facts import DEVICE_NAME_ENV, device_name_problem

        given = os.environ.get(DEVICE_NAME_ENV)
        problem = device_name_problem(given) if given is not None else None
        if problem is not None:
            fail(f"${DEVICE_NAME_ENV}: {problem}")


run.register_run(app)
report.register(app)  # report, compare, analyse
run.register_demo(app)
bench.register(app)  # bench, import-llama-bench
doctor.register(app)  # doctor, status
agent.register(app)
metrics.register(app)  # metrics (Prometheus text, or a file for node_exporter)
tegrastats.register(app)
service.register(app)
fleet.register(app, db_app)  # db version, db upgrade, sweeps, push, export, import
retention.register(db_app)  # db compact
models.register(models_app)


def _skip_final_collection() -> None:
    """After Ctrl-C everything is stored and committed; what is left is the interpreter's own teardown,
    whose final garbage collection of the sweep's objects costs about a second of CPU. On a loaded machine
    (load 10 on 2 cores) that second became 27-33 s between SIGINT and exit. Frozen objects are left to
    the kernel, which frees the whole process at once (stdout and stderr are still flushed)."""
    import gc

    gc.freeze()


def _internal_error(exc: Exception) -> NoReturn:
    """A fault of edgeprof's own: one line that says so, and the traceback only where asked for, so that a
    user's terminal or journal reads like every other error (what was stored before it stays stored)."""
    import os

    if os.environ.get("EDGEPROF_DEBUG"):
        raise exc
    from edgeprof.safetext import safe_text

    typer.echo(
        f"edgeprof: internal error: {type(exc).__name__}: {safe_text(str(exc))} "
        "(a bug in edgeprof; EDGEPROF_DEBUG=1 shows the traceback)",
        err=True,
    )
    sys.exit(EXIT_INTERNAL_ERROR)


def main() -> None:
    """Console entry point: Typer, with expected failures kept to one line and no traceback."""
    from edgeprof.safetext import install_warning_sanitiser

    install_warning_sanitiser()
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("edgeprof: interrupted", err=True)
        _skip_final_collection()
        sys.exit(EXIT_INTERRUPTED)
    except SystemExit as exc:
        if exc.code == EXIT_INTERRUPTED:
            _skip_final_collection()
        raise
    except Exception as exc:  # noqa: BLE001 - the last resort: no exception reaches the user as a traceback
        # A damaged, full or read-only database found mid-command: one line and what to do, no traceback.
        # (SQLAlchemy is looked up only now: importing it up front would cost every `--help` its start-up.)
        sa_exc = sys.modules.get("sqlalchemy.exc")
        if sa_exc is None or not isinstance(exc, sa_exc.DBAPIError):
            _internal_error(exc)
        from edgeprof.storage.guard import describe_sqlite_error

        typer.echo(f"edgeprof: error: {describe_sqlite_error(str(exc.orig or exc))}", err=True)
        sys.exit(EXIT_BAD_INPUT)


if __name__ == "__main__":
    main()
