"""Serving measures the model, not the server's prompt cache, and a level that dropped requests is failed:

- against a real llama-server (started here, a server edgeprof did not start), the openai runner at
  c = 1 and 4, the same plan run twice: every request's prompt starts with its run's nonce and is sent with
  ``cache_prompt: false``, so the cache served no prompt token in either run (the server's own count, read
  back from each response) and the second run's TTFT lies in the first's band; with ``prompt_cache = true``
  the cache is the stated scenario and its count is shown;
- against llama-cpp-python's own server (``python -m llama_cpp.server``, whose default
  ``interrupt_requests`` ends a stream when the next request arrives), a level at c = 2 loses requests
  mid-stream: it is stored ``error`` with the failures counted by reason in the table, JSON and HTML
  reports, and ``edgeprof run`` exits 1."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select
from support.runs import clean_env, edgeprof
from support.serving import SERVER, foreign_plan_toml, needs_server, running_llama_server, stop_server

from edgeprof.plan import parse_plan
from edgeprof.report import build_rows, render_table
from edgeprof.runners.llama_server import SERVER_FAULT_ENV, free_port
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Run, ServingLevel
from edgeprof.sweep import run_plan

pytestmark = pytest.mark.timeout(600)

# A prompt of ~40 tokens, the same for every request but for the nonce in front of it.
STORY = "Once upon a time there was a small robot who lived by the sea and counted the waves " * 2
TTFT_BAND = 3.0  # the second run's median TTFT within [min / 3, max × 3] of the first's: no cache (×7 faster)


def env_clean() -> dict[str, str]:
    env = dict(os.environ)
    env.pop(SERVER_FAULT_ENV, None)
    return env


def levels(engine, sweep_id: int) -> list[tuple[Run, ServingLevel]]:
    with new_session(engine) as s:
        runs = list(s.scalars(select(Run).where(Run.sweep_id == sweep_id).order_by(Run.id)))
        out = [(r, s.scalar(select(ServingLevel).where(ServingLevel.run_id == r.id))) for r in runs]
        s.expunge_all()
    return out  # type: ignore[return-value]


def stats_of(level: ServingLevel) -> dict:
    return json.loads(level.stats_json or "{}")


@needs_server
def test_the_same_plan_twice_is_served_from_no_cache_unless_the_plan_asks(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    assert SERVER is not None
    workload = {"name": "story", "prompt": STORY, "n_predict": 8}
    engine = open_engine(tmp_path / "s.db")
    with running_llama_server(SERVER, tiny_models["Q4_K_M"], slots=4) as url:
        plan = parse_plan(foreign_plan_toml(url, conc=(1, 4), requests=8, workload=workload), base=tmp_path)
        sweeps = [
            run_plan(engine, plan, out=io.StringIO(), env=env_clean(), new_sweep=True) for _ in range(2)
        ]
        cached_plan = parse_plan(
            foreign_plan_toml(url, conc=(1,), requests=8, workload=workload, prompt_cache=True), base=tmp_path
        )
        cached = run_plan(engine, cached_plan, out=io.StringIO(), env=env_clean(), new_sweep=True)
    first, second = (levels(engine, o.sweep_id) for o in sweeps)
    nonces = set()
    for run, level in [*first, *second]:
        assert run.status == "ok", run.reason
        s = stats_of(level)
        assert s["n_cache_reported"] == 8, s  # the server's own count, from every measured response
        assert s["cached_prompt_tokens"] == 0 and s["prompt_cache_unasked"] is False, s
        assert s["cache_prompt_tokens_of"] >= 8 * 20  # the prompts were sent whole, not from the cache
        nonces.add(json.loads(run.effective_json or "{}")["prompt_nonce"])
    assert len(nonces) == 4  # one per level and sweep
    for (r1, l1), (r2, l2) in zip(first, second, strict=True):
        assert r1.concurrency == r2.concurrency
        band = stats_of(l1)["ttft_ms"]
        median2 = stats_of(l2)["ttft_ms"]["median"]
        assert band["min"] / TTFT_BAND <= median2 <= band["max"] * TTFT_BAND, (band, median2)
    (run, level), = levels(engine, cached.sweep_id)
    s = stats_of(level)
    assert run.status == "ok" and s["prompt_cache_asked"] is True and s["cached_prompt_tokens"] > 0, s
    with new_session(engine) as session:
        text = render_table(build_rows(session, cached.sweep_id, include_serving=True), width=400)
        text_first = render_table(build_rows(session, sweeps[0].sweep_id, include_serving=True), width=400)
    assert "cached prompt tok" in text and "(cache on)" in text, text
    assert "cached prompt tok" in text_first and "UNASKED" not in text_first


@contextlib.contextmanager
def llama_cpp_python_server(model: Path, ready_s: float = 90.0) -> Iterator[str]:
    """llama-cpp-python's own OpenAI-compatible server on a free loopback port, with its defaults (one
    model, ``interrupt_requests`` on: a new request ends the stream in progress)."""
    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "512", "--n_threads", "1"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_s
        while True:
            assert proc.poll() is None, f"llama_cpp.server exited with {proc.returncode}"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(base + "/v1/models", timeout=2.0).status_code == 200:
                    break
            assert time.monotonic() < deadline, "llama_cpp.server not ready"
            time.sleep(0.2)
        yield base
    finally:
        stop_server(proc)


needs_python_server = pytest.mark.skipif(
    importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("sse_starlette") is None,
    reason="llama-cpp-python's server needs its [server] packages (the dev extra installs them)",
)


@needs_python_server
def test_a_server_that_drops_requests_mid_stream_fails_the_level(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    db, plan = tmp_path / "d.db", tmp_path / "plan.toml"
    workload = {"name": "long", "prompt": "Once upon a time", "n_predict": 48}
    with llama_cpp_python_server(tiny_models["Q4_K_M"]) as url:
        plan.write_text(foreign_plan_toml(url, conc=(2,), requests=8, workload=workload), encoding="utf-8")
        proc = edgeprof("run", str(plan), "--db", str(db), "--no-telemetry", env=clean_env(), timeout=300)
    assert proc.returncode == 1, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert "1 of 1 configs did not end ok (1 error)" in proc.stderr
    engine = open_engine(db)
    ((run, level),) = levels(engine, 1)
    s = stats_of(level)
    assert run.status == "error" and s["n_ok"] < s["n_requests"] == 8
    dropped = s["errors_by_reason"].get("stream ended without a finish_reason", 0)
    assert dropped >= 1 and sum(s["errors_by_reason"].values()) == 8 - s["n_ok"], s["errors_by_reason"]
    assert run.reason and f"{dropped} × stream ended without a finish_reason" in run.reason
    table = edgeprof("report", "--db", str(db), env={**clean_env(), "COLUMNS": "200"})
    assert "failed serving level" in table.stdout and "× stream ended without a finish_reason" in table.stdout
    assert " None " not in table.stdout  # no ctx or ngl of a server that does not say: "—", "–"
    (row,) = json.loads(edgeprof("report", "--db", str(db), "--format", "json").stdout)
    assert row["status"] == "error"
    assert "stream ended without a finish_reason" in row["serving_errors_by_reason"]
    html = tmp_path / "r.html"
    edgeprof("report", "--db", str(db), "--html", str(html))
    assert "stream ended without a finish_reason" in html.read_text(encoding="utf-8")
