"""The openai runner against a real llama-server the test starts itself (a server edgeprof did not start), on
both endpoints at concurrency 1 and 2: the stored counts are the server's own (its usage, its /metrics
counters), the identity is what /v1/models and /props said, what cannot be measured is NULL. A bad target
is a one-line plan error (exit 2); an unreachable one is a failed run that is kept and counted while the
sweep goes on. A database holding both endpoints' sweeps and a bench at two thread counts scrapes as 4
serving and 2 config series.

``EDGEPROF_WRITE_CAPTURES=1`` makes ``test_raw_streams_fold_into_the_usage_the_server_sent`` write the
streams it read to tests/fixtures/captures/openai_sse/ (the unit tests' real captures)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from support.serving import SERVER, foreign_plan_toml, needs_server, running_llama_server

from edgeprof.daemon.exposition import start_metrics_server
from edgeprof.plan import parse_plan
from edgeprof.report.llamabench import bench_plan, parse_bench_args
from edgeprof.runners import loadgen
from edgeprof.runners.llama_server import SERVER_FAULT_ENV, free_port
from edgeprof.runners.openai_api import ENDPOINTS, payload_for
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Phase, Run, ServingLevel, ServingRequest
from edgeprof.sweep import run_plan

pytestmark = pytest.mark.timeout(600)

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures" / "openai_sse"


@pytest.fixture(scope="module")
def server_url(tiny_models: dict[str, Path]):
    assert SERVER is not None
    with running_llama_server(SERVER, tiny_models["Q4_K_M"], slots=2) as url:
        yield url


def env_clean() -> dict[str, str]:
    env = dict(os.environ)
    env.pop(SERVER_FAULT_ENV, None)
    return env


def rows_of(engine, sweep_id: int) -> list[tuple[Run, ServingLevel | None, list[ServingRequest], set[str]]]:
    out = []
    with new_session(engine) as s:
        for run in s.scalars(select(Run).where(Run.sweep_id == sweep_id).order_by(Run.id)):
            level = s.scalar(select(ServingLevel).where(ServingLevel.run_id == run.id))
            reqs = list(s.scalars(select(ServingRequest).where(ServingRequest.run_id == run.id)))
            phases = {p.name for p in s.scalars(select(Phase).where(Phase.run_id == run.id))}
            s.expunge_all()
            out.append((run, level, reqs, phases))
    return out


def replay_usage(url: str, body: dict[str, Any], endpoint: str) -> dict[str, Any]:
    """The usage object the server sends for ``body`` (the same request again, read raw)."""
    usage: dict[str, Any] = {}
    with httpx.stream("POST", url + ENDPOINTS[endpoint].path, json=body, timeout=60) as resp:
        for line in resp.iter_lines():
            data = loadgen.parse_sse_line(line)
            if data is not None and isinstance(data.get("usage"), dict):
                usage = data["usage"]
    return usage


@needs_server
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_both_endpoints_at_concurrency_1_and_2_store_what_the_server_reported(
    tmp_path: Path, server_url: str, endpoint: str
) -> None:
    engine = open_engine(tmp_path / "s.db")
    plan = parse_plan(foreign_plan_toml(server_url, endpoint), source="plan.toml", base=tmp_path)
    assert plan.models[0].path == server_url  # no model file: the server's URL stands in for it
    outcome = run_plan(engine, plan, out=io.StringIO(), env=env_clean())
    rows = rows_of(engine, outcome.sweep_id)
    assert [(r.runner, r.concurrency, r.status) for r, _l, _q, _p in rows] == [
        ("openai", 1, "ok"),
        ("openai", 2, "ok"),
    ], [r.reason for r, _l, _q, _p in rows]
    host = server_url.split("://")[1]
    for run, level, reqs, phases in rows:
        # identity: the server's model at its URL; no file, no build row, nothing spawned or predicted
        assert run.model_label == f"edgeprof-demo-tiny-q4_k_m.gguf @ {host}" and run.model_path == server_url
        assert run.model_file_id is None and run.build_id is None
        assert level is not None and level.ready_ms is None and level.cold_start_ms is None
        assert level.server_pid is None and level.server_command is None and level.kv_budget_json is None
        identity = json.loads(level.props_json or "{}")
        assert identity["target"] == server_url and identity["endpoint"] == endpoint
        assert identity["models"] == [identity["model"]] and identity["model"].endswith("q4_k_m.gguf")
        assert identity["build_info"] and identity["total_slots"] == 2 == level.n_slots
        assert phases - {"idle"} == {"warmup", f"level_c{run.concurrency}"}  # no load, no cold start
        assert (level.n_requests, level.n_ok) == (4, 4)
        for col in ("ttft_p50_ms", "tpot_p50_ms", "itl_p50_ms", "e2el_p50_ms", "output_tps", "goodput_rps"):
            assert getattr(level, col) is not None, col
        stats = json.loads(level.stats_json or "{}")
        assert stats["token_sources"] == {"usage": 4}  # every count is the server's usage, none counted
        measured = [q for q in reqs if q.kind == "measured"]
        assert all(q.output_tokens == 8 and q.finish_reason == "length" for q in measured)
        # the server's own counters over the level agree with the stored output counts
        assert stats["metrics_deltas"]["llamacpp:tokens_predicted_total"] == sum(
            q.output_tokens or 0 for q in measured
        )
    # every stored count is what the server says for that request (the same body, asked again)
    job = {"workload": plan.workloads[0].to_json(), "serving": plan.serving.to_json() if plan.serving else {}}
    job["serving"]["nonce"] = json.loads(rows[1][0].effective_json or "{}")["prompt_nonce"]  # the run's own
    model = json.loads(rows[0][1].props_json or "{}")["model"]  # type: ignore[union-attr]
    for q in [q for q in rows[1][2] if q.kind == "measured"]:
        usage = replay_usage(server_url, payload_for(job, model, q.idx), endpoint)
        assert (q.prompt_tokens, q.output_tokens) == (usage["prompt_tokens"], usage["completion_tokens"])

    from edgeprof.report import build_rows, render_table

    with new_session(engine) as s:
        report_rows = build_rows(s, outcome.sweep_id, include_serving=True)
    assert [r["model_label"] for r in report_rows] == [f"edgeprof-demo-tiny-q4_k_m.gguf @ {host}"] * 2
    assert all(r["kld_mean"] is None for r in report_rows)  # never 0: not measured
    assert f"edgeprof-demo-tiny-q4_k_m.gguf @ {host}" in render_table(report_rows)


@needs_server
def test_open_loop_poisson_arrivals_against_the_server(tmp_path: Path, server_url: str) -> None:
    engine = open_engine(tmp_path / "s.db")
    text = foreign_plan_toml(server_url, "completions", conc=[2], requests=6, request_rate=[20.0])
    outcome = run_plan(engine, parse_plan(text, base=tmp_path), out=io.StringIO(), env=env_clean())
    ((run, level, reqs, _p),) = rows_of(engine, outcome.sweep_id)
    assert run.status == "ok", run.reason
    assert (run.request_rate, run.concurrency) == (20.0, 2)
    assert level is not None and level.request_rate == 20.0 and (level.n_requests, level.n_ok) == (6, 6)
    measured = sorted((q for q in reqs if q.kind == "measured"), key=lambda q: q.t_send_mono)
    assert measured[-1].t_send_mono > measured[0].t_send_mono  # arrivals spread out


@needs_server
def test_a_model_file_given_names_what_the_server_serves(
    tmp_path: Path, server_url: str, tiny_models
) -> None:
    engine = open_engine(tmp_path / "s.db")
    text = foreign_plan_toml(server_url, conc=[1], requests=2)
    text = text.replace(
        "[matrix]\n", f'[matrix]\nmodels = [{{ path = "{tiny_models["Q4_K_M"]}", label = "q4" }}]\n'
    )
    outcome = run_plan(engine, parse_plan(text, base=tmp_path), out=io.StringIO(), env=env_clean())
    ((run, level, _reqs, _p),) = rows_of(engine, outcome.sweep_id)
    assert run.status == "ok", run.reason
    assert (run.model_label, run.model_path) == ("q4", str(tiny_models["Q4_K_M"]))  # the plan's own name
    assert run.model_file_id is not None  # hashed like any model file
    assert level is not None and json.loads(level.props_json or "{}")["target"] == server_url


def test_an_unreachable_target_is_a_failed_run_kept_and_counted_and_the_sweep_goes_on(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "s.db")
    target = f"http://127.0.0.1:{free_port()}"  # nobody listens there
    plan = parse_plan(foreign_plan_toml(target), source="plan.toml", base=tmp_path)
    outcome = run_plan(engine, plan, out=io.StringIO(), env=env_clean())
    rows = rows_of(engine, outcome.sweep_id)
    assert outcome.counts == {"error": 2}  # both configs ran: the first failure did not stop the sweep
    for run, level, reqs, _phases in rows:
        assert run.status == "error" and f"target {target} unreachable" in (run.reason or "")
        assert level is not None and level.n_requests is None and not reqs


@pytest.mark.parametrize(
    "target", ["localhost:8080", "http://127.0.0.1", "ftp://h:21", "http://:8080", "http://h:99999"]
)
def test_a_bad_target_is_a_one_line_error_with_exit_2(tmp_path: Path, target: str) -> None:
    (tmp_path / "plan.toml").write_text(foreign_plan_toml(target))
    env = dict(os.environ, EDGEPROF_DB=str(tmp_path / "cli.db"), XDG_DATA_HOME=str(tmp_path / "xdg"))
    result = subprocess.run(
        [sys.executable, "-m", "edgeprof", "run", "plan.toml"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "serving.target" in lines[0] and "http(s) URL with host and port" in lines[0]
    assert "Traceback" not in result.stderr


@needs_server
def test_raw_streams_fold_into_the_usage_the_server_sent(server_url: str) -> None:
    """One raw stream per endpoint, folded as the load generator does: the record's counts are the usage
    chunk's, its text chunks are the content-carrying ones."""
    write = os.environ.get("EDGEPROF_WRITE_CAPTURES") == "1"
    model = httpx.get(server_url + "/v1/models", timeout=5).json()["data"][0]["id"]
    wl = {"prompt": "Once upon a time", "n_predict": 4}
    for name in ("chat", "completions"):
        body = payload_for({"workload": wl, "serving": {"endpoint": name}}, model, 0)
        lines: list[str] = []
        with httpx.stream("POST", server_url + ENDPOINTS[name].path, json=body, timeout=60) as resp:
            lines = list(resp.iter_lines())
        rec = loadgen.RequestRecord(idx=0, kind="measured")
        usage = None
        for i, line in enumerate(lines):
            if loadgen.is_done_line(line):
                loadgen.settle(rec, ENDPOINTS[name], float(i))
                break
            data = loadgen.parse_sse_line(line)
            if data is not None:
                ENDPOINTS[name].fold(rec, data, float(i))
                usage = data.get("usage") or usage
        assert rec.status == "ok" and usage is not None and rec.token_source == "usage"
        assert (rec.output_tokens, rec.prompt_tokens) == (usage["completion_tokens"], usage["prompt_tokens"])
        if write:
            CAPTURES.mkdir(parents=True, exist_ok=True)
            source = (
                f"# source: llama-server (scripts/setup.sh build, /props build_info "
                f"{httpx.get(server_url + '/props', timeout=5).json().get('build_info')}) serving the tiny "
                f"demo model edgeprof-demo-tiny-q4_k_m.gguf with -np 2 on loopback; POST "
                f"{ENDPOINTS[name].path} body {json.dumps(body)}; raw SSE lines as received\n"
            )
            (CAPTURES / f"llama-server_{name}_stream.txt").write_text(source + "\n".join(lines) + "\n")


@needs_server
def test_an_api_key_comes_from_the_variable_the_plan_names(tmp_path: Path, tiny_models) -> None:
    """A server started with --api-key: the key from $EDGEPROF_TEST_API_KEY gets through; a wrong key is a
    failed run with the server's 401; an unset variable is a failed run that says which."""
    assert SERVER is not None
    engine = open_engine(tmp_path / "s.db")
    extra = ("--api-key", "synthetic-test-key")
    with running_llama_server(SERVER, tiny_models["Q4_K_M"], slots=1, extra=extra) as url:
        text = foreign_plan_toml(url, conc=[1], requests=2, api_key_env="EDGEPROF_TEST_API_KEY")
        plan = parse_plan(text, source="plan.toml", base=tmp_path)
        outcomes = []
        for key in ("synthetic-test-key", "wrong-key", None):
            env = env_clean()
            env.pop("EDGEPROF_TEST_API_KEY", None)
            if key is not None:
                env["EDGEPROF_TEST_API_KEY"] = key
            outcome = run_plan(engine, plan, out=io.StringIO(), env=env, new_sweep=True)
            ((run, level, reqs, _p),) = rows_of(engine, outcome.sweep_id)
            outcomes.append((run.status, run.reason or "", level, reqs))
    (ok, _r, level, _q), (bad, bad_reason, _l, bad_reqs), (unset, unset_reason, _l2, _q2) = outcomes
    assert ok == "ok" and level is not None and level.n_ok == 2
    assert bad == "error" and "HTTP 401" in bad_reason and all(q.http_status == 401 for q in bad_reqs)
    assert unset == "error" and "$EDGEPROF_TEST_API_KEY is not set" in unset_reason


@needs_server
def test_both_endpoints_and_two_thread_counts_scrape_as_four_and_two_series(
    tmp_path: Path, server_url: str, tiny_models: dict[str, Path]
) -> None:
    """Real runs only: the chat and completions sweeps at c = 1, 2 and ``bench -t 1,2`` in one database; a
    scrape of the metrics endpoint on it, parsed by prometheus_client, holds one series per level and per
    config."""
    from prometheus_client.parser import text_string_to_metric_families

    engine = open_engine(tmp_path / "prom.db")
    for endpoint in ("chat", "completions"):
        plan = parse_plan(foreign_plan_toml(server_url, endpoint, requests=2), source="p.toml", base=tmp_path)
        assert run_plan(engine, plan, out=io.StringIO(), env=env_clean()).counts == {"ok": 2}
    argv = ["-m", str(tiny_models["Q8_0"]), "-p", "16", "-n", "4", "-r", "1", "-t", "1,2"]
    bench = bench_plan(parse_bench_args(argv))
    # two tests (pp16, tg4) at two thread counts
    assert run_plan(engine, bench, new_sweep=True, out=io.StringIO(), env=env_clean()).counts == {"ok": 4}

    server = start_metrics_server(engine, 0)  # what an agent's --metrics-port serves, scraped over HTTP
    try:
        with httpx.Client(timeout=30) as client:
            scraped = client.get(f"http://127.0.0.1:{server.port}/metrics")
    finally:
        server.stop()
    assert scraped.status_code == 200
    families = {
        fam.name: [dict(sample.labels) for sample in fam.samples]
        for fam in text_string_to_metric_families(scraped.text)
    }
    ttft = families["edgeprof_serving_ttft_seconds"]
    assert sorted((lab["endpoint"], lab["concurrency"]) for lab in ttft) == [
        ("chat", "1"), ("chat", "2"), ("completions", "1"), ("completions", "2"),
    ]  # fmt: skip
    tg = families["edgeprof_tg_tokens_per_second"]
    assert sorted(lab["threads"] for lab in tg) == ["1", "2"]
    for name, samples in families.items():  # one sample per label set: no series collides with another
        assert len(samples) == len({tuple(sorted(lab.items())) for lab in samples}), name
