"""The sweep loop (agent/sweep/loop.py) on real tiny models: a stop at any moment leaves nothing running
(SIGTERM to `edgeprof run`, a stop while telemetry stops, a full disk), cold starts are timed from the
spawn and stop after a failed one, timeouts count as finished, and the quants of one model form one group.

The mutant tests each break one line of the code on purpose (named in the docstring) that would pass
unnoticed without them."""

from __future__ import annotations

import io
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, select, text
from support.plans import plan_toml
from support.runs import children_of, clean_env, running_runs, two_quant_plan, wait_for

from edgeprof.gguf import read_gguf_info
from edgeprof.plan import expand, parse_plan
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Measurement, Phase, Run, Sweep, SweepLease
from edgeprof.sweep import SweepAborted, model_group, run_plan


def make_plan(tmp_path: Path, models: dict[str, Path], cold: int = 1, timeout: float = 60) -> Any:
    """The two-quant plan; ``cold_cache = "keep"``: the model's pages are not dropped before a cold start."""
    text = two_quant_plan(
        models, name="mut", timeout=timeout, repeat={"cold": cold}, run={"cold_cache": "keep"}
    )
    return parse_plan(text, source=str(tmp_path / "p.toml"), base=tmp_path)


def test_sigterm_to_run_marks_the_run_and_sweep_interrupted(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    """`edgeprof run`'s own SIGTERM handler: without it the process dies and the sweep stays running."""
    db = tmp_path / "t.db"
    plan = tmp_path / "plan.toml"
    plan.write_text(two_quant_plan(tiny_models, timeout=300))
    proc = subprocess.Popen(
        [sys.executable, "-m", "edgeprof", "run", str(plan), "--db", str(db), "--no-telemetry"],
        env=clean_env("hang@decode:q8_0"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: running_runs(db) == 1 and children_of(proc.pid), what="a hanging worker")
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM sweep").fetchall() == [("interrupted",)]
        assert conn.execute("SELECT status FROM run").fetchall() == [("interrupted",)]


class StopWhileTelemetryStops:
    """A SIGTERM that lands while telemetry is being stopped, after the last config."""

    def __init__(self, _sweep_id: int) -> None:
        pass

    def start(self) -> None:
        pass

    def stop(self) -> None:
        raise KeyboardInterrupt

    def before_run(self, *_a: Any) -> None:
        pass

    def on_child_event(self, *_a: Any) -> None:
        pass

    def after_run(self, *_a: Any) -> None:
        pass


def test_a_stop_after_the_last_config_does_not_leave_the_sweep_running(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    engine = open_engine(tmp_path / "s.db")
    plan = parse_plan(two_quant_plan(tiny_models), source=str(tmp_path / "p.toml"), base=tmp_path)
    try:
        outcome = run_plan(
            engine, plan, out=io.StringIO(), env=clean_env(), telemetry=StopWhileTelemetryStops
        )
    except KeyboardInterrupt:
        pytest.fail("the stop escaped run_plan and left the sweep running")
    assert outcome.interrupted
    with new_session(engine) as session:
        assert session.get(Sweep, outcome.sweep_id).status == "interrupted"
        assert {r.status for r in session.scalars(select(Run))} == {"ok"}
        assert session.scalars(select(SweepLease)).one().released_at is not None


class FillTheDisk:
    """Before the second config, cap the database at its current size: SQLite's own 'database or disk is
    full' (SQLITE_FULL), as a full filesystem gives it."""

    def __init__(self, _sweep_id: int) -> None:
        self.n = 0

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def before_run(self, session: Any, *_a: Any) -> None:
        self.n += 1
        if self.n == 2:
            session.commit()
            engine = session.get_bind()
            pages = int(session.execute(text("PRAGMA page_count")).scalar())
            session.commit()

            def cap(dbapi_connection: Any, _record: Any) -> None:
                dbapi_connection.execute(f"PRAGMA max_page_count = {pages + 2}")

            event.listen(engine, "connect", cap)
            engine.dispose()  # every connection from now on is capped
            with engine.begin() as conn:
                conn.execute(text("CREATE TABLE filler (b BLOB)"))
            while True:  # use up the free space inside the file, too
                try:
                    with engine.begin() as conn:
                        conn.execute(text("INSERT INTO filler VALUES (zeroblob(512))"))
                except Exception:  # noqa: BLE001 - SQLITE_FULL: the disk is now full
                    break

    def on_child_event(self, *_a: Any) -> None:
        pass

    def after_run(self, *_a: Any) -> None:
        pass


def test_a_full_disk_mid_sweep_is_one_line_the_sweep_interrupted_and_finished_configs_kept(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    db = tmp_path / "full.db"
    engine = open_engine(db)
    # enough output per config that the second config's rows need new pages, which the full disk refuses;
    # a group per model: two conditions, not rivals measured interleaved (whose runs finish together)
    more = plan_toml(
        [
            {"path": str(tiny_models["Q8_0"]), "label": "q8", "group": "a"},
            {"path": str(tiny_models["Q4_K_M"]), "label": "q4", "group": "b"},
        ],
        name="hard",
        workloads=[{"name": "w", "prompt_tokens": 16, "n_predict": 64}],
        repeat={"cold": 1, "warmup": 0, "steady": 8},
        run={"timeout_s": 60},
    )
    plan = parse_plan(more, source=str(tmp_path / "p.toml"), base=tmp_path)
    with pytest.raises(SweepAborted) as info:
        run_plan(engine, plan, out=io.StringIO(), env=clean_env(), telemetry=FillTheDisk)
    message = str(info.value)
    assert "\n" not in message and "full" in message and "interrupted" in message, message
    engine.dispose()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM sweep").fetchall() == [("interrupted",)]
        statuses = [r[0] for r in conn.execute("SELECT status FROM run ORDER BY id")]
        assert statuses[0] == "ok" and "running" not in statuses
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_cold_start_counts_from_spawn_and_timeouts_are_finished(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    """Mutants: cold_start_ms measured from the load instead of the spawn; "timeout" missing from the
    finished statuses (the hung config would be re-run by every resume)."""
    engine = open_engine(tmp_path / "c.db")
    plan = make_plan(tmp_path, tiny_models, timeout=6)
    first = run_plan(engine, plan, out=io.StringIO(), env=clean_env("hang@decode:q8_0"))
    with new_session(engine) as s:
        runs = {r.model_label: r for r in s.scalars(select(Run))}
        assert runs["q8"].status == "timeout" and runs["q4"].status == "ok"
        q4 = runs["q4"].id
        cold = s.scalars(
            select(Measurement).where(Measurement.run_id == q4, Measurement.kind == "cold")
        ).one()
        load = s.scalars(select(Phase).where(Phase.run_id == runs["q4"].id, Phase.name == "load")).one()
        assert cold.cold_start_ms is not None and cold.load_ms is not None and cold.ttft_ms is not None
        assert cold.cold_start_ms >= cold.load_ms + cold.ttft_ms
        # From the spawn: process start and the llama.cpp import come before the load, so the cold start is
        # strictly longer than load start -> first token (an ordering of monotonic stamps, not a duration).
        assert cold.t_start_mono is not None
        from_load_ms = (cold.t_start_mono - load.t_start_mono) * 1000.0 + cold.ttft_ms
        assert cold.cold_start_ms > from_load_ms + 1.0  # 1 ms: float noise, far below any process start
    again = run_plan(engine, plan, out=io.StringIO(), env=clean_env())
    assert again.sweep_id == first.sweep_id and again.n_skipped == 2 and not again.counts


class CountStarts:
    def __init__(self, _sweep_id: int) -> None:
        self.starts: dict[int, int] = {}

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def before_run(self, *_a: Any) -> None:
        pass

    def on_child_event(self, run: Run, event: dict[str, Any]) -> None:
        if event.get("event") == "start":
            self.starts[run.id] = self.starts.get(run.id, 0) + 1

    def after_run(self, *_a: Any) -> None:
        pass


def test_a_failed_cold_start_stops_further_cold_starts(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    """Mutant: the loop over cold starts goes on after a child failed (cold = 2 would crash twice)."""
    engine = open_engine(tmp_path / "k.db")
    plan = make_plan(tmp_path, tiny_models, cold=2)
    made: list[CountStarts] = []

    def telemetry(sweep_id: int) -> CountStarts:
        made.append(CountStarts(sweep_id))
        return made[0]

    run_plan(engine, plan, out=io.StringIO(), env=clean_env("exit@load:q8_0"), telemetry=telemetry)
    with new_session(engine) as s:
        runs = {r.model_label: r for r in s.scalars(select(Run))}
    assert runs["q8"].status == "error" and runs["q4"].status == "ok"
    assert made[0].starts == {runs["q8"].id: 1, runs["q4"].id: 2}


def test_quants_of_one_model_form_one_group(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    """Mutant: the model group keyed on the file type, so every quant became its own reference."""
    plan = make_plan(tmp_path, tiny_models)
    specs = expand(plan, {m.path: "0" * 64 for m in plan.models})
    groups = {model_group(s, read_gguf_info(s.model.path)) for s in specs}
    assert len(groups) == 1
    f16 = read_gguf_info(tiny_models["F16"])
    assert model_group(specs[0], f16) in groups
