"""The ``edgeprof`` command line.

Every expected failure (bad plan, missing file, unknown sweep) is one line on stderr and exit code 2; a run
that fails inside llama.cpp is data, stored and reported, not an error of the command.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from edgeprof import __version__

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

app = typer.Typer(
    name="edgeprof",
    help="Measure how llama.cpp models really run on this device: quant x ctx x ngl sweeps in SQLite.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    epilog="Start with: edgeprof doctor, then edgeprof demo. Completion: edgeprof --install-completion.",
)
models_app = typer.Typer(help="Model helpers (demo GGUF models).", no_args_is_help=True)
app.add_typer(models_app, name="models")
# Database maintenance: `db upgrade` / `db version` (agent/cli/fleet.py), and more subcommands beside them.
db_app = typer.Typer(help="Database maintenance: schema version, upgrade.", no_args_is_help=True)
app.add_typer(db_app, name="db")


def _print_version(value: bool) -> None:
    if value:
        from edgeprof.version import version_text

        typer.echo(version_text())
        raise typer.Exit()


@app.callback()
def _main_options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            help="Show edgeprof's version, the llama.cpp build it uses, and exit.",
            callback=_print_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
    """Measure how llama.cpp models really run on this device: quant x ctx x ngl sweeps in SQLite."""

DbOption = Annotated[
    str | None,
    typer.Option("--db", help="SQLite path or SQLAlchemy URL (default: $EDGEPROF_DB or the user data dir)."),
]
DeviceOption = Annotated[
    str | None,
    typer.Option("--device", help="Only this device's sweeps: hostname, board model or uid prefix."),
]


def _sweep_of_device(session: Any, sweep: int | None, device: str) -> int:
    """``--device``: the device's latest sweep, or check that the given one is that device's (issue 13)."""
    from edgeprof.fleet.sweeps import check_sweep_device, latest_sweep_of

    if sweep is None:
        found = latest_sweep_of(session, device)
        if found is None:
            fail(f"no sweeps of a device called {device!r} in this database (see `edgeprof sweeps`)")
        return found
    if not check_sweep_device(session, sweep, device):
        fail(f"sweep {sweep} is not a sweep of device {device!r} (see `edgeprof sweeps --device`)")
    return sweep


class ReportFormat(str, Enum):
    table = "table"
    md = "md"
    csv = "csv"
    json = "json"


class DemoSizeChoice(str, Enum):
    tiny = "tiny"
    small = "small"


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    typer.echo(f"edgeprof: error: {message}", err=True)
    raise typer.Exit(code)


def data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "edgeprof"


@contextlib.contextmanager
def quiet_native_stderr() -> Iterator[Path]:
    """Send what native code (llama.cpp) prints on fd 2 to a file, so the terminal shows our lines only."""
    log = tempfile.NamedTemporaryFile(prefix="edgeprof-native-", suffix=".log", delete=False)  # noqa: SIM115
    saved = os.dup(2)
    try:
        sys.stderr.flush()
        os.dup2(log.fileno(), 2)
        yield Path(log.name)
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        log.close()


def _guard_write(db: str | None) -> None:
    """Before a command writes: refuse a non-edgeprof, damaged or unwritable SQLite file (issue 11)."""
    from edgeprof.storage.db import default_db_path
    from edgeprof.storage.guard import StorageGuardError, check_before_write, sqlite_path_of

    path = sqlite_path_of(db, default_db_path())
    if path is None:
        return
    try:
        check_before_write(path)
    except StorageGuardError as exc:
        fail(str(exc))


def _open_engine(db: str | None, *, read_only: bool = False, migrate: bool = True) -> Any:
    """Writers migrate to the head; readers (read_only) never migrate or write (issue 13). Every expected
    failure is one line (password masked), exit 2."""
    from sqlalchemy.exc import SQLAlchemyError

    from edgeprof.storage.db import DatabaseError, mask_url, open_engine, scrub
    from edgeprof.storage.migrations import SchemaOutdatedError, SchemaTooNewError

    try:
        return open_engine(db, read_only=read_only, migrate=migrate)
    except DatabaseError as exc:
        fail(scrub(str(exc), db))
    except (SchemaTooNewError, SchemaOutdatedError) as exc:
        fail(f"{mask_url(db)}: {scrub(str(exc), db)}")
    except (SQLAlchemyError, OSError) as exc:
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__]
        if "malformed" in first[0] or "not a database" in first[0]:  # issue 11: say how to recover
            from edgeprof.storage.guard import describe_sqlite_error

            fail(describe_sqlite_error(scrub(first[0], db), mask_url(db)))
        fail(f"cannot open database {mask_url(db)}: {scrub(first[0], db)}")


@app.command(
    epilog=(
        "Example: edgeprof run plan.toml --check   (validate, list configs)  ·  "
        "edgeprof run plan.toml --db results.db"
    )
)
def run(
    plan: Annotated[Path, typer.Argument(help="The TOML plan to run.")],
    db: DbOption = None,
    new: Annotated[
        bool, typer.Option("--new", help="Start a new sweep instead of resuming this plan's.")
    ] = False,
    retry_failed: Annotated[
        bool, typer.Option("--retry-failed", help="Run again the configs that failed last time.")
    ] = False,
    check: Annotated[
        bool, typer.Option("--check", help="Validate the plan and list the configs; run nothing.")
    ] = False,
    no_telemetry: Annotated[
        bool,
        typer.Option(
            "--no-telemetry", help="No sampling of temperature, clocks, power; no cooldown or idle."
        ),
    ] = False,
    wait: Annotated[
        bool, typer.Option("--wait", help="If another process runs this plan, wait for it instead of exit 2.")
    ] = False,
) -> None:
    """Run a plan's sweep; run it again to resume (finished configs are skipped)."""
    from edgeprof.plan.parse import PlanError, load_plan

    try:
        parsed = load_plan(plan)
    except PlanError as exc:
        lines = exc.lines()
        for line in lines:
            typer.echo(f"edgeprof: error: {line}", err=True)
        if len(lines) > 1:
            typer.echo(f"edgeprof: {len(lines)} problems in the plan; nothing was run", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    if check:
        typer.echo(f"plan {parsed.name!r} is valid: {parsed.n_specs()} configs")
        # issue 10: per-model workloads make the count differ per model; say so, model by model
        for label, n in parsed.specs_per_model().items():
            typer.echo(f"  {label}: {n} configs")
        return
    _guard_write(db)
    engine = _open_engine(db)
    _run_plan(engine, parsed, new=new, retry_failed=retry_failed, telemetry=not no_telemetry, wait=wait)


def _run_plan(
    engine: Any, parsed: Any, *, new: bool, retry_failed: bool, telemetry: bool = True, wait: bool = False
) -> int:
    from edgeprof.gguf.bandwidth import probe_bandwidth
    from edgeprof.sweep import LeaseHeld, SweepAborted, Telemetry, run_plan

    def make_telemetry(sweep_id: int) -> Telemetry:
        return Telemetry(engine, sweep_id, parsed.collect, parsed.cooldown)

    typer.echo(f"edgeprof {__version__}: plan {parsed.name!r}, {parsed.n_specs()} configs")
    try:
        outcome = run_plan(
            engine,
            parsed,
            new_sweep=new,
            retry_failed=retry_failed,
            telemetry=make_telemetry if telemetry else None,
            wait=wait,
            on_wait=lambda holder: typer.echo(f"edgeprof: waiting: plan held by {holder}", err=True),
            bandwidth_probe=probe_bandwidth,  # issue 9: once per sweep, for the report's BW %
        )
    except LeaseHeld as exc:
        fail(f"plan {parsed.source}: {exc} (wait for it with --wait, or stop it)")
    except SweepAborted as exc:
        fail(str(exc))
    summary = ", ".join(f"{n} {status}" for status, n in sorted(outcome.counts.items())) or "nothing to do"
    typer.echo(f"sweep {outcome.sweep_id}: {summary}")
    if outcome.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    return outcome.sweep_id


@app.command(
    epilog=(
        "Example: edgeprof report  ·  "
        "edgeprof report --sweep 3 --format md  ·  "
        "edgeprof report --html morning.html"
    )
)
def report(
    db: DbOption = None,
    sweep: Annotated[int | None, typer.Option("--sweep", help="Sweep id (default: the latest).")] = None,
    fmt: Annotated[ReportFormat, typer.Option("--format", "-f", help="Output format.")] = ReportFormat.table,
    html: Annotated[
        Path | None,
        typer.Option("--html", help="Also write one self-contained HTML report (plots embedded)."),
    ] = None,
    device: DeviceOption = None,
    wide: Annotated[
        bool, typer.Option("--wide", help="Every column that has data, however wide the terminal.")
    ] = False,
    columns: Annotated[
        str | None,
        typer.Option(
            "--columns",
            help="Only these table columns, e.g. model,quant,ctx,tg,ttft,kld (a wrong name lists them).",
        ),
    ] = None,
) -> None:
    """One row per config: cold start apart from steady state, quality beside speed, verdicts.

    On a terminal the table fits its width: columns with no data are left out, columns with one value in
    every row are said once above it, and the least telling columns are left out (and named) when needed."""
    from edgeprof.report.rows import (
        RENDERERS,
        ColumnError,
        ReportError,
        build_rows,
        latest_sweep_id,
        parse_columns,
        render_table,
    )
    from edgeprof.storage.db import new_session

    try:
        picked = parse_columns(columns) if columns is not None else None
    except ColumnError as exc:
        fail(str(exc))

    engine = _open_engine(db, read_only=True)
    with new_session(engine) as session:
        if device is not None:
            sweep = _sweep_of_device(session, sweep, device)
        try:
            rows = build_rows(session, sweep, include_serving=True)
            if html is not None:
                from edgeprof.report.html import write_html

                sweep_id = sweep if sweep is not None else latest_sweep_id(session)
                assert sweep_id is not None  # build_rows raised otherwise
                from edgeprof.storage.db import default_db_path
                from edgeprof.storage.guard import sqlite_path_of

                db_file = sqlite_path_of(db, default_db_path())
                write_html(session, sweep_id, html, protect=(db_file,) if db_file else ())
        except ReportError as exc:
            fail(str(exc))
        except OSError as exc:
            fail(f"cannot write {html}: {exc.strerror or exc}")
    if html is not None:
        typer.echo(f"HTML report written to {html}", err=True)
    if fmt is ReportFormat.table:
        import shutil

        # A terminal's own width; piped (a file, a pager) only when COLUMNS says so.
        width = (
            shutil.get_terminal_size().columns
            if sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit()
            else None
        )
        typer.echo(render_table(rows, width=width, columns=picked, wide=wide))
    else:
        typer.echo(RENDERERS[fmt.value](rows))


class CompareFormat(str, Enum):
    table = "table"
    md = "md"
    json = "json"


@app.command(
    epilog=(
        "Example: edgeprof compare 3 5   (sweep 5 against sweep 3: B/A per matching config)"
    )
)
def compare(
    a: Annotated[int | None, typer.Argument(help="Sweep id A (the baseline).")] = None,
    b: Annotated[int | None, typer.Argument(help="Sweep id B (another device, build or power mode).")] = None,
    db: DbOption = None,
    fmt: Annotated[
        CompareFormat, typer.Option("--format", "-f", help="Output format.")
    ] = CompareFormat.table,
    db_b: Annotated[
        str | None, typer.Option("--db-b", help="Sweep B is in this other database (path or URL).")
    ] = None,
    device: Annotated[
        list[str] | None,
        typer.Option(
            "--device",
            help="A missing sweep id is this device's latest sweep (give it twice: A's device, then B's).",
        ),
    ] = None,
) -> None:
    """Per matching config of two sweeps: ratio of medians (B/A), 'within noise' where ranges overlap."""
    from edgeprof.report.compare import compare_sweeps, render_compare
    from edgeprof.report.rows import ReportError
    from edgeprof.storage.db import new_session

    devices = list(device or [])
    engine = _open_engine(db, read_only=True)
    engine_b = _open_engine(db_b, read_only=True) if db_b is not None else engine
    with new_session(engine) as session, new_session(engine_b) as session_b:
        ids: list[int] = []
        for sid, where in ((a, session), (b, session_b)):
            if sid is None:
                if not devices:
                    fail("give two sweep ids, or --device NAME for each one missing")
                sid = _sweep_of_device(where, None, devices.pop(0))
            ids.append(sid)
        if devices:
            fail("too many --device options for the sweep ids given")
        try:
            rows = compare_sweeps(session, ids[0], ids[1], session_b=session_b)
        except ReportError as exc:
            fail(str(exc))
    typer.echo(render_compare(rows, fmt.value))


@app.command(epilog="Example: edgeprof analyse --sweep 3")
def analyse(
    db: DbOption = None,
    sweep: Annotated[int | None, typer.Option("--sweep", help="Sweep id (default: the latest).")] = None,
) -> None:
    """(Re)compute throttle and stability verdicts of a stored sweep from its telemetry."""
    from edgeprof.report.rows import latest_sweep_id
    from edgeprof.storage.db import default_db_path, new_session
    from edgeprof.storage.guard import sqlite_path_of
    from edgeprof.storage.models import Sweep
    from edgeprof.verdicts.judge import analyse_sweep, summary_line

    path = sqlite_path_of(db, default_db_path())
    if path is not None and not path.is_file():  # it writes verdicts, but never creates a database
        fail(f"no edgeprof database at {path}")
    engine = _open_engine(db)
    with new_session(engine) as session:
        sweep_id = sweep if sweep is not None else latest_sweep_id(session)
        if sweep_id is None or session.get(Sweep, sweep_id) is None:
            fail(f"no sweep {sweep_id if sweep_id is not None else ''} in this database".replace("  ", " "))
        results = analyse_sweep(session, sweep_id)
        for run_id, verdicts in results.items():
            typer.echo(f"run {run_id}: " + "; ".join(summary_line(v) for v in verdicts))


@models_app.command("demo", epilog="Example: edgeprof models demo --size tiny --out ./models")
def models_demo(
    out: Annotated[Path | None, typer.Option("--out", help="Folder for the GGUF files.")] = None,
    size: Annotated[DemoSizeChoice, typer.Option("--size", help="tiny (tests) or small (~29 M params).")] = (
        DemoSizeChoice.small
    ),
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if the files exist.")] = False,
) -> None:
    """Write a llama-architecture GGUF (F16) and quantize it to Q8_0, Q5_K_M and Q4_K_M."""
    paths = _build_demo(out or data_dir() / "models", size.value, force)
    for quant, path in paths.items():
        typer.echo(f"{quant:7s} {path}")


def _build_demo(out: Path, size: str, force: bool) -> dict[str, Path]:
    from edgeprof.gguf.demo import build_demo_models

    try:
        with quiet_native_stderr() as log:
            paths = build_demo_models(out, size, force=force)
    except (RuntimeError, OSError) as exc:
        tail = log.read_text(errors="replace")[-800:] if log.exists() else ""
        fail(f"building demo models failed: {exc}" + (f"\n{tail}" if tail else ""))
    finally:
        with contextlib.suppress(OSError, UnboundLocalError):
            log.unlink()
    return paths


DEMO_PLAN = """\
# The built-in demo: three quantizations of the same model at two context sizes.
name = "demo-{size}"

[matrix]
models = [
  {{ path = "{q8}", label = "demo-q8_0" }},
  {{ path = "{q5}", label = "demo-q5_k_m" }},
  {{ path = "{q4}", label = "demo-q4_k_m" }},
]
ctx = [512, 2048]
ngl = [0]
threads = [{threads}]

[[workload]]
name = "explain-edge"
prompt_tokens = 128
n_predict = 64

# KL divergence and same top token vs the reference (Q8_0, the most bits per weight here) over edgeprof's
# default text; a small ctx and 4 chunks keep the demo about a minute on 2 cores (a real check: ctx 512).
[[workload]]
name = "kld"
kind = "quality"
ctx = 128
chunks = 4

[repeat]
cold = 1
warmup = 1
steady = 5

[run]
timeout_s = 120
"""


@app.command(
    epilog=(
        "Example: edgeprof demo   (about a minute on 2 cores)  ·  "
        "edgeprof demo --size tiny"
    )
)
def demo(
    db: DbOption = None,
    size: Annotated[DemoSizeChoice, typer.Option("--size", help="Demo model size.")] = DemoSizeChoice.small,
    models_dir: Annotated[
        Path | None, typer.Option("--models-dir", help="Where the demo GGUFs live.")
    ] = None,
) -> None:
    """Build the demo models if missing, sweep Q8_0/Q5_K_M/Q4_K_M x two ctx sizes, print the report."""
    from edgeprof.plan.parse import PlanError, default_threads, parse_plan
    from edgeprof.report.rows import build_rows, render_table
    from edgeprof.storage.db import new_session

    out = models_dir or data_dir() / "models"
    paths = _build_demo(out, size.value, force=False)
    text = DEMO_PLAN.format(
        size=size.value, q8=paths["Q8_0"], q5=paths["Q5_K_M"], q4=paths["Q4_K_M"], threads=default_threads()
    )
    plan_path = out / f"demo-{size.value}.toml"
    from edgeprof.safefs import replace_file

    replace_file(plan_path, text.encode())  # never through a symlink planted in the models folder
    try:
        parsed = parse_plan(text, source=str(plan_path), base=out)
    except PlanError as exc:
        fail("; ".join(exc.lines()))
    _guard_write(db)
    engine = _open_engine(db)
    sweep_id = _run_plan(engine, parsed, new=True, retry_failed=False)
    with new_session(engine) as session:
        typer.echo("")
        typer.echo(render_table(build_rows(session, sweep_id)))


@app.command(epilog="Example: edgeprof doctor  ·  edgeprof doctor --json")
def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """What this machine can measure: llama.cpp build and backends, GPU offload, device facts, collectors."""
    from edgeprof.device.doctor import gather, render

    info = gather()
    typer.echo(json.dumps(info, indent=2, default=str) if as_json else render(info))


@app.command(
    epilog=(
        "Example: edgeprof status  ·  "
        "watch -n 5 edgeprof status  ·  "
        "edgeprof status --json"
    )
)
def status(
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    device: DeviceOption = None,
) -> None:
    """What the agent is doing: current sweep, config i of N, ETA, last error, collectors."""
    from edgeprof.daemon.status import gather_status, render_status, status_json
    from edgeprof.storage.db import new_session

    engine = _open_engine(db, read_only=True)
    with new_session(engine) as session:
        if device is not None:
            _sweep_of_device(session, None, device)  # one clear line for a device this DB never saw
        info = gather_status(session, device=device)
    typer.echo(status_json(info) if as_json else render_status(info))


@app.command(
    epilog=(
        "Example: edgeprof agent --queue /var/lib/edgeprof/queue --until 06:30  ·  "
        "edgeprof agent --plan plan.toml --once"
    )
)
def agent(
    queue: Annotated[
        Path | None,
        typer.Option("--queue", help="Spool directory of plans (*.toml); done/ and failed/ inside."),
    ] = None,
    plan: Annotated[Path | None, typer.Option("--plan", help="Run this one plan instead of a queue.")] = None,
    db: DbOption = None,
    until: Annotated[
        str | None, typer.Option("--until", help="HH:MM after which no new config starts.")
    ] = None,
    min_free_mb: Annotated[
        int, typer.Option("--min-free-mb", help="No new run below this much free disk for the DB.")
    ] = 500,
    once: Annotated[bool, typer.Option("--once", help="Process the queue, then exit (for a timer).")] = False,
    poll_s: Annotated[float, typer.Option("--poll-s", help="Seconds between queue scans when idle.")] = 10.0,
    no_telemetry: Annotated[
        bool, typer.Option("--no-telemetry", help="No collectors, cooldown or idle.")
    ] = False,
    wait: Annotated[
        bool, typer.Option("--wait", help="If another agent serves this queue, wait instead of exit 2.")
    ] = False,
    allow_power_mode_change: Annotated[
        bool,
        typer.Option(
            "--allow-power-mode-change", help="Let queued plans switch nvpmodel modes (plans cannot)."
        ),
    ] = False,
    push_to: Annotated[
        str | None,
        typer.Option(
            "--push-to",
            envvar="EDGEPROF_PUSH_TO",
            help="Push each finished sweep to this central DB (background, retried; never blocks a sweep).",
        ),
    ] = None,
    compact_keep_raw: Annotated[
        str | None,
        typer.Option("--compact-keep-raw", help="After each sweep, `db compact --keep-raw` this (e.g. 7d)."),
    ] = None,
) -> None:
    """Long-running daemon (systemd): take plans from a queue, one sweep at a time, resume after a crash."""
    import logging
    import signal as _signal

    from edgeprof.daemon.agent import Agent, AgentConfig, parse_until
    from edgeprof.storage.db import db_url

    if (queue is None) == (plan is None):
        fail("give exactly one of --queue DIR or --plan PLAN.toml")
    if queue is not None and not queue.is_dir():
        fail(f"queue {queue}: not a directory")
    if plan is not None and not plan.is_file():
        fail(f"plan {plan}: no such file")
    try:
        until_t = parse_until(until)
    except ValueError as exc:
        fail(str(exc))
    from edgeprof.storage.retention import parse_duration

    try:
        keep_raw_s = parse_duration(compact_keep_raw) if compact_keep_raw is not None else None
    except ValueError as exc:
        fail(str(exc))
    logging.basicConfig(level=logging.INFO, format="edgeprof-agent %(levelname)s %(message)s")
    _guard_write(db)
    engine = _open_engine(db)
    url = db_url(db)
    db_path = Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None

    def on_term(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    _signal.signal(_signal.SIGTERM, on_term)
    runner = Agent(
        engine,
        db_path,
        AgentConfig(
            queue=queue,
            plan=plan,
            until=until_t,
            min_free_mb=min_free_mb,
            once=once,
            poll_s=poll_s,
            telemetry=not no_telemetry,
            wait=wait,
            allow_power_mode_change=allow_power_mode_change,
            push_to=push_to,
            compact_keep_raw_s=keep_raw_s,
        ),
    )
    runner.install_signals()
    from edgeprof.safefs import QueueLocked

    try:
        code = runner.run()
    except QueueLocked as exc:
        fail(f"{exc}; wait for it with --wait, or stop it")
    raise typer.Exit(code)


def _register_extras() -> None:
    from edgeprof.cli.fleet import register as register_fleet
    from edgeprof.cli.tegrastats import register
    from edgeprof.daemon.service import register as register_service

    register(app)
    register_service(app)
    register_fleet(app, db_app)
    from edgeprof.cli.retention import register as register_retention

    register_retention(db_app)  # issue 12: db compact


_register_extras()


def main() -> None:
    """Console entry point: Typer, with expected failures kept to one line and no traceback."""
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("edgeprof: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:
        # A damaged, full or read-only database found mid-command: one line and what to do, no traceback.
        # (SQLAlchemy is looked up only now: importing it up front would cost every `--help` its start-up.)
        sa_exc = sys.modules.get("sqlalchemy.exc")
        if sa_exc is None or not isinstance(exc, sa_exc.DBAPIError):
            raise
        from edgeprof.storage.guard import describe_sqlite_error

        typer.echo(f"edgeprof: error: {describe_sqlite_error(str(exc.orig or exc))}", err=True)
        sys.exit(EXIT_BAD_INPUT)


if __name__ == "__main__":
    main()
