"""The sweep's surface: an unknown option is refused before anything runs, and a failed run's progress line
names its status and reason (the package's names: tests/unit/test_package_exports.py)."""

from __future__ import annotations

import pytest

from edgeprof.storage.models import Run
from edgeprof.sweep import describe_outcome, run_plan

pytestmark = pytest.mark.timeout(60)


def test_an_unknown_option_is_refused_before_anything_runs() -> None:
    with pytest.raises(TypeError, match="bogus"):
        run_plan(None, None, bogus=True)  # type: ignore[arg-type]


def test_a_failed_run_is_described_by_its_status_and_reason() -> None:
    run = Run(status="crashed", reason="killed by SIGKILL (OOM?)", runner="llama-server")
    assert describe_outcome(None, run) == "CRASHED: killed by SIGKILL (OOM?)"  # type: ignore[arg-type]
