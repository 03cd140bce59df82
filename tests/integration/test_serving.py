"""The serving runner end to end on loopback: a real llama-server (built by scripts/setup.sh) on the tiny demo
model, bounded request counts and timeouts; every way a server can fail leaves a stored row and the sweep
goes on; resume skips finished levels. The never-ready case uses a synthetic stand-in binary (a shell script
that never opens its port), since a real server that never gets ready cannot be made on purpose."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from support.serving import needs_server, serving_plan_toml

from edgeprof.plan import expand, parse_plan
from edgeprof.runners.llama_server import SERVER_ENV, SERVER_FAULT_ENV
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Build, Phase, Run, ServingLevel, ServingRequest
from edgeprof.sweep import run_plan

pytestmark = pytest.mark.timeout(600)


def plan_for(tmp_path: Path, model: Path, **kw: Any):
    return parse_plan(serving_plan_toml(model, **kw), source=str(tmp_path / "plan.toml"), base=tmp_path)


def env_with(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(SERVER_FAULT_ENV, None)
    env.update(extra)
    return env


def runs_of(engine, sweep_id: int) -> list[tuple[Run, ServingLevel | None, list[ServingRequest]]]:
    out = []
    with new_session(engine) as s:
        for run in s.scalars(select(Run).where(Run.sweep_id == sweep_id).order_by(Run.id)):
            level = s.scalar(select(ServingLevel).where(ServingLevel.run_id == run.id))
            reqs = list(s.scalars(select(ServingRequest).where(ServingRequest.run_id == run.id)))
            s.expunge_all()
            out.append((run, level, reqs))
    return out


def synthetic_server(tmp_path: Path, body: str) -> Path:
    """A synthetic stand-in for llama-server: answers --version / --list-devices, then runs ``body``."""
    path = tmp_path / "fake-llama-server"
    path.write_text(
        "#!/bin/sh\n"
        'case "$1" in --version) echo "version: 0 (synthetic)"; exit 0;; '
        '--list-devices) echo "Available devices:"; exit 0;; esac\n' + body + "\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_server_that_never_gets_ready_or_dies_at_start_is_a_row_and_the_sweep_goes_on(
    tmp_path: Path, tiny_models
) -> None:
    engine = open_engine(tmp_path / "s.db")
    plan = plan_for(tmp_path, tiny_models["Q4_K_M"], conc=[1, 2], ready_timeout=1.5)
    hang = synthetic_server(tmp_path, "exec sleep 60")
    outcome = run_plan(engine, plan, out=io.StringIO(), env=env_with(**{SERVER_ENV: str(hang)}))
    rows = runs_of(engine, outcome.sweep_id)
    assert len(rows) == 2  # the first failure did not stop the sweep
    for run, level, _reqs in rows:
        assert run.status == "load_failed"
        assert "not ready within 1.5 s" in (run.reason or "")
        assert level is not None and level.ready_ms is None and level.n_requests is None
    dies = synthetic_server(tmp_path, 'echo "error: failed to load model" >&2; exit 1')
    env = env_with(**{SERVER_ENV: str(dies)})
    outcome = run_plan(engine, plan, out=io.StringIO(), new_sweep=True, env=env)
    rows = runs_of(engine, outcome.sweep_id)
    assert [r.status for r, _l, _q in rows] == ["load_failed", "load_failed"]
    assert all("failed to load model" in (r.reason or "") for r, _l, _q in rows)


def test_a_missing_server_binary_is_a_row_with_the_reason(tmp_path: Path, tiny_models) -> None:
    engine = open_engine(tmp_path / "s.db")
    plan = plan_for(tmp_path, tiny_models["Q4_K_M"], conc=[1])
    outcome = run_plan(engine, plan, out=io.StringIO(), env=env_with(**{SERVER_ENV: str(tmp_path / "nope")}))
    (run, _level, _reqs), = runs_of(engine, outcome.sweep_id)
    assert run.status == "error" and SERVER_ENV in (run.reason or "")


@needs_server
def test_concurrency_1_and_4_produce_every_field(tmp_path: Path, tiny_models) -> None:
    engine = open_engine(tmp_path / "s.db")
    # both runners: the in-process one too, for the report's side-by-side
    both, reps = ["llama-cpp", "llama-server"], {"warmup": 0, "steady": 2}
    plan = plan_for(tmp_path, tiny_models["Q4_K_M"], requests=8, runner=both, repeat=reps)
    outcome = run_plan(engine, plan, out=io.StringIO(), env=env_with())
    everything = runs_of(engine, outcome.sweep_id)
    assert [(r.runner, r.concurrency) for r, _l, _q in everything] == [
        ("llama-cpp", None), ("llama-server", 1), ("llama-server", 4)
    ]
    assert everything[0][0].status == "ok" and everything[0][1] is None  # in-process: no serving rows
    rows = everything[1:]
    for run, level, reqs in rows:
        assert run.status == "ok", run.reason
        assert run.runner == "llama-server" and run.peak_rss_mb is not None
        assert level is not None
        assert level.n_slots == run.concurrency
        assert level.slot_n_ctx == 256  # every slot gets the plan's ctx (-c = ctx x slots)
        assert level.ready_ms is not None and level.cold_start_ms is not None
        assert level.cold_start_ms > level.ready_ms  # cold start runs to the first token of the first request
        assert (level.n_requests, level.n_ok, level.n_errors, level.n_timeouts) == (8, 8, 0, 0)
        for col in ("request_throughput_rps", "output_tps", "total_tps", "goodput_rps", "ttft_p50_ms",
                    "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "itl_p50_ms", "itl_p99_ms", "e2el_p50_ms",
                    "e2el_p99_ms"):  # fmt: skip
            assert getattr(level, col) is not None, col
        stats = json.loads(level.stats_json or "{}")
        # a gap per pair of text chunks: at most 7 per request; fewer where the tiny model's byte tokens are
        # held back as incomplete UTF-8 (a chunk is not a token: the count comes from the server)
        assert stats["ttft_ms"]["n"] == 8 and 0 < stats["itl_ms"]["n"] <= 8 * 7
        assert (stats["itl_ms"]["n"] < 8 * 7) == (stats["n_chunk_token_mismatch"] > 0)
        assert stats["goodput_rps"] == stats["request_throughput_rps"]  # the SLOs are loose
        deltas = stats["metrics_deltas"]
        assert deltas["llamacpp:tokens_predicted_total"] == 8 * 8  # the measured level's tokens only
        assert json.loads(level.metrics_before_json or "{}") and json.loads(level.metrics_after_json or "{}")
        kinds = [q.kind for q in reqs]
        assert kinds.count("cold") == 1 and kinds.count("warmup") == 1 and kinds.count("measured") == 8
        for q in reqs:
            assert q.status == "ok" and q.output_tokens == 8  # the server's count (ignore_eos)
            assert q.prompt_tokens == 16 and q.server_cache_n == 0  # no prefix cache
            assert q.server_prompt_ms is not None and q.server_predicted_ms is not None
            assert q.ttft_ms is not None and q.e2el_ms is not None and q.tpot_ms is not None
        with new_session(engine) as s:
            build = s.get(Build, run.build_id)
            assert build is not None and build.runtime == "llama-server"
            names = {p.name for p in s.scalars(select(Phase).where(Phase.run_id == run.id))}
        assert {"load", "cold", "warmup", f"level_c{run.concurrency}"} <= names
    # at concurrency 4 the requests overlapped: the server saw more than one in flight at some poll
    _run4, level4, _ = rows[1]
    assert level4 is not None and level4.max_deferred == 0  # one slot per client: nobody queued

    # the report keeps the scenarios apart and puts them side by side
    from edgeprof.report import build_rows, render_html, render_json, render_table

    with new_session(engine) as s:
        report_rows = build_rows(s, outcome.sweep_id, include_serving=True)
        html = render_html(s, outcome.sweep_id)
    assert [r["runner"] for r in report_rows] == ["llama-cpp", "llama-server", "llama-server"]
    inproc, c1 = report_rows[0], report_rows[1]
    assert inproc["tg_tps_median"] is not None and inproc["serving_ttft_ms_p50"] is None
    assert c1["tg_tps_median"] is None and c1["serving_ttft_ms_p50"] is not None  # never mixed
    assert c1["serving_requests"] == 8 and c1["concurrency"] == 1
    table = render_table(report_rows)
    assert "HTTP API (llama-server, streamed)" in table and "In-process (CLI) vs HTTP API" in table
    # the tokens each level's requests had, as the server counted them; TTFT p90 and E2EL/token shown
    assert [(r["prompt_n_tokens"], r["tokens_out_median"], r["tokens_out_min"]) for r in report_rows[1:]] == [
        (16, 8, 8), (16, 8, 8)
    ]
    assert "TTFT p50/p90/p99 ms" in table and "E2EL/tok p50 ms" in table
    assert "interference" in table.split("HTTP API (llama-server, streamed)")[1]
    assert len(json.loads(render_json(report_rows))) == 3
    assert "HTTP API: latency and throughput against concurrency" in html and "figure not drawn" not in html


@needs_server
def test_a_server_killed_mid_level_or_a_request_timeout_is_a_row_and_the_sweep_goes_on(
    tmp_path: Path, tiny_models
) -> None:
    engine = open_engine(tmp_path / "s.db")
    plan = plan_for(tmp_path, tiny_models["Q4_K_M"], conc=[1, 2], requests=4)
    outcome = run_plan(engine, plan, out=io.StringIO(), env=env_with(**{SERVER_FAULT_ENV: "kill@level:c1"}))
    (run1, level1, reqs1), (run2, level2, _reqs2) = runs_of(engine, outcome.sweep_id)
    assert run1.status == "crashed" and run1.signal_name == "SIGKILL", run1.reason
    assert level1 is not None and level1.n_requests == 4 and (level1.n_ok or 0) < 4
    assert any(q.status == "error" for q in reqs1 if q.kind == "measured")
    assert run2.status == "ok" and level2 is not None and level2.n_ok == 4  # the sweep went on

    tight = plan_for(tmp_path, tiny_models["Q4_K_M"], conc=[1], requests=2, req_timeout=0.001)
    outcome = run_plan(engine, tight, out=io.StringIO(), env=env_with())
    ((run, level, reqs),) = runs_of(engine, outcome.sweep_id)
    assert run.status == "timeout" and "timed out" in (run.reason or "")
    assert level is not None and level.n_timeouts == 2 and level.n_ok == 0
    assert all(q.status == "timeout" for q in reqs)


@needs_server
def test_resume_skips_finished_levels(tmp_path: Path, tiny_models) -> None:
    engine = open_engine(tmp_path / "s.db")
    plan = plan_for(tmp_path, tiny_models["Q4_K_M"], conc=[1, 2], requests=2)
    started = {"n": 0}

    def one_config_only() -> str | None:
        started["n"] += 1
        return "synthetic pause after one config" if started["n"] > 1 else None

    first = run_plan(engine, plan, out=io.StringIO(), env=env_with(), should_start=one_config_only)
    assert first.paused and first.counts == {"ok": 1}
    second = run_plan(engine, plan, out=io.StringIO(), env=env_with())
    assert second.sweep_id == first.sweep_id and second.n_skipped == 1 and second.counts == {"ok": 1}
    rows = runs_of(engine, first.sweep_id)
    assert [r.concurrency for r, _l, _q in rows] == [1, 2]  # c = 1 was not measured again
    third = run_plan(engine, plan, out=io.StringIO(), env=env_with())
    assert third.n_skipped == 2 and not third.counts


def test_no_write_transaction_is_open_while_the_server_runs(tmp_path: Path, tiny_models, monkeypatch) -> None:
    """The sampler's sink and the lease's heartbeats write from other connections while a level runs; an
    open write transaction of the run's own session would make them wait out SQLite's busy timeout (the
    sampler, blocked in its flush, took no reading during the level)."""
    import sqlite3

    from edgeprof.runners.llama_server import run_serving

    db = tmp_path / "s.db"
    engine = open_engine(db)
    plan = plan_for(tmp_path, tiny_models["Q4_K_M"], conc=[1], ready_timeout=0.5)
    probes: list[str] = []

    def probing(*args: Any, **kw: Any):
        con = sqlite3.connect(db, timeout=0.2)
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute("ROLLBACK")
            probes.append("free")
        except sqlite3.OperationalError as exc:
            probes.append(str(exc))
        finally:
            con.close()
        return run_serving(*args, **kw)

    monkeypatch.setattr("edgeprof.executors.serving.run_serving", probing)
    hang = synthetic_server(tmp_path, "exec sleep 60")
    run_plan(engine, plan, out=io.StringIO(), env=env_with(**{SERVER_ENV: str(hang)}))
    assert probes == ["free"]


@needs_server
def test_the_driver_keeps_one_client_for_its_own_requests(tmp_path: Path, tiny_models, monkeypatch) -> None:
    """/health, /props and every /metrics poll share one kept-alive client: a fresh httpx client per poll
    costs ~25 ms of CPU on the event loop that times the streams (it slowed a one-thread server's decode)."""
    import httpx

    made: list[int] = []
    real_init = httpx.AsyncClient.__init__

    def counting_init(self: httpx.AsyncClient, *args: Any, **kw: Any) -> None:
        made.append(1)
        real_init(self, *args, **kw)

    monkeypatch.setattr(httpx.AsyncClient, "__init__", counting_init)
    engine = open_engine(tmp_path / "s.db")
    plan = plan_for(tmp_path, tiny_models["Q4_K_M"], conc=[1], requests=None, duration_s=1.2)
    outcome = run_plan(engine, plan, out=io.StringIO(), env=env_with())
    ((run, level, _reqs),) = runs_of(engine, outcome.sweep_id)
    assert run.status == "ok", run.reason
    assert level is not None and level.max_deferred is not None  # /metrics was polled during the level
    stats = json.loads(level.stats_json or "{}")
    assert stats["metrics_deltas"]  # and scraped before and after it
    # the driver's one, and one per batch of requests (cold, warm-up, measured), however often it polled
    assert len(made) == 1 + 3


def test_doctor_names_the_server_in_use_and_whether_it_offloads(tmp_path: Path, monkeypatch) -> None:
    from edgeprof.device import llama_server_info, render

    fake = tmp_path / "fake-cuda-llama-server"  # synthetic: prints what a CUDA build prints
    fake.write_text(
        "#!/bin/sh\n"
        'case "$1" in --version) echo "version: 7001 (abc1234)"; exit 0;; '
        '--list-devices) printf "Available devices:\\n  CUDA0: Orin (7620 MiB, 6000 MiB free)\\n"; '
        "exit 0;; esac\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv(SERVER_ENV, str(fake))
    info = llama_server_info()
    assert info["ok"] and info["source"] == f"${SERVER_ENV}" and info["gpu_offload"] is True
    assert (info["build_number"], info["commit"]) == ("7001", "abc1234")
    none_ll = {"ok": False, "reason": "x"}
    text = render({"device": {}, "llama_cpp": none_ll, "llama_server": info, "collectors": []})
    assert str(fake) in text and "CUDA0: Orin" in text
    monkeypatch.setenv(SERVER_ENV, str(tmp_path / "missing"))
    missing = {"device": {}, "llama_cpp": none_ll, "llama_server": llama_server_info(), "collectors": []}
    assert "not an executable file" in render(missing)


@needs_server
def test_serving_phases_carry_telemetry_server_rss_and_energy_per_output_token(
    tmp_path: Path, tiny_models
) -> None:
    from support.fakes import SYNTHETIC_RANGE_UJ, FakeRoot

    from edgeprof.collectors import ProcStatCollector, PsutilHostCollector, RaplCollector
    from edgeprof.plan import Collect, Cooldown
    from edgeprof.storage.models import PhaseStat
    from edgeprof.storage.samples import read_samples
    from edgeprof.sweep import Telemetry

    root = tmp_path / "root"
    FakeRoot(root).rapl_zone("0", "package-0", SYNTHETIC_RANGE_UJ - 1_000_000)
    rapl = RaplCollector(root)
    assert rapl.available().ok

    class MovingRapl(RaplCollector):
        """Synthetic package counter: advances 1 mJ per reading (a real one would move with time)."""

        def sample(self) -> dict[str, float | None]:
            path = root / "sys/class/powercap/intel-rapl:0/energy_uj"
            value = int(path.read_text()) + 1000
            path.write_text(f"{value % SYNTHETIC_RANGE_UJ}\n")
            return super().sample()

    engine = open_engine(tmp_path / "s.db")
    # A level bounded by time, not by a request count: on a quiet machine 6 requests of the tiny model end
    # within one sampling interval, and the interference verdict has no reading inside the level to judge.
    plan = plan_for(tmp_path, tiny_models["Q4_K_M"], conc=[2], requests=None, duration_s=0.5)

    def factory(sweep_id: int) -> Telemetry:
        collectors = [PsutilHostCollector(), MovingRapl(rapl.root), ProcStatCollector()]
        collect = Collect(interval_ms=50, idle_s=0.3)
        return Telemetry(engine, sweep_id, collect, Cooldown(), collectors=collectors)

    outcome = run_plan(engine, plan, out=io.StringIO(), telemetry=factory, env=env_with())
    ((run, level, _reqs),) = runs_of(engine, outcome.sweep_id)
    assert run.status == "ok", run.reason
    with new_session(engine) as s:
        phases = {p.name for p in s.scalars(select(Phase).where(Phase.run_id == run.id))}
        assert {"idle", "load", "cold", "warmup", "level_c2"} <= phases
        stat_phases = {p.phase for p in s.scalars(select(PhaseStat).where(PhaseStat.run_id == run.id))}
        assert "level_c2" in stat_phases and "idle" in stat_phases
        rss = [r.value for r in read_samples(s, None, run_ids=[run.id]) if r.metric == "proc.rss_mb"]
        assert any(rss), "the sampler followed the server's pid"
    assert level is not None and level.output_j_per_token is not None and level.output_j_per_token > 0

    # the level is judged like an in-process run: its requests for stability, its window for interference
    from edgeprof.report import build_rows
    from edgeprof.storage.models import Verdict

    with new_session(engine) as s:
        verdicts = {v.kind: v for v in s.scalars(select(Verdict).where(Verdict.run_id == run.id))}
        (row,) = build_rows(s, outcome.sweep_id, include_serving=True)
    stability = json.loads(verdicts["stability"].evidence_json)
    assert stability["metric"] == "e2el_per_token_ms"
    assert stability["requests"]["e2el_per_token_ms"]["n"] == level.n_ok
    interference = json.loads(verdicts["interference"].evidence_json)
    window = interference["level"]
    assert window["duration_s"] == pytest.approx(level.t_end_mono - level.t_start_mono, abs=1e-3)
    assert window.get("runq_median") is not None  # proc_stat readings inside the level: the sampler ran
    assert row["stability_verdict"] == verdicts["stability"].value
    assert row["interference_verdict"] == verdicts["interference"].value


def test_the_kv_budget_grows_with_slots_and_a_config_that_cannot_fit_is_never_started(
    tmp_path: Path, tiny_models, monkeypatch
) -> None:
    from edgeprof import gguf as memory_model
    from edgeprof.executors import kv_budget

    plan = plan_for(tmp_path, tiny_models["Q4_K_M"], conc=[1, 4])
    sha = {m.path: "0" * 64 for m in plan.models}
    one, four = (kv_budget(s, gpu_offload=False) for s in expand(plan, sha))
    assert (one["slots"], four["slots"]) == (1, 4) and four["n_ctx_total"] == 4 * 256
    assert four["kv_mb"] == pytest.approx(4 * one["kv_mb"], rel=0.01)  # slots x per-slot ctx x bytes/token
    assert one["kv_bytes_per_token"] > 0 and one["predicted_mb"] > one["kv_mb"]

    marker = tmp_path / "started"
    server = synthetic_server(tmp_path, f"touch {marker}; exec sleep 60")
    monkeypatch.setattr(memory_model, "mem_available_mb", lambda root="/": 1.0)  # a synthetic 1 MiB device
    engine = open_engine(tmp_path / "s.db")
    outcome = run_plan(engine, plan, out=io.StringIO(), env=env_with(**{SERVER_ENV: str(server)}))
    rows = runs_of(engine, outcome.sweep_id)
    assert [r.status for r, _l, _q in rows] == ["skipped_memory", "skipped_memory"]
    assert not marker.exists()  # refused before the server was started
    for run, _level, _reqs in rows:
        assert "available" in (run.reason or "") and "the server was not started" in (run.reason or "")


@needs_server
def test_open_loop_poisson_arrivals_under_a_concurrency_cap(tmp_path: Path, tiny_models) -> None:
    engine = open_engine(tmp_path / "s.db")
    plan = plan_for(tmp_path, tiny_models["Q4_K_M"], conc=[2], requests=6, request_rate=[20.0])
    outcome = run_plan(engine, plan, out=io.StringIO(), env=env_with())
    ((run, level, reqs),) = runs_of(engine, outcome.sweep_id)
    assert run.status == "ok", run.reason
    assert (run.request_rate, run.concurrency) == (20.0, 2)
    assert level is not None and level.request_rate == 20.0 and (level.n_requests, level.n_ok) == (6, 6)
    measured = sorted((q for q in reqs if q.kind == "measured"), key=lambda q: q.t_send_mono)
    assert len(measured) == 6 and measured[-1].t_send_mono > measured[0].t_send_mono  # arrivals spread out


@needs_server
def test_a_level_bounded_by_duration_sends_no_request_after_it(tmp_path: Path, tiny_models) -> None:
    engine = open_engine(tmp_path / "s.db")
    plan = plan_for(tmp_path, tiny_models["Q4_K_M"], conc=[2], requests=None, duration_s=1.0)
    assert plan.serving is not None and plan.serving.requests is None and plan.serving.duration_s == 1.0
    outcome = run_plan(engine, plan, out=io.StringIO(), env=env_with())
    ((run, level, reqs),) = runs_of(engine, outcome.sweep_id)
    assert run.status == "ok", run.reason
    measured = [q for q in reqs if q.kind == "measured"]
    assert level is not None and level.n_requests == len(measured) >= 2
    first = min(q.t_send_mono for q in measured)
    assert level.t_start_mono is not None and first >= level.t_start_mono
    assert all(q.t_send_mono <= level.t_start_mono + 1.0 + 0.05 for q in measured)  # none sent after it
