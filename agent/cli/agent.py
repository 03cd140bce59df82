"""``edgeprof agent``: the long-running daemon (systemd) that takes plans from a queue, one sweep at a time
(the daemon itself: edgeprof.daemon)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from edgeprof.cli.common import DbOption, fail, guard_write, int_range, open_db, seconds_range

QueueOption = Annotated[
    Path | None, typer.Option("--queue", help="Spool directory of plans (*.toml); done/ and failed/ inside.")
]
PlanOption = Annotated[Path | None, typer.Option("--plan", help="Run this one plan instead of a queue.")]
UntilOption = Annotated[str | None, typer.Option("--until", help="HH:MM after which no new config starts.")]
MinFreeOption = Annotated[
    int,
    typer.Option(
        "--min-free-mb",
        help="No new run below this much free disk for the DB (MiB).",
        callback=int_range("--min-free-mb", 0, 1 << 40),
    ),
]
OnceOption = Annotated[bool, typer.Option("--once", help="Process the queue, then exit (for a timer).")]
# A day between scans is already no queue; the bound keeps time.monotonic() + poll_s a finite deadline.
MAX_POLL_S = 86_400.0
# A scan reads a folder: ten a second is already more than any queue needs, and a smaller wait (1e-300)
# would keep a core busy polling.
MIN_POLL_S = 0.1
PollOption = Annotated[
    float,
    typer.Option(
        "--poll-s",
        help="Seconds between queue scans when idle.",
        callback=seconds_range("--poll-s", MAX_POLL_S, MIN_POLL_S),
    ),
]
SettleOption = Annotated[
    float,
    typer.Option("--settle-s", help="Take a dropped plan once unchanged this long (mv'd plans: at once)."),
]
NoTelemetryOption = Annotated[bool, typer.Option("--no-telemetry", help="No collectors, cooldown or idle.")]
WaitOption = Annotated[
    bool, typer.Option("--wait", help="If another agent serves this queue, wait instead of exit 2.")
]
PowerModeOption = Annotated[
    bool,
    typer.Option("--allow-power-mode-change", help="Let queued plans switch nvpmodel modes (plans cannot)."),
]
PushToOption = Annotated[
    str | None,
    typer.Option(
        "--push-to",
        envvar="EDGEPROF_PUSH_TO",
        help="Push each finished sweep to this central DB (background, retried; never blocks a sweep).",
    ),
]
CompactOption = Annotated[
    str | None,
    typer.Option("--compact-keep-raw", help="After each sweep, `db compact --keep-raw` this (e.g. 7d)."),
]
MetricsPortOption = Annotated[
    int | None,
    typer.Option(
        "--metrics-port", help="Serve Prometheus metrics at http://ADDR:PORT/metrics (0: any free port)."
    ),
]
MetricsAddrOption = Annotated[
    str, typer.Option("--metrics-addr", help="Address the metrics endpoint listens on (0.0.0.0: every one).")
]

FleetOption = Annotated[
    str | None,
    typer.Option("--fleet", envvar="EDGEPROF_FLEET", help="Take jobs from this central PostgreSQL's queue."),
]
LabelOption = Annotated[
    list[str] | None, typer.Option("--label", help="KEY=VALUE label of this board for selectors.")
]
AgentDeviceNameOption = Annotated[
    str | None, typer.Option("--device-name", help="This board's name in the fleet (default: the hostname).")
]
LeaseOption = Annotated[
    float,
    typer.Option("--lease-s", help="Fleet: a job lease; heartbeat every third.", min=1.0, max=3600.0),
]
ModelsDirOption = Annotated[
    Path | None, typer.Option("--models-dir", help="Fleet: where models are found and fetched to.")
]
# Where device facts are read (a fake device tree in tests, a chroot); not a user's option.
DeviceRootOption = Annotated[Path, typer.Option("--device-root", envvar="EDGEPROF_DEVICE_ROOT", hidden=True)]

VerboseOption = Annotated[
    bool, typer.Option("--verbose", "-v", help="Debug lines, and every library's (httpx's requests too).")
]

EPILOG = (
    "Example: edgeprof agent --queue /var/lib/edgeprof/queue --until 06:30  ·  "
    "edgeprof agent --plan plan.toml --once  ·  edgeprof agent --queue DIR --metrics-port 9464"
)


def agent(
    queue: QueueOption = None,
    plan: PlanOption = None,
    db: DbOption = None,
    until: UntilOption = None,
    min_free_mb: MinFreeOption = 500,
    once: OnceOption = False,
    poll_s: PollOption = 10.0,
    no_telemetry: NoTelemetryOption = False,
    wait: WaitOption = False,
    allow_power_mode_change: PowerModeOption = False,
    push_to: PushToOption = None,
    compact_keep_raw: CompactOption = None,
    metrics_port: MetricsPortOption = None,
    metrics_addr: MetricsAddrOption = "127.0.0.1",
    settle_s: SettleOption = 3.0,
    verbose: VerboseOption = False,
    fleet: FleetOption = None,
    label: LabelOption = None,
    device_name: AgentDeviceNameOption = None,
    lease_s: LeaseOption = 60.0,
    models_dir: ModelsDirOption = None,
    device_root: DeviceRootOption = Path("/"),
) -> None:
    """Long-running daemon (systemd): take plans from a queue (or a fleet's central queue), one sweep at a
    time, resume after a crash."""
    from edgeprof.daemon import AgentConfig, configure_logging

    config = AgentConfig(
        queue=_queue(queue, plan, fleet),
        plan=plan,
        until=_until(until),
        min_free_mb=min_free_mb,
        once=once,
        poll_s=poll_s,
        telemetry=not no_telemetry,
        wait=wait,
        allow_power_mode_change=allow_power_mode_change,
        push_to=_push_target(push_to),
        compact_keep_raw_s=_keep_raw_s(compact_keep_raw),
        metrics_port=_port(metrics_port),
        metrics_addr=metrics_addr,
        settle_s=_settle_s(settle_s),
        fleet=_fleet(fleet, label or [], device_name, lease_s, models_dir, device_root),
    )
    configure_logging(verbose)
    guard_write(db)
    raise typer.Exit(_serve(open_db(db), db, config, fleet))


def _serve(engine: Any, db: str | None, config: Any, fleet: str | None) -> int:
    """The agent's loop until it stops; its exit code. What stops it from starting is one error line."""
    from sqlalchemy.exc import SQLAlchemyError

    from edgeprof.daemon import FleetAgent, MetricsPortError, serve
    from edgeprof.safefs import QueueLocked, UnsafePath

    try:
        return serve(engine, db, config, FleetAgent if config.fleet is not None else None)
    except QueueLocked as exc:
        fail(f"{exc}; wait for it with --wait, or stop it")
    except MetricsPortError as exc:
        fail(str(exc))
    except UnsafePath as exc:  # the queue folder a symbolic link, or not a folder: never followed
        fail(f"--queue {exc.strerror or exc}")
    except SQLAlchemyError as exc:  # --fleet: the central database cannot be reached at start
        from edgeprof.storage.db import mask_url, scrub

        line = str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__]
        fail(f"--fleet {mask_url(fleet)}: {scrub(line[0], fleet)}")


def _settle_s(seconds: float) -> float:
    if not 0 <= seconds <= 3600:  # also refuses nan
        fail("--settle-s must be between 0 and 3600 seconds")
    return seconds


def _queue(queue: Path | None, plan: Path | None, fleet: str | None = None) -> Path | None:
    """``--queue``, checked together with ``--plan`` and ``--fleet``: exactly one of them, each must exist."""
    if sum(x is not None for x in (queue, plan, fleet)) != 1:
        fail("give exactly one of --queue DIR, --plan PLAN.toml or --fleet URL")
    if queue is not None and not queue.is_dir():
        fail(f"queue {queue}: not a directory")
    if plan is not None and not plan.is_file():
        fail(f"plan {plan}: no such file")
    return queue


def _fleet(
    url: str | None, labels: list[str], name: str | None, lease_s: float, models_dir: Path | None, root: Path
) -> Any:
    """The fleet options, checked now: a bad label or name is one line at start."""
    if url is None:
        return None
    from edgeprof.device.facts import DEVICE_NAME_ENV, device_name_problem
    from edgeprof.fleet.queue import FleetConfig
    from edgeprof.fleet.selector import SelectorError, parse_labels

    try:
        parsed = parse_labels(labels)
    except SelectorError as exc:
        fail(str(exc))
    if name is not None:
        problem = device_name_problem(name)
        if problem:
            fail(f"--device-name {name!r}: {problem}")
        os.environ[DEVICE_NAME_ENV] = name.strip()  # the sweeps' device row carries the same name
    return FleetConfig(_push_target(url) or url, parsed, lease_s, models_dir, root)


def _port(port: int | None) -> int | None:
    if port is not None and not 0 <= port <= 65535:
        fail(f"--metrics-port expects 0 to 65535, got {port}")
    return port


def _until(text: str | None) -> dt.time | None:
    from edgeprof.daemon import parse_until

    try:
        return parse_until(text)
    except ValueError as exc:
        fail(str(exc))


def _push_target(url: str | None) -> str | None:
    """``--push-to`` parsed now: a malformed URL is one line at start, not an error logged by the pusher
    after every sweep of the night."""
    if url is None:
        return None
    from edgeprof.storage.db import DatabaseError, db_url, parse_db_url

    try:
        parse_db_url(db_url(url, create_dir=False), url)
    except DatabaseError as exc:
        fail(f"--push-to: {exc}")
    return url


def _keep_raw_s(text: str | None) -> float | None:
    from edgeprof.storage.retention import parse_duration

    try:
        return parse_duration(text) if text is not None else None
    except ValueError as exc:
        fail(str(exc))


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(agent)
