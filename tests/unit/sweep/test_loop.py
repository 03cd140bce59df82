"""The sweep package's surface: every public name resolves to the object of the module it lives in (the
package imports each on first use, so ``edgeprof status`` never loads a sweep's executors), an unknown
option is refused before anything runs, and a failed run's progress line names its status and reason."""

from __future__ import annotations

import importlib

import pytest

import edgeprof.executors
import edgeprof.sweep
from edgeprof.storage.models import Run
from edgeprof.sweep import describe_outcome, run_plan

pytestmark = pytest.mark.timeout(60)


def test_every_public_name_is_the_object_of_its_module() -> None:
    for name in edgeprof.sweep.__all__:
        module, attr = edgeprof.sweep._HOMES[name]
        home = importlib.import_module(f"edgeprof.sweep.{module}")
        value = getattr(edgeprof.sweep, name)
        assert value is getattr(home, attr), name
        # the name it has in its module (the lease's ``acquire`` says what it acquires here)
        assert value.__name__ == ("acquire" if name == "acquire_lease" else name)
    assert set(edgeprof.sweep.__all__) == set(edgeprof.sweep._HOMES)
    for name in edgeprof.executors.__all__:
        assert getattr(edgeprof.executors, name) is not None, name
    for package in (edgeprof.sweep, edgeprof.executors):
        with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
            _ = package.nonesuch  # type: ignore[attr-defined]


def test_an_unknown_option_is_refused_before_anything_runs() -> None:
    with pytest.raises(TypeError, match="bogus"):
        run_plan(None, None, bogus=True)  # type: ignore[arg-type]


def test_a_failed_run_is_described_by_its_status_and_reason() -> None:
    run = Run(status="crashed", reason="killed by SIGKILL (OOM?)", runner="llama-server")
    assert describe_outcome(None, run) == "CRASHED: killed by SIGKILL (OOM?)"  # type: ignore[arg-type]
