"""The CLI conventions a user expects, read from the Typer app itself: an example in every command's help
that names its own command (the ones a fresh process shows: tests/integration/test_cli_entry.py)."""

from __future__ import annotations

from typing import Annotated, Any

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


def _help_pages() -> dict[str, str]:
    """Every group's and command's ``--help``, the root's included, as a user's terminal shows it."""
    from typer.testing import CliRunner

    root = typer.main.get_command(app)
    paths = [[]] + [name.split() for name, _cmd in _commands(root)]
    paths += [[name] for name, cmd in root.commands.items() if hasattr(cmd, "commands")]
    pages = {}
    for path in paths:
        result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (path, result.output)
        pages[" ".join(path) or "edgeprof"] = result.output
    return pages


def test_boolean_options_are_shown_as_flags() -> None:
    """A flag takes no value: its help line names no type (Typer wrote ``--wide <bool>``, even
    ``--help <bool>``)."""
    pages = _help_pages()
    assert len(pages) >= 20 and "report" in pages and "db compact" in pages
    assert [name for name, text in pages.items() if "<bool>" in text] == []
    # the flags are still there, the valued options still name their type
    assert "--wide" in pages["report"] and "--show-output" in pages["report"]
    assert "--vacuum" in pages["db compact"] and "--no-vacuum" in pages["db compact"]
    assert "<int>" in pages["report"] and "<str>" in pages["report"]


def test_a_command_registered_later_gets_flags_too() -> None:
    """Command modules register onto the app; one added by another module inherits the flag display."""
    from typer.testing import CliRunner

    from edgeprof.cli.common import App

    extra = App()

    @extra.command()
    def probe(loud: Annotated[bool, typer.Option("--loud", help="Say it.")] = False) -> None:
        typer.echo(f"loud={loud}")

    shown = CliRunner().invoke(extra, ["--help"], env={"COLUMNS": "120"})
    assert "--loud" in shown.output and "<bool>" not in shown.output
    assert CliRunner().invoke(extra, ["--loud"]).output.strip() == "loud=True"
