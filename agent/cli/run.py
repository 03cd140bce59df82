"""``edgeprof run`` (a plan's sweep, resumed when run again) and ``edgeprof demo`` (the built-in plan on
demo models, then its report).

A run that fails inside llama.cpp is data, stored and reported, not an error of the command: the sweep goes
on to its end. Only then does the exit status say so (1, ``sweep_exit_code``), so a CI job or a timer can
tell a sweep whose configs failed from one that measured everything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from edgeprof import __version__
from edgeprof.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    DbOption,
    data_dir,
    fail,
    failed_configs_line,
    guard_write,
    open_db,
    sweep_exit_code,
)
from edgeprof.cli.models import DemoSizeChoice, build_demo
from edgeprof.safetext import safe_text

PlanArgument = Annotated[Path, typer.Argument(help="The TOML plan to run.")]
NewOption = Annotated[bool, typer.Option("--new", help="Start a new sweep instead of resuming this plan's.")]
RetryFailedOption = Annotated[
    bool, typer.Option("--retry-failed", help="Run again the configs that failed last time.")
]
CheckOption = Annotated[
    bool, typer.Option("--check", help="Validate the plan and list the configs; run nothing.")
]
NoTelemetryOption = Annotated[
    bool,
    typer.Option("--no-telemetry", help="No sampling of temperature, clocks, power; no cooldown or idle."),
]
WaitOption = Annotated[
    bool, typer.Option("--wait", help="If another process runs this plan, wait for it instead of exit 2.")
]

RUN_EPILOG = (
    "Example: edgeprof run plan.toml --check   (validate, list configs)  ·  "
    "edgeprof run plan.toml --db results.db"
)
DEMO_EPILOG = "Example: edgeprof demo   (about a minute on 2 cores)  ·  edgeprof demo --size tiny"


def run(
    plan: PlanArgument,
    db: DbOption = None,
    new: NewOption = False,
    retry_failed: RetryFailedOption = False,
    check: CheckOption = False,
    no_telemetry: NoTelemetryOption = False,
    wait: WaitOption = False,
) -> None:
    """Run a plan's sweep; run it again to resume (finished configs are skipped)."""
    from edgeprof.plan import PlanError, load_plan

    try:
        parsed = load_plan(plan)
    except PlanError as exc:
        _print_plan_problems(exc.lines())
        raise typer.Exit(EXIT_BAD_INPUT) from None
    if check:
        typer.echo(f"plan {parsed.name!r} is valid: {parsed.n_specs()} configs")
        # A model's own workloads make the count differ from model to model: say so, model by model.
        for label, n in parsed.specs_per_model().items():
            typer.echo(safe_text(f"  {label}: {n} configs"))  # a label is a file name: shown, never acted on
        return
    guard_write(db)
    engine = open_db(db)
    outcome = run_sweep(
        engine, parsed, new=new, retry_failed=retry_failed, telemetry=not no_telemetry, wait=wait
    )
    exit_as_sweep(outcome)


def _print_plan_problems(lines: list[str]) -> None:
    """Every problem of the plan on its own line, and how many there were when more than one."""
    for line in lines:
        typer.echo(f"edgeprof: error: {safe_text(line)}", err=True)
    if len(lines) > 1:
        typer.echo(f"edgeprof: {len(lines)} problems in the plan; nothing was run", err=True)


def exit_as_sweep(outcome: Any) -> None:
    """Exit as ``sweep_exit_code`` says for this sweep's outcome (nothing to do when it is 0); with exit 1,
    one line on stderr says which configs did not end ok."""
    code = sweep_exit_code(outcome.counts, interrupted=outcome.interrupted)
    if code == 0:
        return
    why = failed_configs_line(outcome.counts) if code != EXIT_INTERRUPTED else None
    if why is not None:
        typer.echo(f"edgeprof: sweep {outcome.sweep_id}: {why}; `edgeprof report` says why", err=True)
    raise typer.Exit(code)


def run_sweep(
    engine: Any, parsed: Any, *, new: bool, retry_failed: bool, telemetry: bool = True, wait: bool = False
) -> Any:
    """Run ``parsed`` into ``engine`` with progress and the summary line on stdout; returns the sweep's
    outcome (``edgeprof.sweep.SweepOutcome``: its id, the configs per status, whether it was stopped), for
    ``exit_as_sweep``."""
    from edgeprof.gguf import probe_bandwidth
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
            bandwidth_probe=probe_bandwidth,  # once per sweep: the report's share of the bandwidth limit
        )
    except LeaseHeld as exc:
        fail(f"plan {parsed.source}: {exc} (wait for it with --wait, or stop it)")
    except SweepAborted as exc:
        fail(str(exc))
    summary = ", ".join(f"{n} {status}" for status, n in sorted(outcome.counts.items())) or "nothing to do"
    typer.echo(f"sweep {outcome.sweep_id}: {summary}")
    return outcome


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

DemoSizeOption = Annotated[DemoSizeChoice, typer.Option("--size", help="Demo model size.")]
ModelsDirOption = Annotated[Path | None, typer.Option("--models-dir", help="Where the demo GGUFs live.")]


def demo(
    db: DbOption = None,
    size: DemoSizeOption = DemoSizeChoice.small,
    models_dir: ModelsDirOption = None,
) -> None:
    """Build the demo models if missing, sweep Q8_0/Q5_K_M/Q4_K_M x two ctx sizes, print the report."""
    from edgeprof.plan import PlanError, default_threads, parse_plan
    from edgeprof.report import build_rows, render_table
    from edgeprof.safefs import replace_file
    from edgeprof.storage.db import new_session

    out = models_dir or data_dir() / "models"
    paths = build_demo(out, size.value, force=False)
    text = DEMO_PLAN.format(
        size=size.value, q8=paths["Q8_0"], q5=paths["Q5_K_M"], q4=paths["Q4_K_M"], threads=default_threads()
    )
    plan_path = out / f"demo-{size.value}.toml"
    replace_file(plan_path, text.encode())  # never through a symlink planted in the models folder
    try:
        parsed = parse_plan(text, source=str(plan_path), base=out)
    except PlanError as exc:
        fail("; ".join(exc.lines()))
    guard_write(db)
    engine = open_db(db)
    outcome = run_sweep(engine, parsed, new=True, retry_failed=False)
    if outcome.interrupted:  # stopped: no report of a half sweep
        raise typer.Exit(EXIT_INTERRUPTED)
    with new_session(engine) as session:
        typer.echo("")
        typer.echo(render_table(build_rows(session, outcome.sweep_id)))
    exit_as_sweep(outcome)  # a config that failed is in the report above, and in the exit status


def register_run(app: typer.Typer) -> None:
    app.command(epilog=RUN_EPILOG)(run)


def register_demo(app: typer.Typer) -> None:
    app.command(epilog=DEMO_EPILOG)(demo)
