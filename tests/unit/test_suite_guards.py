"""The suite cannot silently shrink: a capture missing from the repository fails instead of skipping, and
every test runs under a timeout of minutes (a hang fails, never blocks the run)."""

from __future__ import annotations

import pytest
from support.captures import capture_path, read_capture


def test_a_missing_capture_fails_instead_of_skipping() -> None:
    """The captures live in the repository: one that is missing is a broken checkout, never a quiet skip."""
    with pytest.raises(pytest.fail.Exception, match="missing from the repository"):
        capture_path("no-such-capture.txt")
    assert read_capture("thermal_zone-doc-example_kernel.txt")  # and the real ones are there


def test_every_test_has_a_timeout(request: pytest.FixtureRequest) -> None:
    """pytest-timeout is active with a bound of minutes: a test losing its own timeout fails, never hangs."""
    assert request.config.pluginmanager.hasplugin("timeout")
    bound = float(request.config.getini("timeout"))
    assert 0 < bound <= 600
