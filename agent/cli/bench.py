"""``edgeprof bench`` (llama-bench's command line, measured as an edgeprof sweep, printed as llama-bench
prints) and ``edgeprof import-llama-bench`` (llama-bench's own json/jsonl output stored as a sweep).

``bench`` reads llama-bench's flags itself (its short flags such as -ngl or -ctk are not Typer's), builds
the plan in code and runs it through the same sweep entry point as ``run``: each config in its own child
process, telemetry, stored like any sweep. Progress goes to stderr, so that stdout is llama-bench's output
alone and pipes into llama-bench's tooling as it is.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from edgeprof import __version__
from edgeprof.cli.common import (
    EXIT_INTERRUPTED,
    DbOption,
    JsonOption,
    fail,
    failed_configs_line,
    guard_write,
    open_db,
    sweep_exit_code,
)

NoTelemetryOption = Annotated[
    bool,
    typer.Option("--no-telemetry", help="No sampling of temperature, clocks, power during the tests."),
]
BENCH_HELP = (
    "Run llama-bench's command line as an edgeprof sweep; print llama-bench's output.\n\n"
    "Flags as llama-bench's (comma lists, ranges first-last+step or first-last*factor; a flag given twice "
    "adds its values): -m MODEL, -p N (512), -n N (128), -pg PP,TG, -d N (0), -t N (physical cores), "
    "-ngl N (-1 = all), -b N (2048), -ub N (512), -fa on|off|auto (auto), -ctk/-ctv TYPE (f16), -r N (5), "
    "-nkvo 0|1 (0), -nopo 0|1 (0), --poll 0..100 (50), --delay S (0), --no-warmup, "
    "-o md|csv|json|jsonl|sql (md), -oe FMT (a copy on stderr), --progress and -v (progress is always on "
    "stderr), -C HEX (0x0), --cpu-strict 0|1 (0), --prio -1..3 (0); -embd 0 only.\n\n"
    "Exit 0 when every config ran, 1 when any failed, 2 on a bad flag."
)
BENCH_EPILOG = (
    "Example: edgeprof bench -m model.gguf -p 512 -n 128 -t 4,8   ·   "
    "edgeprof bench -m model.gguf -p 128 -n 32 -r 3 -o json > bench.json"
)
FileArgument = Annotated[Path, typer.Argument(help="llama-bench -o json or -o jsonl output.")]


def bench(ctx: typer.Context, db: DbOption = None, no_telemetry: NoTelemetryOption = False) -> None:
    from edgeprof.plan import PlanError
    from edgeprof.report.llamabench import BenchArgsError, bench_plan, parse_bench_args, sweep_records
    from edgeprof.report.render.llama_bench import FORMATS
    from edgeprof.storage.db import new_session

    if "-h" in ctx.args:  # llama-bench's own help flag
        typer.echo(ctx.get_help())
        raise typer.Exit()
    try:
        args = parse_bench_args(ctx.args)
        plan = bench_plan(args)
    except BenchArgsError as exc:
        fail(str(exc))
    except PlanError as exc:
        fail("; ".join(exc.problems))
    guard_write(db)
    engine = open_db(db)
    outcome = _run_bench(engine, plan, telemetry=not no_telemetry)
    with new_session(engine) as session:
        records = sweep_records(session, outcome.sweep_id)
    sys.stdout.write(FORMATS[args.output](records))
    sys.stdout.flush()
    if args.output_err is not None:
        sys.stderr.write(FORMATS[args.output_err](records))
    line = failed_configs_line(outcome.counts)
    if line is not None:
        typer.echo(f"edgeprof: sweep {outcome.sweep_id}: {line}", err=True)
    raise typer.Exit(sweep_exit_code(outcome.counts))


def _run_bench(engine: Any, plan: Any, *, telemetry: bool) -> Any:
    """The sweep, as ``run`` runs one (new every time, as each llama-bench call is), progress on stderr."""
    from edgeprof.sweep import LeaseHeld, SweepAborted, Telemetry, run_plan

    def make_telemetry(sweep_id: int) -> Telemetry:
        return Telemetry(engine, sweep_id, plan.collect, plan.cooldown)

    typer.echo(f"edgeprof {__version__}: llama-bench, {plan.n_specs()} configs", err=True)
    try:
        outcome = run_plan(
            engine,
            plan,
            new_sweep=True,
            out=sys.stderr,
            telemetry=make_telemetry if telemetry else None,
            # no memory-bandwidth probe (1-3 s of a 256-MiB copy loop before the first test): llama-bench's
            # answer does not need it, and `edgeprof run` measures it for the report's share of the peak
            bandwidth_probe=None,
        )
    except LeaseHeld as exc:
        fail(f"{exc} (the same bench command runs elsewhere; wait for it)")
    except SweepAborted as exc:
        fail(str(exc))
    summary = ", ".join(f"{n} {status}" for status, n in sorted(outcome.counts.items())) or "nothing to do"
    typer.echo(f"sweep {outcome.sweep_id}: {summary}", err=True)
    if outcome.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    return outcome


def import_llama_bench(file: FileArgument, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Store llama-bench's own json/jsonl output as a sweep, marked imported (no telemetry)."""
    from edgeprof.report.llamabench import LlamaBenchImportError
    from edgeprof.report.llamabench import import_llama_bench as store
    from edgeprof.storage.db import new_session

    guard_write(db)
    engine = open_db(db)
    with new_session(engine) as session:
        try:
            result = store(session, file)
        except LlamaBenchImportError as exc:
            fail(str(exc))
        session.commit()
    if as_json:
        typer.echo(json.dumps({"file": str(file), "sweep_id": result.sweep_id, "tests": result.n_records,
                               "samples": result.n_samples, "imported": True}, indent=2))  # fmt: skip
        return
    typer.echo(
        f"imported {file}: sweep {result.sweep_id}, {result.n_records} tests, {result.n_samples} samples "
        "(marked imported: no telemetry)"
    )


def register(app: typer.Typer) -> None:
    app.command(
        help=BENCH_HELP,
        epilog=BENCH_EPILOG,
        # llama-bench's flags pass through to parse_bench_args untouched, in order
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )(bench)
    app.command(
        "import-llama-bench", epilog="Example: edgeprof import-llama-bench bench.json   (llama-bench -o json)"
    )(import_llama_bench)
