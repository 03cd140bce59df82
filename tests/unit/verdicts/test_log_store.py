"""An imported log's verdict is judged once and stored (agent/verdicts/log_store.py): at import, with the
version of the judgement (``log_verdict.RULE_VERSION``); a read takes the stored verdict and never the
samples; a verdict of another version, another stated spacing or ``rejudge`` is judged again and stored;
a read-only reader judges in memory and writes nothing. SYNTHETIC logs (tests/support/synthetic_logs.py)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from support.synthetic_logs import Board, tegrastats_log

import edgeprof.verdicts.log_store as log_store
from edgeprof.daemon.status import gather_status, render_status
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.log_verdicts import LogVerdict
from edgeprof.telemetry import import_log
from edgeprof.verdicts import log_verdict


def imported(tmp_path: Path) -> tuple[Any, int]:
    """A SYNTHETIC tegrastats log that throttles, imported, and its verdict stored as the import does."""
    log = tegrastats_log(tmp_path / "t.log", Board(lines=300))
    db = str(tmp_path / "l.db")
    import_log(log, False, db, io.StringIO())
    engine = open_engine(db)
    with new_session(engine) as s:
        sweep_id = s.scalar(select(func.max(log_store.Sweep.id)))
        assert sweep_id is not None
        log_store.log_verdict_of(s, sweep_id)  # what `import-log --db` does once the samples are stored
    return engine, sweep_id


def count_judgements(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = log_store.judge_log

    def counted(inputs: Any) -> dict[str, Any]:
        calls.append(1)
        return real(inputs)

    monkeypatch.setattr(log_store, "judge_log", counted)
    return calls


def bump_rule(monkeypatch: pytest.MonkeyPatch) -> int:
    new = log_verdict.RULE_VERSION + 1
    monkeypatch.setattr(log_store, "RULE_VERSION", new)
    return new


def test_the_verdict_is_stored_with_the_rule_version_and_read_without_judging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, sweep_id = imported(tmp_path)
    calls = count_judgements(monkeypatch)
    with new_session(engine) as s:
        row = s.scalar(select(LogVerdict).where(LogVerdict.sweep_id == sweep_id))
        assert row is not None and row.rule_version == log_verdict.RULE_VERSION and row.interval_ms is None
        for store in (True, False):  # analyse (a writer) and report (a reader) alike
            result = log_store.log_verdict_of(s, sweep_id, store=store)
            assert result["sessions"][0]["verdict"] == "throttled"
            assert result["rule_version"] == log_verdict.RULE_VERSION
    assert calls == []  # read twice, judged never


def test_another_rule_version_is_judged_again_once_and_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, sweep_id = imported(tmp_path)
    calls = count_judgements(monkeypatch)
    new = bump_rule(monkeypatch)
    with new_session(engine) as s:
        assert log_store.stored_log_verdict(s, sweep_id)["stale"] is True  # type: ignore[index]
        # a reader that cannot write judges in memory, and stores nothing
        assert log_store.log_verdict_of(s, sweep_id, store=False)["rule_version"] == new
        assert s.scalar(select(LogVerdict.rule_version)) == new - 1
        assert len(calls) == 1
        # a writer stores the new judgement; the next read takes it
        assert log_store.log_verdict_of(s, sweep_id)["rule_version"] == new
        assert log_store.log_verdict_of(s, sweep_id)["rule_version"] == new
        assert s.scalar(select(LogVerdict.rule_version)) == new
        assert s.scalar(select(func.count()).select_from(LogVerdict)) == 1
    assert len(calls) == 2


def test_rejudge_and_a_stated_spacing_judge_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine, sweep_id = imported(tmp_path)
    calls = count_judgements(monkeypatch)
    with new_session(engine) as s:
        log_store.log_verdict_of(s, sweep_id, rejudge=True)
        assert len(calls) == 1
        log_store.log_verdict_of(s, sweep_id, 500.0)
        assert len(calls) == 2 and s.scalar(select(LogVerdict.interval_ms)) == 500.0
        log_store.log_verdict_of(s, sweep_id)  # no spacing stated: the one it was judged at
        log_store.log_verdict_of(s, sweep_id, 500.0)
        assert len(calls) == 2
        log_store.log_verdict_of(s, sweep_id, rejudge=True)  # judged again at the spacing it was stated
        assert len(calls) == 3 and s.scalar(select(LogVerdict.interval_ms)) == 500.0


def test_status_reads_the_stored_verdict_and_says_when_it_is_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, sweep_id = imported(tmp_path)
    calls = count_judgements(monkeypatch)
    with new_session(engine) as s:
        status = gather_status(s)
        assert status["sweep"]["log_verdict"]["sessions"][0]["verdict"] == "throttled"
        assert "log session 1: throttled: " in render_status(status)
        bump_rule(monkeypatch)
        text = render_status(gather_status(s))
    assert calls == []  # status never judges a log
    assert f"log verdict: by an older judgement: `edgeprof analyse --sweep {sweep_id}`" in text
    assert "log session 1 (as judged then): throttled" in text
