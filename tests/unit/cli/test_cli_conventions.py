"""The CLI conventions a user expects, read from the Typer app itself: an example in every command's help
that names its own command (the ones a fresh process shows: tests/integration/test_cli_entry.py)."""

from __future__ import annotations

from typing import Any

import typer.main

from edgeprof.cli import app


def _commands(group: Any, prefix: str = "") -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for name, cmd in sorted(group.commands.items()):
        if hasattr(cmd, "commands"):  # a group (typer vendors click, so no isinstance on click's classes)
            found.extend(_commands(cmd, f"{prefix}{name} "))
        else:
            found.append((f"{prefix}{name}", cmd))
    return found


def test_every_command_has_an_example_in_its_help() -> None:
    root = typer.main.get_command(app)
    commands = _commands(root)
    assert len(commands) >= 9
    missing = [name for name, cmd in commands if "Example:" not in (cmd.epilog or "")]
    assert not missing, f"commands without an example in --help: {missing}"
    # The example names the command it belongs to, so it can be copied as it is.
    wrong = [name for name, cmd in commands if f"edgeprof {name}" not in (cmd.epilog or "")]
    assert not wrong, f"examples that do not show their own command: {wrong}"
