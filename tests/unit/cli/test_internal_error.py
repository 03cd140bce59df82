"""A fault of edgeprof's own reaches the user as one line and exit 70, never a traceback, unless asked for."""

from __future__ import annotations

import importlib

import pytest

# the module, not the Typer app the package exports under the same name
cli_app = importlib.import_module("edgeprof.cli.app")


def _broken() -> None:
    raise RuntimeError("a bug\nwith a second line")


def test_an_unexpected_exception_is_one_line_and_exit_70(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("EDGEPROF_DEBUG", raising=False)
    monkeypatch.setattr(cli_app, "app", _broken)
    with pytest.raises(SystemExit) as exit_info:
        cli_app.main()
    assert exit_info.value.code == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("edgeprof: internal error: RuntimeError: a bug\\nwith a second line")


def test_edgeprof_debug_shows_the_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEPROF_DEBUG", "1")
    monkeypatch.setattr(cli_app, "app", _broken)
    with pytest.raises(RuntimeError, match="a bug"):
        cli_app.main()
