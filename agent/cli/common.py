"""What every command module shares: the ``--db``/``--device`` options, the one-line failure, the database
opener and the write guard, the user's data folder, the exit status of a sweep and the terminal's width.

Exit codes: 0 done (a sweep: every config it ran ended ``ok`` or ``skipped_memory``); 1 a sweep ran to its
end but some config failed to load, errored, crashed or timed out (``sweep_exit_code``); 2 bad input: every
expected failure (bad plan, missing file, unknown sweep, a database that cannot be opened) is one line
``edgeprof: error: ...`` on stderr; 130 interrupted (Ctrl-C, SIGTERM). Only typer and the standard library
are imported here: every command module imports this one, and ``edgeprof --help`` must not pay for
SQLAlchemy.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
import typer.core

EXIT_OK = 0
EXIT_CONFIGS_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
EXIT_INTERNAL_ERROR = 70  # sysexits' EX_SOFTWARE: a fault of edgeprof's own, not of the input
# A config that ended so did what the plan asked: measured, or refused up front because the memory model
# predicted the kernel would kill it (the plan asked for more than this device holds; the row says so).
SWEEP_OK_STATUSES = frozenset({"ok", "skipped_memory"})

DbOption = Annotated[
    str | None,
    typer.Option("--db", help="SQLite path or SQLAlchemy URL (default: $EDGEPROF_DB or the user data dir)."),
]
DeviceOption = Annotated[
    str | None,
    typer.Option("--device", help="Only this device's sweeps: hostname, board model or uid prefix."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]

# Every row id is an SQLite INTEGER (int64): a larger number from the command line would reach the driver
# as an OverflowError traceback, not a "no such sweep".
INT64_MAX = 2**63 - 1


def _flags_without_value(params: list[Any]) -> list[Any]:
    """A flag takes no value, so its help line shows none: Typer writes ``--wide <bool>`` for every boolean
    option (its own ``--help`` too) unless the option's metavar is set; an empty one shows nothing."""
    for param in params:
        if getattr(param, "is_flag", False) and getattr(param, "metavar", "") is None:
            param.metavar = ""
    return params


class FlagsCommand(typer.core.TyperCommand):
    """A command whose help shows a boolean option as the flag it is (see ``_flags_without_value``)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_without_value(super().get_params(ctx))


class FlagsGroup(typer.core.TyperGroup):
    """A command group whose help shows a boolean option as the flag it is, and whose usage errors (an
    unknown option, a bad choice, a missing argument) are one line ``edgeprof: error: ...`` and exit 2 like
    every other bad input, not a framed box of usage text."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_without_value(super().get_params(ctx))

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        def run(standalone: bool) -> Any:
            return super(FlagsGroup, self).main(
                args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=standalone,
                windows_expand_args=windows_expand_args, **extra,
            )  # fmt: skip

        if not standalone_mode:
            return run(False)
        # Click's base of every usage error, wherever this Typer keeps Click (its own copy from 0.29 on)
        click_exception: type[Exception] = next(
            c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"
        )
        try:
            rv = run(False)
        except typer.Abort:
            typer.echo("edgeprof: aborted", err=True)
            sys.exit(EXIT_CONFIGS_FAILED)
        except click_exception as exc:
            typer.echo(f"edgeprof: error: {usage_error_line(exc)}", err=True)
            sys.exit(getattr(exc, "exit_code", EXIT_BAD_INPUT))
        sys.exit(rv if isinstance(rv, int) else EXIT_OK)


def usage_error_line(exc: Any) -> str:
    """Click's message on one line, and where to read on: "No such option: --x (see edgeprof run --help)"."""
    message = " ".join(str(exc.format_message()).split())
    names: list[str] = []
    ctx = getattr(exc, "ctx", None)
    while ctx is not None and getattr(ctx, "parent", None) is not None:  # the root is "edgeprof" however run
        names.insert(0, str(ctx.info_name))
        ctx = ctx.parent
    return f"{message} (see {' '.join(['edgeprof', *names])} --help)"


class App(typer.Typer):
    """``typer.Typer`` whose groups and commands are ``FlagsGroup`` and ``FlagsCommand`` unless told
    otherwise: every command module registers onto an ``App`` and gets flags shown as flags for free."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", FlagsGroup)
        super().__init__(**kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", FlagsCommand)
        return super().command(*args, **kwargs)


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    typer.echo(f"edgeprof: error: {message}", err=True)
    raise typer.Exit(code)


def sweep_exit_code(counts: Mapping[str, int], *, interrupted: bool = False) -> int:
    """The exit status of a command that ran a sweep (``run``, ``demo``, ``bench``), from the number of
    configs it ran per final status: 130 when it was stopped, 1 when any config ended in anything but
    ``ok``/``skipped_memory`` (``load_failed``, ``error``, ``crashed``, ``timeout``, or a status this code
    does not know), else 0. Configs a resumed sweep skipped as already finished are not counted again:
    they were judged by the command that ran them."""
    if interrupted or counts.get("interrupted", 0) > 0:
        return EXIT_INTERRUPTED
    if any(n > 0 and status not in SWEEP_OK_STATUSES for status, n in counts.items()):
        return EXIT_CONFIGS_FAILED
    return EXIT_OK


def failed_configs_line(counts: Mapping[str, int]) -> str | None:
    """What exit 1 means, for stderr: "2 of 6 configs did not end ok (1 crashed, 1 timeout)"; None when
    every config ended ok."""
    failed = {s: n for s, n in sorted(counts.items()) if n > 0 and s not in SWEEP_OK_STATUSES}
    if not failed:
        return None
    detail = ", ".join(f"{n} {s}" for s, n in failed.items())
    return f"{sum(failed.values())} of {sum(counts.values())} configs did not end ok ({detail})"


def terminal_width() -> int | None:
    """A terminal's own width; piped (a file, a pager) only when COLUMNS says so: a script reading the
    output gets whole lines."""
    import shutil

    if sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit():
        return shutil.get_terminal_size().columns
    return None


def echo_wrapped(line: str) -> None:
    """A line of prose output wrapped to the terminal's width (whole when piped, as ``terminal_width``)."""
    width = terminal_width()
    if width is None or len(line) <= width:
        typer.echo(line)
        return
    typer.echo(textwrap.fill(line, width, subsequent_indent="  ", break_on_hyphens=False))


# "  key   value": the key column of doctor's lines, up to where their values start.
_KEY_COLUMN = re.compile(r"(\s*\S+(?: \S+)*\s{2,})\S")


def fit_text(text: str, width: int | None) -> str:
    """Each line of ``text`` wrapped to ``width`` (None: as it is), as the report wraps its notes: the rest
    of a "key  value" line under its value, of any other line two more than its start, never broken at
    hyphens. A single word longer than the width (a long path) is broken too: every line fits."""
    if width is None:
        return text
    out: list[str] = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        key = _KEY_COLUMN.match(line)
        indent = len(key.group(1)) if key else len(line) - len(line.lstrip()) + 2
        indent = min(indent, width // 2)  # room for the value
        out += textwrap.wrap(line, width, subsequent_indent=" " * indent, break_on_hyphens=False) or [line]
    return "\n".join(out)


def _shown(limit: float) -> str:
    return "2^63-1" if limit == INT64_MAX else f"{limit:g}"


def int_range(option: str, low: int = 1, high: int = INT64_MAX) -> Callable[[Any], Any]:
    """A Typer callback: ``option`` (an int, or a list of them) from ``low`` to ``high``, else one line."""

    def check(value: Any) -> Any:
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if item is not None and not low <= item <= high:
                fail(f"{option} {item}: must be between {_shown(low)} and {_shown(high)}")
        return value

    return check


def seconds_range(option: str, high: float, low: float = 0.0) -> Callable[[Any], Any]:
    """A Typer callback: a finite number of seconds above 0 (at least ``low`` where given) and at most
    ``high`` (nan passes every comparison, and a wait of 0 or less, or of 1e-300, would poll without
    sleeping)."""

    def check(value: Any) -> Any:
        if value is not None and not (math.isfinite(value) and 0 < value <= high and value >= low):
            above = f"at least {low:g}" if low > 0 else "above 0"
            fail(f"{option} {value}: must be a finite number of seconds {above} and at most {high:g}")
        return value

    return check


# The line spacing a user may state for a log (tegrastats' --interval is in ms): a day between lines is no
# log of a run any more, and inf, nan or 1e308 would make every time infinite.
MAX_INTERVAL_MS = 86_400_000.0


def number_range(option: str, low: float, high: float, unit: str = "") -> Callable[[Any], Any]:
    """A Typer callback: a finite number from ``low`` to ``high`` (click's own range lets nan and, without a
    maximum, inf and 1e308 through)."""

    def shown(x: float) -> str:
        return f"{x:.0f}" if x.is_integer() and abs(x) < 1e15 else f"{x:g}"

    def check(value: Any) -> Any:
        if value is not None and not (math.isfinite(value) and low <= value <= high):
            fail(f"{option} {value}: must be a finite number from {shown(low)} to {shown(high)}{unit}")
        return value

    return check


SweepOption = Annotated[
    int | None,
    typer.Option("--sweep", help="Sweep id (default: the latest).", callback=int_range("--sweep")),
]


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


def guard_write(db: str | None) -> None:
    """Before a command writes: refuse a non-edgeprof, damaged or unwritable SQLite file, so that nothing
    is ever added to someone else's file or written into a database that would then fail its checks."""
    from edgeprof.storage.db import default_db_path
    from edgeprof.storage.guard import StorageGuardError, check_before_write, sqlite_path_of

    path = sqlite_path_of(db, default_db_path())
    if path is None:
        return
    try:
        check_before_write(path)
    except StorageGuardError as exc:
        fail(str(exc))


def guard_read(db: str | None) -> None:
    """Before a command reads: refuse another application's SQLite file in one line (instead of "run db
    upgrade"), through a read-only connection that changes nothing in it."""
    from edgeprof.storage.guard import StorageGuardError, check_before_read

    path = sqlite_file(db)
    if path is None:
        return
    try:
        check_before_read(path)
    except StorageGuardError as exc:
        fail(str(exc))


def open_db(db: str | None, *, read_only: bool = False, migrate: bool = True) -> Any:
    """The engine of ``db``. Writers migrate to the head; readers (read_only) never migrate or write, so a
    mistyped ``--db`` creates nothing and a central database is never changed by a look at it, and refuse
    a foreign SQLite file. Every expected failure is one line (password masked), exit 2."""
    from sqlalchemy.exc import SQLAlchemyError

    from edgeprof.storage.db import DatabaseError, mask_url, open_engine, scrub
    from edgeprof.storage.migrations import SchemaOutdatedError, SchemaTooNewError

    if read_only:
        guard_read(db)
    try:
        return open_engine(db, read_only=read_only, migrate=migrate)
    except DatabaseError as exc:
        fail(scrub(str(exc), db))
    except (SchemaTooNewError, SchemaOutdatedError) as exc:
        fail(f"{mask_url(db)}: {scrub(str(exc), db)}")
    except (SQLAlchemyError, OSError) as exc:
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__]
        if "malformed" in first[0] or "not a database" in first[0]:  # a damaged file: say how to recover
            from edgeprof.storage.guard import describe_sqlite_error

            fail(describe_sqlite_error(scrub(first[0], db), mask_url(db)))
        fail(f"cannot open database {mask_url(db)}: {scrub(first[0], db)}")


def sqlite_file(db: str | None) -> Path | None:
    """The SQLite file ``db`` names (the default database when None); None for a server URL."""
    from edgeprof.storage.db import default_db_path
    from edgeprof.storage.guard import sqlite_path_of

    return sqlite_path_of(db, default_db_path())


def sweep_of_device(session: Any, sweep: int | None, device: str) -> int:
    """``--device``: the device's latest sweep, or check that the given one is that device's (a central
    database holds the sweeps of many devices)."""
    from edgeprof.fleet import check_sweep_device, latest_sweep_of

    if sweep is None:
        found = latest_sweep_of(session, device)
        if found is None:
            fail(f"no sweeps of a device called {device!r} in this database (see `edgeprof sweeps`)")
        return found
    if not check_sweep_device(session, sweep, device):
        fail(f"sweep {sweep} is not a sweep of device {device!r} (see `edgeprof sweeps --device`)")
    return sweep
