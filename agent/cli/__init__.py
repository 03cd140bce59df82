"""The command line: Typer apps that map options onto one call each."""

from edgeprof.cli.app import main

__all__ = ["main"]
