"""The openai runner against a hostile target (support.hostile_server: drips, a gzip bomb, malformed and
absurd JSON): every config ends within the run's ``timeout_s`` (plus the bounded control replies), as a
kept and counted run whose status is never ``running``, with no exception; the next config runs."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from sqlalchemy import select
from support.hostile_cases import case
from support.hostile_server import hostile_server
from support.serving import foreign_plan_toml

from edgeprof.plan import parse_plan
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Run, ServingLevel
from edgeprof.sweep import run_plan

pytestmark = pytest.mark.timeout(180)

TIMEOUT_S = 20


def _run(tmp_path: Path, mode: str) -> tuple[list[Run], list[ServingLevel], float]:
    engine = open_engine(tmp_path / "s.db")
    with hostile_server(mode) as url:
        text = foreign_plan_toml(url, conc=[1, 2], requests=2).replace(
            "timeout_s = 120", f"timeout_s = {TIMEOUT_S}"
        )
        assert f"timeout_s = {TIMEOUT_S}" in text
        t0 = time.monotonic()
        outcome = run_plan(engine, parse_plan(text, base=tmp_path), out=io.StringIO(), env={})
        took = time.monotonic() - t0
    with new_session(engine) as s:
        runs = list(s.scalars(select(Run).where(Run.sweep_id == outcome.sweep_id)))
        levels = list(s.scalars(select(ServingLevel)))
        s.expunge_all()
    engine.dispose()
    return runs, levels, took


@pytest.mark.parametrize("hostile", [case("target-drips")], ids=lambda c: c.id)
@pytest.mark.parametrize("mode", ["drip-models", "drip-props", "drip-metrics"])
def test_a_target_that_drips_its_replies_never_holds_a_run_past_its_timeout(
    tmp_path: Path, mode: str, hostile: object
) -> None:
    runs, _levels, took = _run(tmp_path, mode)
    assert len(runs) == 2 and all(r.status != "running" for r in runs)  # both configs ran, both ended
    # two configs, each within timeout_s (the bounded control replies are inside it)
    assert took < 2 * (TIMEOUT_S + 10), took
    if mode == "drip-models":
        assert all(r.status == "error" and "no whole reply within" in (r.reason or "") for r in runs)


@pytest.mark.parametrize("hostile", [case("target-gzip-bomb")], ids=lambda c: c.id)
def test_a_gzip_bomb_from_the_target_is_refused_at_the_size_cap(tmp_path: Path, hostile: object) -> None:
    runs, _levels, _took = _run(tmp_path, "bomb-models")
    assert len(runs) == 2
    for run in runs:
        assert run.status == "error", run.reason
        assert "larger than 1048576 bytes once decoded" in (run.reason or ""), run.reason


@pytest.mark.parametrize("hostile", [case("target-malformed-json")], ids=lambda c: c.id)
@pytest.mark.parametrize(
    "mode",
    [
        "models-data-5",
        "models-deep",
        "props-nctx-huge",
        "sse-choices-5",
        "sse-deep",
        "sse-usage-huge",
        "sse-huge-line",
    ],
)
def test_malformed_or_absurd_replies_are_failed_or_checked_runs_never_exceptions(
    tmp_path: Path, mode: str, hostile: object
) -> None:
    runs, levels, _took = _run(tmp_path, mode)
    assert len(runs) == 2 and all(r.status in ("ok", "error", "timeout") for r in runs), [
        (r.status, r.reason) for r in runs
    ]
    if mode in ("sse-choices-5", "sse-deep", "sse-huge-line"):  # no usable chunk: every request failed
        assert all(r.status == "error" for r in runs)
    if mode == "sse-usage-huge":  # the absurd counts are dropped (counted from chunks), never stored
        assert all(r.status == "ok" for r in runs), [r.reason for r in runs]
    if mode == "props-nctx-huge":
        assert all("10000000000" not in (lv.props_json or "") for lv in levels)
