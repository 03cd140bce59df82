"""The command line: Typer apps that map options onto one call each (``edgeprof.cli:main`` is the console
script). The command modules share ``edgeprof.cli.common``; none of them imports another package at start-up,
so ``edgeprof --help`` loads typer and nothing heavy."""

from edgeprof.cli.app import app, main

__all__ = ["app", "main"]
