"""Fleet commands: ``db upgrade`` / ``db version``, ``sweeps``, ``push``, ``export``, ``import``.

Registered onto the main Typer app by ``edgeprof.cli.app``. Reading commands open the DB read-only (never
migrate, never write): a central database is never changed by a look at it; ``db upgrade``, ``push`` and
``import`` are the writers.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import IO, Annotated, Any, cast

import typer

from edgeprof.cli.common import (
    App,
    DbOption,
    JsonOption,
    fail,
    fit_text,
    guard_write,
    int_range,
    open_db,
    terminal_width,
)


def db_version(db: DbOption = None, as_json: JsonOption = False) -> None:
    """The schema version of the database and what this edgeprof would apply (changes nothing)."""
    from edgeprof.storage.db import mask_url
    from edgeprof.storage.migrations import (
        HEAD_VERSION,
        SchemaTooNewError,
        applied_versions,
        missing_versions,
    )

    if not _exists(db):
        fail(f"no edgeprof database at {mask_url(db)}")
    engine = open_db(db, read_only=True, migrate=False)  # a look never changes the file, nor its journal mode
    with engine.connect() as conn:
        applied = sorted(applied_versions(conn))
        try:
            missing = missing_versions(conn)
        except SchemaTooNewError as exc:
            fail(str(exc))
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
    from edgeprof.storage.migrations import ForeignDatabaseError, SchemaTooNewError, current_version, upgrade

    guard_write(db)  # never add our tables to someone else's SQLite file
    engine = open_db(db, migrate=False)
    try:
        applied = upgrade(engine)
    except SchemaTooNewError as exc:
        fail(str(exc))
    except ForeignDatabaseError as exc:  # a server's database of another application: nothing was changed
        fail(f"{mask_url(db)}: {exc}")
    with engine.connect() as conn:
        version = current_version(conn)
    what = f"applied {', '.join(map(str, applied))}" if applied else "already up to date"
    typer.echo(f"{mask_url(db)}: schema version {version} ({what})")


SweepsDeviceOption = Annotated[
    str | None, typer.Option("--device", help="Only this device: hostname, board model or uid prefix.")
]
LimitOption = Annotated[
    int | None,
    typer.Option("--limit", help="At most this many (newest first).", callback=int_range("--limit")),
]
SweepsWideOption = Annotated[bool, typer.Option("--wide", help="Every column, however wide the terminal.")]
# Left out when the list is wider than the terminal, the least telling first (after any column with no
# data, as board and L4T off a Jetson); each one is named. The board, what a fleet's devices are, goes last.
SWEEPS_DROP_ORDER = ("L4T", "started", "build", "plan", "board")


def sweeps(
    db: DbOption = None,
    device: SweepsDeviceOption = None,
    as_json: JsonOption = False,
    limit: LimitOption = None,
    wide: SweepsWideOption = False,
) -> None:
    """List sweeps with their device (hostname, board, L4T), build, plan, time and status.

    On a terminal the list fits its width: the least telling columns are left out (and named) when needed."""
    from edgeprof.fleet import list_sweeps
    from edgeprof.safetext import safe_lines
    from edgeprof.storage.db import new_session

    engine = open_db(db, read_only=True)
    with new_session(engine) as session:
        rows = list_sweeps(session, device=device, limit=limit)
    if device and not rows:
        fail(f"no sweeps of a device called {device!r} in this database")
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
    else:
        typer.echo(safe_lines(sweeps_table(rows, None if wide else terminal_width())))


def sweeps_table(rows: list[dict[str, Any]], width: int | None) -> str:
    """``list_sweeps``'s rows as a table, fitted to ``width`` as the report's table is (None: every
    column)."""
    from edgeprof.report import fit_table

    if not rows:
        return "no sweeps"
    from edgeprof.fleet import SWEEPS_HEADERS, sweep_cells
    from edgeprof.safetext import safe_text

    # escaped before fitting: the widths are those of what is printed
    cells = [[safe_text(c) for c in row] for row in sweep_cells(rows)]
    no_data = [h for i, h in enumerate(SWEEPS_HEADERS) if all(row[i] == "-" for row in cells)]
    order = [*no_data, *(h for h in SWEEPS_DROP_ORDER if h not in no_data)]
    return fit_text("\n".join(fit_table(list(SWEEPS_HEADERS), cells, width, order)), width)


def _parse_since(since: str | None) -> datetime | None:
    if since is None:
        return None
    try:
        return datetime.fromisoformat(since)
    except ValueError:
        fail(f"--since {since!r}: not a date (YYYY-MM-DD or YYYY-MM-DDTHH:MM)")


SweepIds = Annotated[
    list[int] | None,
    typer.Option("--sweep", help="Sweep id (repeatable).", callback=int_range("--sweep")),
]
Since = Annotated[str | None, typer.Option("--since", help="Sweeps started on or after this date (UTC).")]
All = Annotated[bool, typer.Option("--all", help="Every sweep in the database.")]


ToOption = Annotated[str, typer.Option("--to", help="The central database URL (or path).")]
RecheckOption = Annotated[
    bool, typer.Option("--recheck", help="Compare every row even of sweeps already there and finished.")
]


def push(
    to: ToOption,
    db: DbOption = None,
    sweep: SweepIds = None,
    since: Since = None,
    everything: All = False,
    recheck: RecheckOption = False,
    as_json: JsonOption = False,
) -> None:
    """Copy this device's sweeps (runs, measurements, telemetry, verdicts) into a central database.

    One transaction per sweep: pushing again adds nothing, and a push cut off midway is resumed by pushing
    again.
    """
    from sqlalchemy.exc import SQLAlchemyError

    from edgeprof.fleet import FleetError, push_sweeps, select_sweeps
    from edgeprof.storage.db import mask_url, new_session, scrub

    source = open_db(db, read_only=True)
    with new_session(source) as session:
        try:
            ids = select_sweeps(session, sweep, _parse_since(since), everything)
        except FleetError as exc:
            fail(str(exc))
    guard_write(to)  # a SQLite target: never write into someone else's file
    target = open_db(to)
    sent: list[int] = []

    def report(sweep_id: int, counts: Any) -> None:
        if counts is not None:
            sent.append(sweep_id)
        if not as_json:
            typer.echo(f"sweep {sweep_id}: {counts.summary() if counts is not None else 'already there'}")

    try:
        result = push_sweeps(source, target, ids, recheck=recheck, on_sweep=report)
    except (SQLAlchemyError, OSError, LookupError) as exc:
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__]
        fail(
            f"push to {mask_url(to)} stopped after {len(sent)} sweep(s): {scrub(first[0], to)}; "
            "push again to resume (nothing is sent twice)"
        )
    if as_json:
        sweeps_sent = [{"sweep_id": i, **counts_json(c)} for i, c in result.sent]
        typer.echo(
            json.dumps({"to": mask_url(to), "sent": sweeps_sent, "already_there": result.skipped,
                        "rows_added": result.n_added}, indent=2)
        )  # fmt: skip
        return
    typer.echo(
        f"pushed to {mask_url(to)}: {len(result.sent)} sweep(s) sent, {len(result.skipped)} already there, "
        f"{result.n_added} rows added"
    )


def counts_json(counts: Any) -> dict[str, Any]:
    """What a push or an import added to one sweep, by table, for ``--json``."""
    return {
        "rows_added": counts.n_added,
        "added": dict(sorted(counts.added.items())),
        "updated": dict(sorted(counts.updated.items())),
    }


OutputOption = Annotated[
    Path | None, typer.Option("--output", "-o", help="Write here (gzip if it ends .gz); default stdout.")
]


def export(
    db: DbOption = None,
    sweep: SweepIds = None,
    since: Since = None,
    everything: All = False,
    output: OutputOption = None,
) -> None:
    """Write sweeps as JSON lines, for a device with no network to the central DB (then `edgeprof import`)."""
    import sys

    from edgeprof.fleet import FleetError, export_sweeps, select_sweeps
    from edgeprof.safefs import EXPORT, UnsafePath, check_output
    from edgeprof.storage.db import new_session

    protect = _database_files(db)
    if output is not None:
        try:  # before the database is opened: `-o self.db --db self.db` once truncated it to JSON
            check_output(output, EXPORT, protect)
        except UnsafePath as exc:
            fail(str(exc))
    source = open_db(db, read_only=True)
    with new_session(source) as session:
        try:
            ids = select_sweeps(session, sweep, _parse_since(since), everything)
        except FleetError as exc:
            fail(str(exc))
    try:
        if output is None:
            n = export_sweeps(source, ids, sys.stdout)
        else:
            n = _export_to_file(source, ids, output, protect)
    except UnsafePath as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror}")
    typer.echo(f"exported {len(ids)} sweep(s), {n} lines", err=True)


def _database_files(db: str | None) -> tuple[Path, ...]:
    from edgeprof.cli.common import sqlite_file

    path = sqlite_file(db)
    return (path,) if path is not None else ()


def _export_to_file(source: Any, ids: list[int], output: Path, protect: tuple[Path, ...]) -> int:
    """Through the one safe writer: a temp file beside ``output``, renamed over it when complete."""
    import gzip
    import io

    from edgeprof.fleet import export_sweeps
    from edgeprof.safefs import EXPORT, output_file

    with output_file(output, EXPORT, protect) as raw:
        if output.name.endswith(".gz"):
            packed = gzip.GzipFile(filename=output.name, mode="wb", fileobj=raw)
            with io.TextIOWrapper(cast(IO[bytes], packed), encoding="utf-8") as text:
                return export_sweeps(source, ids, text)
        out = io.TextIOWrapper(raw, encoding="utf-8")
        n = export_sweeps(source, ids, out)
        out.flush()
        out.detach()  # the writer closes and renames the file itself
        return n


ExportFileArgument = Annotated[
    str, typer.Argument(help="An `edgeprof export` file (.jsonl, .jsonl.gz, - = stdin).")
]


def import_(path: ExportFileArgument, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Add the sweeps of an export file to a database (same identity rules as push: nothing twice)."""
    from sqlalchemy.exc import SQLAlchemyError

    from edgeprof.fleet import FleetError, import_export, open_export
    from edgeprof.storage.db import mask_url, scrub
    from edgeprof.storage.guard import error_line

    try:
        stream = open_export(path)
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror}")
    guard_write(db)
    target = open_db(db)

    imported: list[dict[str, Any]] = []

    def report(uid: str, counts: Any) -> None:
        if as_json:
            imported.append({"sweep_uid": uid, **counts_json(counts)})
        else:
            typer.echo(f"sweep {uid}: {counts.summary()}")

    try:
        with stream:
            total = import_export(stream, path, target, on_sweep=report)
    except FleetError as exc:
        fail(str(exc))
    except (SQLAlchemyError, OSError, EOFError) as exc:
        fail(f"import into {mask_url(db)} stopped: {scrub(error_line(exc), db)}; import again to resume")
    if as_json:
        summary = {"into": mask_url(db), "sweeps": imported, "rows_added": total.n_added}
        typer.echo(json.dumps(summary, indent=2))
        return
    typer.echo(f"imported into {mask_url(db)}: {total.n_added} rows added")


# -- the fleet's job queue: `edgeprof fleet submit | boards | jobs | cancel` --------------------------------

FleetDbOption = Annotated[str, typer.Option("--db", help="The central PostgreSQL URL.")]
FleetToOption = Annotated[str, typer.Option("--to", help="The central PostgreSQL URL.")]
FormatOption = Annotated[str, typer.Option("--format", help="table or json.")]
SelectOption = Annotated[
    str,
    typer.Option("--select", help="Boards it runs on: board=orin-nano,jetpack>=6.1,label:lab=2 ..."),
]
EachOption = Annotated[bool, typer.Option("--each", help="One job per matching board (waiting for it).")]
AnyOption = Annotated[bool, typer.Option("--any", help="One job, for the first free matching board.")]
HealthOption = Annotated[
    bool, typer.Option("--health", help="The health plan of the matching boards' class (run on a schedule).")
]
EveryOption = Annotated[str, typer.Option("--every", help="--health: how often a board runs it (e.g. 24h).")]
ModelsFromOption = Annotated[
    str | None,
    typer.Option("--models-from", help="Where boards fetch a model they lack: a shared folder or an URL."),
]
AttemptsOption = Annotated[
    int, typer.Option("--max-attempts", help="Failed attempts before the job is failed.", min=1, max=100)
]
PlanArgument = Annotated[Path, typer.Argument(help="The plan (TOML) to queue.")]
JobArgument = Annotated[
    int, typer.Argument(help="The job id (`edgeprof fleet jobs`).", callback=int_range("JOB"))
]


def _fleet_engine(url: str, *, write: bool) -> Any:
    from edgeprof.fleet.queue import POSTGRES_ONLY, FleetQueueError, require_postgres
    from edgeprof.storage.db import db_url

    if not db_url(url, create_dir=False).startswith("postgresql"):
        fail(POSTGRES_ONLY)  # before opening: a look at a SQLite path creates nothing
    if write:
        guard_write(url)
    engine = open_db(url, read_only=not write)
    try:
        require_postgres(engine)
    except FleetQueueError as exc:
        fail(str(exc))
    return engine


def _format(value: str) -> bool:
    if value not in ("table", "json"):
        fail(f"--format {value!r}: expected table or json")
    return value == "json"


def fleet_submit(
    plan: PlanArgument,
    to: FleetToOption,
    select: SelectOption,
    each: EachOption = False,
    any_: AnyOption = False,
    health: HealthOption = False,
    every: EveryOption = "24h",
    models_from: ModelsFromOption = None,
    max_attempts: AttemptsOption = 3,
    output: FormatOption = "table",
) -> None:
    """Queue a plan once; it runs on every matching board (--each) or the first free one (--any)."""
    from edgeprof.fleet.boards import set_health_plan
    from edgeprof.fleet.jobfiles import JobFileError, identify_plan
    from edgeprof.fleet.queue import submit
    from edgeprof.fleet.selector import SelectorError, parse_selector
    from edgeprof.storage.retention import parse_duration

    as_json = _format(output)
    if each + any_ + health != 1:
        fail("give exactly one of --each, --any or --health")
    try:
        every_s = parse_duration(every)
    except ValueError:
        fail(f"--every {every!r}: expected a duration such as 24h, 30m or 90s")
    if every_s <= 0:
        fail("--every must be longer than 0")
    try:
        parse_selector(select)
        submitted = identify_plan(plan)
    except (SelectorError, JobFileError) as exc:
        fail(str(exc))
    engine = _fleet_engine(to, write=True)
    if health:
        hp = set_health_plan(engine, submitted, select, every_s, models_from)
        typer.echo(json.dumps({"health_plan": hp}) if as_json else
                   f"health plan {hp} ({submitted.name}) for boards matching {select}, every {every}")
        return
    kind = "each" if each else "any"
    ids, boards = submit(engine, submitted, select, kind, models_from, max_attempts)
    if kind == "each" and not ids:
        fail(f"no registered board matches {select!r}; nothing queued (see `edgeprof fleet boards`)", 1)
    if as_json:
        typer.echo(json.dumps({"jobs": ids, "kind": kind, "matching_boards": len(boards),
                               "plan_sha256": submitted.sha256}))
        return
    typer.echo(f"queued {len(ids)} job(s) {', '.join(map(str, ids))} ({kind}, {submitted.name}, plan sha256 "
               f"{submitted.sha256[:12]}) for {len(boards)} matching board(s)")
    if not boards:
        typer.echo(f"no registered board matches {select!r} yet: the job waits for one", err=True)


def fleet_boards(db: FleetDbOption, output: FormatOption = "table") -> None:
    """The fleet's boards: idle, running job N (sweep, config i of n, ETA), offline since, unhealthy (why)."""
    from edgeprof.fleet.boards import BOARDS_HEADERS, board_cells, list_boards

    as_json = _format(output)
    rows = list_boards(_fleet_engine(db, write=False))
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    _table(BOARDS_HEADERS, board_cells(rows), "no boards have joined (edgeprof agent --fleet URL)")


def fleet_jobs(db: FleetDbOption, output: FormatOption = "table") -> None:
    """The fleet's jobs with their boards, states, attempts, progress, sweeps and last reason."""
    from edgeprof.fleet.boards import JOBS_HEADERS, job_cells, list_jobs

    as_json = _format(output)
    rows = list_jobs(_fleet_engine(db, write=False))
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    _table(JOBS_HEADERS, job_cells(rows), "no jobs (edgeprof fleet submit PLAN --to URL --select EXPR --any)")


def _table(headers: tuple[str, ...], cells: list[list[str]], empty: str) -> None:
    from edgeprof.report import fit_table
    from edgeprof.safetext import safe_lines, safe_text

    if not cells:
        typer.echo(empty)
        return
    shown = [[safe_text(c) for c in row] for row in cells]
    typer.echo(safe_lines("\n".join(fit_table(list(headers), shown, None, []))))


def fleet_cancel(job: JobArgument, db: FleetDbOption) -> None:
    """Cancel a queued or running job (a running one stops after its current config)."""
    from edgeprof.fleet.queue import FleetQueueError, cancel

    try:
        was = cancel(_fleet_engine(db, write=True), job)
    except FleetQueueError as exc:
        fail(str(exc))
    typer.echo(f"job {job} cancelled (it was {was})")


def register(app: typer.Typer, db_app: typer.Typer) -> None:
    fleet_app = App(no_args_is_help=True, help="A fleet's job queue in the central PostgreSQL.")
    url = "postgresql://edgeprof@central/fleet"
    fleet_app.command("submit", epilog=f"Example: edgeprof fleet submit plan.toml --to {url} "
                      "--select 'board=orin-nano,jetpack>=6.1' --each")(fleet_submit)
    fleet_app.command("boards", epilog=f"Example: edgeprof fleet boards --db {url}")(fleet_boards)
    fleet_app.command("jobs", epilog=f"Example: edgeprof fleet jobs --db {url} --format json")(fleet_jobs)
    fleet_app.command("cancel", epilog=f"Example: edgeprof fleet cancel 17 --db {url}")(fleet_cancel)
    app.add_typer(fleet_app, name="fleet")
    db_app.command("version", epilog="Example: edgeprof db version --db postgresql://edgeprof@central/fleet")(
        db_version
    )
    db_app.command("upgrade", epilog="Example: edgeprof db upgrade --db ~/.local/share/edgeprof/edgeprof.db")(
        db_upgrade
    )
    app.command(epilog="Example: edgeprof sweeps --device orin-nano-1")(sweeps)
    app.command(epilog="Example: edgeprof push --to postgresql://edgeprof@central/fleet --all")(push)
    app.command(epilog="Example: edgeprof export --sweep 3 -o sweep3.jsonl.gz")(export)
    app.command("import", epilog="Example: edgeprof import sweep3.jsonl.gz --db postgresql://...")(import_)
