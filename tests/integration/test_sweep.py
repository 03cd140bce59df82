"""End to end on real tiny GGUF models: sweeps, resume, and every way a child can die leaving a stored row."""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from support.plans import plan_toml
from support.runs import sigint_as_at_a_terminal

from edgeprof.plan import parse_plan
from edgeprof.report import build_rows
from edgeprof.runners import FAULT_ENV
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Measurement, Phase, Run, Sweep
from edgeprof.sweep import run_plan

pytestmark = pytest.mark.llama

def plan_text(models: dict[str, Path], timeout: float = 60, a: Path | None = None, **matrix: Any) -> str:
    """Two small configs: the Q8_0 model (or ``a``, a copy of it) as q8, the Q4_K_M one as q4."""
    entries = {"q8": a or models["Q8_0"], "q4": models["Q4_K_M"]}
    return plan_toml(entries, name="e2e", matrix=matrix, run={"timeout_s": timeout})


def make_plan(
    tmp_path: Path, models: dict[str, Path], timeout: float = 60, copy: bool = False, **matrix: Any
):
    a = models["Q8_0"]
    if copy:  # a private copy the test may damage
        a = Path(shutil.copy(a, tmp_path / a.name))
    text = plan_text(models, timeout, a, **matrix)
    return parse_plan(text, source=str(tmp_path / "plan.toml"), base=tmp_path)


def env_with(fault: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    return env


def runs_by_label(engine, sweep_id: int) -> dict[str, Run]:
    with new_session(engine) as s:
        runs = s.scalars(select(Run).where(Run.sweep_id == sweep_id).order_by(Run.id)).all()
        for r in runs:
            _ = r.measurements
        return {r.model_label: r for r in runs}


def test_sweep_stores_cold_and_steady_apart_and_resume_adds_nothing(
    tmp_path: Path, tiny_models, any_db: str
) -> None:
    engine = open_engine(any_db)  # SQLite and PostgreSQL: a fleet's central store is the latter
    plan = make_plan(tmp_path, tiny_models)
    out = io.StringIO()
    first = run_plan(engine, plan, out=out, env=env_with(None))
    assert first.counts == {"ok": 2}
    assert "[2/2]" in out.getvalue() and "ETA" in out.getvalue()

    with new_session(engine) as s:
        runs = s.scalars(select(Run)).all()
        assert {r.status for r in runs} == {"ok"}
        for run in runs:
            kinds = sorted((m.kind, m.rep) for m in run.measurements)
            assert kinds == [("cold", 0), ("steady", 0), ("steady", 1), ("warmup", 0)]
            cold = next(m for m in run.measurements if m.kind == "cold")
            assert cold.load_ms is not None and cold.load_ms > 0
            assert cold.cold_start_ms is not None and cold.cold_start_ms > cold.ttft_ms
            for m in run.measurements:
                assert m.n_prompt == 24  # llama.cpp's own count of prompt tokens evaluated
                assert m.n_gen == 7  # 8 tokens out: the first from prefill, then 7 decode steps
                assert m.tokens_out == 8 and m.finish_reason == "length"
                assert m.prefill_ms is not None and m.prefill_ms > 0
                assert m.tg_tps == pytest.approx(m.n_gen / (m.decode_ms / 1000.0))
                assert m.ttft_ms >= m.prefill_ms  # TTFT contains the prefill plus tokenization and sampling
            assert run.build is not None and run.build.llama_cpp_python_version
            assert run.model_file is not None and len(run.model_file.sha256) == 64
            assert run.peak_rss_mb is not None and run.peak_rss_mb > 0
            assert run.effective_json is not None and '"n_ctx": 256' in run.effective_json
            assert '"load_mode": 1' in run.effective_json  # mmap = true reached llama.cpp as LOAD_MODE_MMAP
            phase_names = {(p.name, p.kind) for p in run.phases}
            assert {("load", "cold"), ("prefill", "steady"), ("decode", "steady")} <= phase_names
        n_meas = s.scalar(select(func.count()).select_from(Measurement))

    second = run_plan(engine, plan, out=io.StringIO(), env=env_with(None))
    assert second.sweep_id == first.sweep_id
    assert second.n_skipped == 2 and second.counts == {}
    with new_session(engine) as s:
        assert s.scalar(select(func.count()).select_from(Run)) == 2
        assert s.scalar(select(func.count()).select_from(Measurement)) == n_meas
        rows = build_rows(s, first.sweep_id)
    assert [r["model_label"] for r in rows] == ["q8", "q4"]
    assert rows[0]["reference_label"] == "q8" and rows[0]["agree_share"] == 1.0
    assert rows[1]["agree_n_tokens"] == 8 and rows[1]["tg_ratio_vs_ref"] is not None


@pytest.mark.parametrize(
    ("fault", "status", "signal_name", "reason_part"),
    [
        ("kill@prefill:q8_0", "crashed", "SIGKILL", "OOM"),
        ("segv@load:q8_0", "crashed", "SIGSEGV", "SIGSEGV"),
        ("abort@decode:q8_0", "crashed", "SIGABRT", "assertion"),
        ("raise@decode:q8_0", "error", None, "injected failure"),
    ],
)
def test_a_child_that_dies_leaves_a_row_and_the_sweep_goes_on(
    tmp_path: Path, tiny_models, fault: str, status: str, signal_name: str | None, reason_part: str
) -> None:
    engine = open_engine(tmp_path / "f.db")
    outcome = run_plan(engine, make_plan(tmp_path, tiny_models), out=io.StringIO(), env=env_with(fault))
    runs = runs_by_label(engine, outcome.sweep_id)
    assert runs["q8"].status == status
    assert runs["q8"].signal_name == signal_name
    assert reason_part in (runs["q8"].reason or "")
    assert runs["q4"].status == "ok"  # the sweep carried on
    # What the child reported before dying is kept, and nothing is invented for what it did not.
    if fault.startswith(("abort@decode", "raise@decode")):
        assert any(m.kind == "cold" for m in runs["q8"].measurements) is False
    if fault.startswith("kill@prefill"):
        assert runs["q8"].peak_rss_mb is not None  # polled from /proc while it lived, even if SIGKILLed


def test_a_hang_hits_the_timeout(tmp_path: Path, tiny_models) -> None:
    engine = open_engine(tmp_path / "h.db")
    plan = make_plan(tmp_path, tiny_models, timeout=4)
    outcome = run_plan(engine, plan, out=io.StringIO(), env=env_with("hang@decode:q8_0"))
    runs = runs_by_label(engine, outcome.sweep_id)
    assert runs["q8"].status == "timeout" and "4 s timeout" in (runs["q8"].reason or "")
    assert runs["q4"].status == "ok"
    with new_session(engine) as s:
        rows = {r["model_label"]: r for r in build_rows(s, outcome.sweep_id)}
    assert rows["q8"]["tg_tps_median"] is None and rows["q8"]["tg_tps_n"] == 0  # NULL, never 0


def test_a_gguf_truncated_after_validation_is_a_load_failure(tmp_path: Path, tiny_models) -> None:
    engine = open_engine(tmp_path / "t.db")
    plan = make_plan(tmp_path, tiny_models, copy=True)
    damaged = Path(plan.models[0].path)
    with damaged.open("r+b") as fh:
        fh.truncate(damaged.stat().st_size // 2)
    outcome = run_plan(engine, plan, out=io.StringIO(), env=env_with(None))
    runs = runs_by_label(engine, outcome.sweep_id)
    assert runs["q8"].status in ("load_failed", "crashed")
    assert runs["q8"].reason
    assert runs["q4"].status == "ok"
    # A failed config is finished: running the plan again does not hammer it (unless --retry-failed).
    again = run_plan(engine, plan, out=io.StringIO(), env=env_with(None))
    assert again.n_skipped == 2


def test_ctrl_c_marks_the_run_and_sweep_interrupted_and_resume_redoes_it(tmp_path: Path, tiny_models) -> None:
    db = tmp_path / "i.db"
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(plan_text(tiny_models, timeout=120))
    proc = subprocess.Popen(
        [sys.executable, "-m", "edgeprof", "run", str(plan_path), "--db", str(db)],
        env=env_with("hang@decode:q8_0"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_at_a_terminal,
    )
    engine = open_engine(db)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:  # until the hanging child has started its run
            with new_session(engine) as s:
                if s.scalar(select(func.count()).select_from(Phase)) or s.scalar(
                    select(func.count()).select_from(Run).where(Run.status == "running")
                ):
                    break
            time.sleep(0.2)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert "Traceback" not in err
    with new_session(engine) as s:
        run = s.scalars(select(Run)).one()
        assert run.status == "interrupted"
        sweep = s.scalars(select(Sweep)).one()
        assert sweep.status == "interrupted"
    # Resuming without the fault redoes the interrupted config and finishes the rest.
    outcome = run_plan(
        engine,
        parse_plan(plan_path.read_text(), str(plan_path), tmp_path),
        out=io.StringIO(),
        env=env_with(None),
    )
    assert outcome.counts == {"ok": 2}
    with new_session(engine) as s:
        rows = build_rows(s, outcome.sweep_id)
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert rows[0]["attempts"] == 2


def test_ngl_on_a_cpu_only_build_is_called_out(tmp_path: Path, tiny_models) -> None:
    from edgeprof.report import render_table

    plan = make_plan(tmp_path, tiny_models, ngl=[99])
    engine = open_engine(tmp_path / "g.db")
    outcome = run_plan(engine, plan, out=io.StringIO(), env=env_with(None))
    with new_session(engine) as s:
        rows = build_rows(s, outcome.sweep_id)
    assert [r["status"] for r in rows] == ["ok", "ok"]
    if rows[0]["_gpu_offload_supported"]:
        pytest.skip("this llama.cpp build can offload to a GPU")
    assert rows[0]["_gpu_offload_supported"] is False
    assert "cannot offload to a GPU" in render_table(rows)


def test_mmap_off_reaches_llama_cpp(tmp_path: Path, tiny_models) -> None:
    plan = make_plan(tmp_path, tiny_models, mmap=[False])
    engine = open_engine(tmp_path / "m.db")
    outcome = run_plan(engine, plan, out=io.StringIO(), env=env_with(None))
    runs = runs_by_label(engine, outcome.sweep_id)
    assert sorted(runs) == ["q4", "q8"]  # both configs ran: the checks below are never vacuous
    for run in runs.values():
        assert run.status == "ok" and run.use_mmap is False
        assert '"load_mode": 0' in (run.effective_json or "")


def test_a_telemetry_bug_costs_the_analysis_not_the_runs(tmp_path: Path, tiny_models) -> None:
    class BrokenHooks:
        def before_run(self, session, run, spec) -> None:
            raise RuntimeError("cooldown sensor exploded")

        def on_child_event(self, run, event) -> None:
            pass

        def after_run(self, session, run, spec) -> None:
            raise RuntimeError("analysis bug")

    engine = open_engine(tmp_path / "b.db")
    out = io.StringIO()
    outcome = run_plan(
        engine, make_plan(tmp_path, tiny_models), out=out, hooks=BrokenHooks(), env=env_with(None)
    )
    assert outcome.counts == {"ok": 2}
    assert out.getvalue().count("warning: telemetry failed") == 4
    assert "analysis bug" in out.getvalue() and "cooldown sensor exploded" in out.getvalue()


def test_peak_rss_is_the_childs_not_the_bloated_parents(tmp_path: Path, tiny_models) -> None:
    ballast = bytearray(400 * 1024 * 1024)  # the agent process holding 400 MB (matplotlib, caches, ...)
    ballast[::4096] = b"x" * len(ballast[::4096])  # touch every page so it is resident
    engine = open_engine(tmp_path / "r.db")
    outcome = run_plan(engine, make_plan(tmp_path, tiny_models), out=io.StringIO(), env=env_with(None))
    runs = runs_by_label(engine, outcome.sweep_id)
    del ballast
    assert sorted(runs) == ["q4", "q8"]  # both configs ran: the checks below are never vacuous
    for run in runs.values():
        # python + llama.cpp + a tiny model: tens of MB, never the parent's 400 MB (wait4's ru_maxrss is)
        assert run.peak_rss_mb is not None and 10 < run.peak_rss_mb < 300, run.peak_rss_mb


def test_a_run_without_telemetry_stores_its_stability_verdicts(tmp_path: Path, tiny_models) -> None:
    """`edgeprof run --no-telemetry`: stability needs only the reps' speeds, so it is judged and stored;
    what needs telemetry says what is missing (inconclusive), never a clean bill of health."""
    from support.runs import clean_env, edgeprof

    from edgeprof.storage.models import Verdict

    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(
        plan_toml({"q8": tiny_models["Q8_0"], "q4": tiny_models["Q4_K_M"]}, name="nt", repeat={"steady": 3})
    )
    db = tmp_path / "nt.db"
    proc = edgeprof("run", str(plan_path), "--db", str(db), "--no-telemetry", env=clean_env())
    assert proc.returncode == 0, proc.stderr
    assert "warning: run " not in proc.stdout  # no verdict failed (the host's own warnings may show)
    with new_session(open_engine(db)) as s:
        verdicts = {(v.run_id, v.kind): v for v in s.scalars(select(Verdict))}
        run_ids = list(s.scalars(select(Run.id)))
    assert len(run_ids) == 2
    for run_id in run_ids:
        stable = verdicts[(run_id, "stability")]
        assert stable.value in ("stable", "unstable")
        assert '"n": 3' in stable.evidence_json and '"metric": "tg_tps"' in stable.evidence_json
        assert verdicts[(run_id, "throttle")].value == "inconclusive"


def test_a_verdict_that_raises_is_stored_as_error_with_one_warning_line(
    tmp_path: Path, tiny_models, monkeypatch: pytest.MonkeyPatch
) -> None:
    import edgeprof.verdicts.store as store
    from edgeprof.storage.models import Verdict

    def broken(*_a: Any, **_k: Any) -> Any:
        raise ArithmeticError("spread of nothing")

    monkeypatch.setattr(store, "stability", broken)
    plan = parse_plan(
        plan_toml({"q8": tiny_models["Q8_0"]}, name="one"), source=str(tmp_path / "p.toml"), base=tmp_path
    )
    engine = open_engine(tmp_path / "e.db")
    out = io.StringIO()
    outcome = run_plan(engine, plan, out=out, env=env_with(None))
    assert outcome.counts == {"ok": 1}  # the measurements are kept
    # (the system check may warn about the host's other busy processes: not this test's business)
    warnings = [line for line in out.getvalue().splitlines() if line.startswith("warning: run ")]
    assert len(warnings) == 1, warnings
    assert "stability stored as error" in warnings[0] and "ArithmeticError: spread of nothing" in warnings[0]
    with new_session(engine) as s:
        values = {v.kind: v.value for v in s.scalars(select(Verdict))}
    assert values["stability"] == "error" and values["throttle"] != "error"
