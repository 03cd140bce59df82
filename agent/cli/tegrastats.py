"""The ``import-tegrastats`` and ``import-log`` commands and the verdict on an imported log, kept apart from
the importers so that registering them costs nothing: the importers (SQLAlchemy, numpy, the storage layer)
are loaded only when a command runs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

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
IntervalOption = Annotated[
    float | None,
    typer.Option(
        "--interval-ms",
        min=1.0,
        help="The line spacing of a log without timestamps (tegrastats --interval); default 1000, said.",
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
    return out


def _judge_file(log: Path, interval_ms: float | None) -> dict[str, Any]:
    from edgeprof.collectors import roles_for
    from edgeprof.telemetry.tegrastats_import import tegrastats_series
    from edgeprof.verdicts.log_verdict import LogInputs, judge_log

    found = tegrastats_series(log, interval_ms / 1000.0 if interval_ms else None)
    roles = roles_for(found.series, dict.fromkeys(found.series, "tegrastats"))
    return judge_log(LogInputs(found.series, roles, found.spacing_s, found.spacing_assumed, found.wall_t0))


def import_tegrastats(
    log: LogArgument,
    as_json: JsonLinesOption = False,
    db: StoreOption = None,
    interval_ms: IntervalOption = None,
) -> None:
    """Read a tegrastats log: summarise it with a verdict per session, print it as JSON lines, or store it."""
    from edgeprof.telemetry import TegrastatsImportError, import_log

    try:
        import_log(log, as_json, db, sys.stdout)
        if not as_json:
            for line in verdict_lines(_judge_file(log, interval_ms)):
                typer.echo(line)
    except TegrastatsImportError as exc:
        fail(str(exc))


def show_log_verdict(session: Any, sweep_id: int, fmt: str, interval_ms: float | None) -> None:
    """``analyse`` of an imported sweep: the verdict on its log, as a table or JSON."""
    from edgeprof.report.render.log import render_log_json, render_log_text
    from edgeprof.verdicts.log_store import judge_imported

    result = judge_imported(session, sweep_id, interval_ms)
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
