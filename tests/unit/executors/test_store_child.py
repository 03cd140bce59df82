"""What the sweep stores of a config's child processes (agent/sweep/loop.py): the run's peak RSS is the
largest of its children's, whatever order they end in. Synthetic results, no llama.cpp."""

from __future__ import annotations

from pathlib import Path

from edgeprof.executors import store_child
from edgeprof.runners import ChildResult
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Run


def _child(peak: float | None) -> ChildResult:
    return ChildResult(
        status="ok", reason=None, exit_code=0, signal_name=None, t_spawn=0.0, t_exit=0.0, peak_rss_mb=peak
    )


def test_peak_rss_of_a_run_is_the_maximum_over_its_children(tmp_path: Path) -> None:
    """Mutant: the merge of the children's peaks keeps the minimum."""
    engine = open_engine(tmp_path / "p.db")
    with new_session(engine) as session:
        run = Run()
        for peak in (120.0, None, 80.0):
            store_child(session, run, _child(peak), is_main=False)
        assert run.peak_rss_mb == 120.0
