"""The ``import-tegrastats`` and ``import-log`` commands and the verdict on an imported log, kept apart from
the importers so that registering them costs nothing: the importers (SQLAlchemy, numpy, the storage layer)
are loaded only when a command runs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from edgeprof.cli.common import MAX_INTERVAL_MS, fail, number_range

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
IntervalOption = Annotated[
    float | None,
    typer.Option(
        "--interval-ms",
        help="The line spacing of a log without timestamps (tegrastats --interval); default 1000, said.",
        callback=number_range("--interval-ms", 1.0, MAX_INTERVAL_MS, " ms"),
    ),
]


def _checked_device_name(value: str | None) -> str | None:
    """The same checks as the global ``--device-name``: the name is stored and shown in tables."""
    if value is None:
        return None
    from edgeprof.device.facts import device_name_problem
    from edgeprof.safetext import safe_text

    problem = device_name_problem(value)
    if problem is not None:
        shown = safe_text(value[:40]) + ("..." if len(value) > 40 else "")
        fail(f"--device-name {shown!r}: {problem}")
    return value.strip()


DeviceNameOption = Annotated[
    str | None,
    typer.Option(
        "--device-name",
        help="Name the board the log was recorded on (stored).",
        callback=_checked_device_name,
    ),
]


def verdict_lines(result: dict[str, Any]) -> list[str]:
    """One line per session: its span and verdict with the reason."""
    from edgeprof.report.render.log import spacing_line

    out = []
    for s in result["sessions"]:
        hottest = f", hottest {s['hottest_zone']} {s['hottest_max_c']:g} °C" if s["hottest_zone"] else ""
        excluded = f", excluded {', '.join(s['excluded_zones'])}" if s["excluded_zones"] else ""
        out.append(
            f"verdict (session {s['session']}: {s['start']} .. {s['end']}, {s['lines']} lines"
            f"{hottest}{excluded}): "
            f"{s['verdict']}: {s['reason']}"
        )
    if result["spacing_assumed"]:
        out.append(spacing_line(result))
    thinned = thinning_line(result)
    if thinned is not None:
        out.append(thinned)
    return out


# the format of a log -> the live collector of the same source, whose roles its metrics have
COLLECTOR_OF = {"tegrastats": "tegrastats", "jtop_csv": "jtop", "nvidia_smi_csv": "nvml"}


def _judge_file(
    log: Path, interval_ms: float | None, fmt: str = "tegrastats", rows: Any = None
) -> dict[str, Any]:
    """The verdict on a log: from ``rows`` (a ``LineSample`` the import filled, or a list of rows) where
    given, else read from the file (bounded: at most ``MAX_VERDICT_READINGS``)."""
    from edgeprof.collectors import roles_for
    from edgeprof.telemetry.log_formats import scan_rows
    from edgeprof.telemetry.tegrastats_import import LineSample, series_of_rows, tegrastats_series
    from edgeprof.verdicts.log_store import power_budget_mw
    from edgeprof.verdicts.log_verdict import LogInputs, judge_log

    interval_s = interval_ms / 1000.0 if interval_ms else None
    if isinstance(rows, LineSample) and rows:  # the records the import has just read
        found = rows.series(interval_s)
    elif rows:
        found = series_of_rows(rows, interval_s, len(rows))
    elif fmt == "tegrastats":
        found = tegrastats_series(log, interval_s)
    else:
        sample = LineSample()
        scan_rows(log, fmt, sample)
        found = sample.series(interval_s)
    roles = roles_for(found.series, dict.fromkeys(found.series, COLLECTOR_OF[fmt]))
    budget = power_budget_mw(found.series)
    inputs = LogInputs(found.series, roles, found.spacing_s, found.spacing_assumed, found.wall_t0, budget)
    result = judge_log(inputs)
    result["lines_read"], result["step"] = found.records, found.step
    return result


def thinning_line(result: dict[str, Any]) -> str | None:
    """Where the verdict read every n-th line of a long log (bounded memory), said."""
    from edgeprof.telemetry.tegrastats_import import MAX_VERDICT_READINGS

    step = result.get("step", 1)
    if step <= 1:
        return None
    return (
        f"note: a log of {result['lines_read']} lines: the verdict read 1 line in {step}, evenly through "
        f"it (it holds at most {MAX_VERDICT_READINGS} readings); a throttle shorter than {step} lines may "
        "not show"
    )


def _judge_stored(db: str, log: Path, interval_ms: float | None) -> dict[str, Any]:
    """The verdict on a log just imported into ``db``, judged from what was stored and stored with it, so
    that no later read judges it again (the same file imported before: the verdict stored then)."""
    from edgeprof.telemetry.tegrastats_import import already_imported, open_import_session
    from edgeprof.verdicts.log_store import log_verdict_of

    session = open_import_session(db)
    try:
        sweep_id = already_imported(session, log)
        if sweep_id is None:  # nothing stored (an empty log is refused before this)
            return _judge_file(log, interval_ms)
        return log_verdict_of(session, sweep_id, interval_ms)
    finally:
        session.close()


def import_tegrastats(
    log: LogArgument,
    as_json: JsonLinesOption = False,
    db: StoreOption = None,
    interval_ms: IntervalOption = None,
    device_name: DeviceNameOption = None,
) -> None:
    """Read a tegrastats log: summarise it with a verdict per session, print it as JSON lines, or store it."""
    from edgeprof.telemetry import TegrastatsImportError, import_log
    from edgeprof.telemetry.tegrastats_import import LineSample

    try:
        rows = LineSample()  # the verdict's lines, bounded however long the log
        keep = None if as_json or db is not None else rows  # stored: judged from the database
        import_log(log, as_json, db, sys.stdout, device_name=device_name, rows=keep)
        if not as_json:
            result = _judge_stored(db, log, interval_ms) if db else _judge_file(log, interval_ms, rows=rows)
            for line in verdict_lines(result):
                typer.echo(line)
    except TegrastatsImportError as exc:
        fail(str(exc))


FileArgument = Annotated[
    Path,
    typer.Argument(
        metavar="FILE",
        help=(
            "A tegrastats log, jtop's CSV log, an nvidia-smi CSV log, an sbc-bench result, a stressberry "
            "file, or a CSV whose columns are known or stated with --columns."
        ),
    ),
]
ColumnsOption = Annotated[
    str | None,
    typer.Option(
        "--columns",
        help=(
            "Read FILE as a CSV through this column map: ROLE=COLUMN pairs, ROLE one of time (seconds or a "
            "timestamp), temp (°C), clock (MHz), throttle (0/1 flag), load (%); e.g. "
            "time=sec,temp=tmp,clock=clk,throttle=thr."
        ),
    ),
]


def _board_inputs(log: Any) -> Any:
    """A board log as the log verdict's inputs: its own roles, measured spacing, phases and trip points."""
    from edgeprof.verdicts.log_verdict import LogInputs

    return LogInputs(
        log.series(),
        log.roles,
        log.spacing_s,
        spacing_assumed=False,
        wall_t0=log.wall_t0,
        trip_points=log.trip_points,
        trip_source=log.trip_source,
        phases=log.phases,
    )


def _import_board_log(
    file: Path, fmt: str, columns: str | None, db: str | None, device: str | None
) -> None:
    from edgeprof.telemetry.board_import import read_board_log
    from edgeprof.telemetry.board_logs import store_board_log
    from edgeprof.verdicts.log_verdict import judge_log

    log = read_board_log(file, fmt, columns)
    typer.echo(log.summary(file))
    for note in log.notes:
        typer.echo(f"note: {note}")
    if db is not None:
        sweep_id, stored = store_board_log(db, file, log, device)
        typer.echo(
            f"imported {len(log.rows)} records from {file.name} into sweep {sweep_id} (imported)"
            if stored
            else f"{file.name} already imported as sweep {sweep_id} (same sha256): nothing stored"
        )
    # stored: judged once from what was stored, and that verdict kept (no later read judges it again)
    result = _judge_stored(db, file, None) if db is not None else judge_log(_board_inputs(log))
    for line in verdict_lines(result):
        typer.echo(line)


def import_log_file(
    file: FileArgument,
    db: StoreOption = None,
    interval_ms: IntervalOption = None,
    device_name: DeviceNameOption = None,
    columns: ColumnsOption = None,
) -> None:
    """Read a log users already have (format recognised from its content): a verdict per session, and with
    --db its readings stored as an imported sweep (`edgeprof analyse --sweep N` judges it again)."""
    from edgeprof.safetext import safe_text
    from edgeprof.telemetry import TegrastatsImportError, import_log
    from edgeprof.telemetry.board_import import EXPECTED_BOARD, detect_board_format
    from edgeprof.telemetry.log_formats import EXPECTED, detect_format, scan_rows, store_rows
    from edgeprof.telemetry.tegrastats_import import LineSample

    try:
        fmt = None if columns else detect_format(file)
        if fmt is None:
            board_fmt = detect_board_format(file, columns)
            if board_fmt is None:
                expected = f"expected {EXPECTED}; or {EXPECTED_BOARD}"
                fail(f"{safe_text(file)}: not a log edgeprof can read; {expected}")
            return _import_board_log(file, str(board_fmt), columns, db, device_name)
        rows = LineSample()  # the verdict's lines, bounded however long the log
        if fmt == "tegrastats":
            import_log(file, False, db, sys.stdout, device_name=device_name, rows=None if db else rows)
        else:
            scan = scan_rows(file, fmt, rows)
            typer.echo(f"{file.name}: {scan.records} records ({fmt})")
            if db is not None:
                sweep_id, stored = store_rows(db, file, scan, fmt, device_name)
                typer.echo(
                    f"imported {scan.records} records from {file.name} into sweep {sweep_id} (imported)"
                    if stored
                    else f"{file.name} already imported as sweep {sweep_id} (same sha256): nothing stored"
                )
        result = _judge_stored(db, file, interval_ms) if db else _judge_file(file, interval_ms, fmt, rows)
        for line in verdict_lines(result):
            typer.echo(line)
    except TegrastatsImportError as exc:
        fail(str(exc))


def show_log_verdict(
    session: Any, sweep_id: int, fmt: str, interval_ms: float | None, rejudge: bool = False
) -> None:
    """``analyse`` of an imported sweep: the verdict on its log as stored (judged again, and stored, where
    the judgement changed since, another spacing is stated or ``rejudge``), as a table or JSON."""
    from edgeprof.report.render.log import render_log_json, render_log_text
    from edgeprof.verdicts.log_store import log_verdict_of

    result = log_verdict_of(session, sweep_id, interval_ms, rejudge=rejudge)
    typer.echo(render_log_json(result) if fmt == "json" else render_log_text(result))


def register(app: typer.Typer) -> None:
    """Add ``import-tegrastats``; bad input is ``edgeprof: error: <msg>`` on stderr, exit 2."""
    app.command(
        "import-tegrastats",
        epilog=(
            "Example: edgeprof import-tegrastats tegrastats.log  ·  "
            "edgeprof import-tegrastats tegrastats.log --db night.db"
        ),
    )(import_tegrastats)
    app.command(
        "import-log",
        epilog=(
            "Example: edgeprof import-log tegrastats.log  ·  edgeprof import-log jtop.csv --db night.db  ·  "
            "edgeprof import-log smi.csv --db night.db --device-name rig1  ·  "
            "edgeprof import-log pi.csv --columns time=sec,temp=tmp,clock=clk,throttle=thr"
        ),
    )(import_log_file)
