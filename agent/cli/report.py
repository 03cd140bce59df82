"""``edgeprof report`` (one row per config), ``compare`` (two sweeps, config by config) and ``analyse``
(the verdicts of a stored sweep, computed again). Readers open the database read-only: they never migrate
or write it, and a mistyped ``--db`` creates nothing (``analyse`` writes verdicts, into an existing DB)."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from edgeprof.cli.common import (
    MAX_INTERVAL_MS,
    DbOption,
    DeviceOption,
    JsonOption,
    SweepOption,
    echo_wrapped,
    fail,
    guard_write,
    int_range,
    number_range,
    open_db,
    sqlite_file,
    sweep_of_device,
    terminal_width,
)


class ReportFormat(str, Enum):
    table = "table"
    md = "md"
    csv = "csv"
    json = "json"
    # llama-bench's field names, for compare-llama-bench.py and other llama-bench tooling
    llama_bench_json = "llama-bench-json"
    llama_bench_jsonl = "llama-bench-jsonl"
    llama_bench_csv = "llama-bench-csv"
    llama_bench_sql = "llama-bench-sql"
    llama_bench_md = "llama-bench-md"  # llama-bench's own terminal table


class CompareFormat(str, Enum):
    table = "table"
    md = "md"
    json = "json"


ReportFormatOption = Annotated[
    ReportFormat | None,
    typer.Option("--format", "-f", help="Output format [default: table; none with --html unless given]."),
]
HtmlOption = Annotated[
    Path | None,
    typer.Option(
        "--html",
        help=(
            "Write one self-contained HTML report (plots embedded) and say where it went; "
            "the table is printed too only with --format."
        ),
    ),
]
WideOption = Annotated[
    bool, typer.Option("--wide", help="Every column that has data, however wide the terminal.")
]
ColumnsOption = Annotated[
    str | None,
    typer.Option(
        "--columns",
        help="Only these table columns, e.g. model,quant,ctx,tg,ttft,kld (a wrong name lists them).",
    ),
]

ShowOutputOption = Annotated[
    bool,
    typer.Option(
        "--show-output",
        help=(
            "Below the table, the first 120 characters of each config's generated text, control "
            "characters escaped (Markdown and --html always show them)."
        ),
    ),
]

REPORT_EPILOG = (
    "Example: edgeprof report  ·  "
    "edgeprof report --sweep 3 --format md  ·  "
    "edgeprof report --html morning.html"
)


def llama_bench_renderer(fmt: str) -> Any:
    """The whole-sweep printer of ``llama-bench-<kind>`` (md too: llama-bench's default output)."""
    from edgeprof.report.render.llama_bench import sweep_renderer

    return sweep_renderer(fmt.removeprefix("llama-bench-"))


def report(
    db: DbOption = None,
    sweep: SweepOption = None,
    fmt: ReportFormatOption = None,
    html: HtmlOption = None,
    device: DeviceOption = None,
    wide: WideOption = False,
    columns: ColumnsOption = None,
    show_output: ShowOutputOption = False,
) -> None:
    """One row per config: cold start apart from steady state, quality beside speed, verdicts.

    On a terminal the table fits its width: columns with no data are left out, columns with one value in
    every row are said once above it, and the least telling columns are left out (and named) when needed."""
    from edgeprof.report import ColumnError, ReportError, parse_columns
    from edgeprof.storage.db import new_session

    # --html alone writes the file and says where; the table (or any --format given) is still printed
    # where asked for
    printed = fmt is not None or html is None
    fmt = fmt or ReportFormat.table

    try:
        picked = parse_columns(columns) if columns is not None else None
    except ColumnError as exc:
        fail(str(exc))
    engine = open_db(db, read_only=True)
    with new_session(engine) as session:
        if device is not None:
            sweep = sweep_of_device(session, sweep, device)
        try:
            log_text = _log_report(session, sweep, fmt.value)  # an imported log: its stored verdict
        except ReportError as exc:
            fail(str(exc))
        if log_text is not None and html is None:  # nothing else to show: no table's renderers loaded
            typer.echo(log_text)
            return
        from edgeprof.report import build_rows

        try:
            rows = build_rows(session, sweep, include_serving=True)
            if html is not None:
                _write_html(session, sweep, html, db, wide)
            llama_bench = None
            if fmt.value.startswith("llama-bench-"):  # from the database: every repetition's time
                llama_bench = llama_bench_renderer(fmt.value)(session, sweep)
        except ReportError as exc:
            fail(str(exc))
        except OSError as exc:
            fail(f"cannot write {html}: {exc.strerror or exc}")
    if html is not None:
        typer.echo(f"HTML report written to {html}", err=printed)
    if not printed:
        return
    if log_text is not None:
        typer.echo(log_text)
    elif llama_bench is not None:
        typer.echo(llama_bench, nl=False)
    else:
        typer.echo(_render_rows(rows, fmt, picked, wide, show_output))


def _render_rows(rows: Any, fmt: ReportFormat, picked: Any, wide: bool, show_output: bool) -> str:
    """The sweep's rows in ``fmt``: the table fitted to the terminal, CSV made safe for one."""
    from edgeprof.report import RENDERERS, render_table

    if fmt is ReportFormat.table:
        return render_table(rows, width=terminal_width(), columns=picked, wide=wide, show_output=show_output)
    if fmt is ReportFormat.csv:  # to a terminal, one visible line per row; to a file, the data itself
        from edgeprof.report.render.csv import render_csv

        return render_csv(rows, terminal=to_terminal())
    return str(RENDERERS[fmt.value](rows))


def to_terminal() -> bool:
    """Whether stdout is a terminal (a label's control characters would act on it)."""
    return sys.stdout.isatty()


def _log_report(session: Any, sweep: int | None, fmt: str) -> str | None:
    """The report of an imported log (its verdict, sessions and excluded zones) in ``fmt``; None for a
    sweep of runs."""
    from edgeprof.report import latest_sweep_id
    from edgeprof.storage.models import Sweep
    from edgeprof.verdicts.log_store import is_imported

    sweep_id = sweep if sweep is not None else latest_sweep_id(session)
    if sweep_id is None or not is_imported(session.get(Sweep, sweep_id)):
        return None
    from edgeprof.report.render.log import render_log_json, render_log_markdown, render_log_text
    from edgeprof.verdicts.log_store import log_verdict_of, stored_log_verdict

    stored = stored_log_verdict(session, sweep_id)
    if stored is None or stored.get("stale"):  # a reader never writes: judged now, in memory, and said so
        why = "is by an older judgement" if stored is not None else "was never stored"
        typer.echo(
            f"note: the verdict on sweep {sweep_id}'s log {why}: judged again now (slow on a long log); "
            f"`edgeprof analyse --sweep {sweep_id}` stores it",
            err=True,
        )
    result = log_verdict_of(session, sweep_id, store=False)
    render = {"json": render_log_json, "md": render_log_markdown}.get(fmt, render_log_text)
    return render(result)


def _write_html(session: Any, sweep: int | None, html: Path, db: str | None, wide: bool = False) -> None:
    """The HTML report of ``sweep`` (the latest when None); never over the database file itself; ``wide``:
    every configs column with data, as in the terminal."""
    from edgeprof.report import latest_sweep_id, write_html

    sweep_id = sweep if sweep is not None else latest_sweep_id(session)
    assert sweep_id is not None  # build_rows raised otherwise
    db_file = sqlite_file(db)
    write_html(session, sweep_id, html, protect=(db_file,) if db_file else (), wide=wide)


CompareFormatOption = Annotated[CompareFormat, typer.Option("--format", "-f", help="Output format.")]
SweepA = Annotated[
    int | None, typer.Argument(help="Sweep id A (the baseline).", callback=int_range("sweep id A"))
]
SweepB = Annotated[
    int | None,
    typer.Argument(
        help="Sweep id B (another device, build or power mode).", callback=int_range("sweep id B")
    ),
]
DbBOption = Annotated[
    str | None, typer.Option("--db-b", help="Sweep B is in this other database (path or URL).")
]
CompareWideOption = Annotated[
    bool, typer.Option("--wide", help="The table as wide as its cells, however wide the terminal.")
]
CompareDeviceOption = Annotated[
    list[str] | None,
    typer.Option(
        "--device",
        help="A missing sweep id is this device's latest sweep (give it twice: A's device, then B's).",
    ),
]


def compare(
    a: SweepA = None,
    b: SweepB = None,
    db: DbOption = None,
    fmt: CompareFormatOption = CompareFormat.table,
    db_b: DbBOption = None,
    device: CompareDeviceOption = None,
    wide: CompareWideOption = False,
) -> None:
    """Per matching config of two sweeps: ratio of medians (B/A), 'within noise' where ranges overlap.

    The output first names A and B (sweep, plan, device, build); on a terminal the table fits its width."""
    from edgeprof.report import ReportError, compare_sweeps, describe_sweep, render_compare
    from edgeprof.safetext import safe_lines
    from edgeprof.storage.db import mask_url, new_session

    devices = list(device or [])
    engine = open_db(db, read_only=True)
    engine_b = open_db(db_b, read_only=True) if db_b is not None else engine
    with new_session(engine) as session, new_session(engine_b) as session_b:
        ids: list[int] = []
        for sid, where in ((a, session), (b, session_b)):
            if sid is None:
                if not devices:
                    fail("give two sweep ids, or --device NAME for each one missing")
                sid = sweep_of_device(where, None, devices.pop(0))
            ids.append(sid)
        if devices:
            fail("too many --device options for the sweep ids given")
        try:
            rows = compare_sweeps(session, ids[0], ids[1], session_b=session_b)
            sides = [describe_sweep(session, ids[0]), describe_sweep(session_b, ids[1])]
        except ReportError as exc:
            fail(str(exc))
    if db_b is not None:  # the same id can name two sweeps: say which database each one is in
        sides[0]["database"], sides[1]["database"] = mask_url(db), mask_url(db_b)
    width = None if wide else terminal_width()
    if fmt.value != "json":  # labels, hosts, names: one visible line each, never a control sequence
        rows, sides = [_shown(r) for r in rows], [_shown(side) for side in sides]
    text = render_compare(rows, fmt.value, sides=sides, width=width)
    typer.echo(text if fmt.value == "json" else safe_lines(text))


def _shown(values: dict[str, Any]) -> dict[str, Any]:
    from edgeprof.safetext import safe_text

    return {k: safe_text(v) if isinstance(v, str) else v for k, v in values.items()}


AnalyseFormatOption = Annotated[
    str, typer.Option("--format", "-f", help="table or json (json: an imported log's verdict per session).")
]
IntervalMsOption = Annotated[
    float | None,
    typer.Option(
        "--interval-ms",
        help="An imported log without timestamps: its line spacing.",
        callback=number_range("--interval-ms", 1.0, MAX_INTERVAL_MS, " ms"),
    ),
]
RejudgeOption = Annotated[
    bool,
    typer.Option(
        "--rejudge",
        help="An imported log: judge it again and store that, even where its stored verdict is current.",
    ),
]


def analyse(
    db: DbOption = None,
    sweep: SweepOption = None,
    fmt: AnalyseFormatOption = "table",
    interval_ms: IntervalMsOption = None,
    as_json: JsonOption = False,
    rejudge: RejudgeOption = False,
) -> None:
    """(Re)compute throttle and stability verdicts of a stored sweep from its telemetry; for an imported
    log, the verdict on it per session, as stored at import (judged again where the judgement has changed
    since, with another --interval-ms, or --rejudge)."""
    if as_json:  # --json, as on every command that prints results: the same as --format json
        fmt = "json"
    from edgeprof.report import latest_sweep_id
    from edgeprof.storage.db import new_session
    from edgeprof.storage.models import Sweep
    from edgeprof.verdicts import analyse_sweep, summary_line
    from edgeprof.verdicts.log_store import is_imported

    path = sqlite_file(db)
    if path is not None and not path.is_file():  # it writes verdicts, but never creates a database
        fail(f"no edgeprof database at {path}")
    guard_write(db)  # nor into another application's SQLite file, nor a damaged one
    engine = open_db(db)
    with new_session(engine) as session:
        sweep_id = sweep if sweep is not None else latest_sweep_id(session)
        if sweep_id is None or session.get(Sweep, sweep_id) is None:
            fail(f"no sweep {sweep_id if sweep_id is not None else ''} in this database".replace("  ", " "))
        if fmt not in ("table", "json"):
            fail(f"--format must be table or json, not {fmt!r}")
        if is_imported(session.get(Sweep, sweep_id)):  # a log, not runs: judged per session
            from edgeprof.cli.tegrastats import show_log_verdict

            show_log_verdict(session, sweep_id, fmt, interval_ms, rejudge)
            return
        results = analyse_sweep(session, sweep_id)
        if fmt == "json":
            import json

            judged = {
                str(run_id): {
                    v.kind: {"value": v.value, "evidence": json.loads(v.evidence_json)} for v in verdicts
                }
                for run_id, verdicts in results.items()
            }
            typer.echo(json.dumps(judged, indent=2, allow_nan=False))
            return
        for run_id, verdicts in results.items():
            echo_wrapped(f"run {run_id}: " + "; ".join(summary_line(v) for v in verdicts))


def register(app: typer.Typer) -> None:
    app.command(epilog=REPORT_EPILOG)(report)
    app.command(epilog="Example: edgeprof compare 3 5   (sweep 5 against sweep 3: B/A per matching config)")(
        compare
    )
    app.command(epilog="Example: edgeprof analyse --sweep 3")(analyse)
