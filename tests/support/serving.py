"""What the serving tests share.

- ``synthetic_request``: a request sent at t = 10 s with 3 output tokens, chunks at TTFT, +50 ms, +150 ms
  (the runner's per-request tests and the agent's per-level ones).
- ``serving_plan_toml``: one model under llama-server at each concurrency, small bounded levels.
- ``foreign_plan_toml``: the openai runner against a target URL, no model file, small bounded levels.
- ``running_llama_server``: a real llama-server the test starts itself (the binary setup.sh built), for
  the openai runner to measure as a server edgeprof did not start.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from edgeprof.runners.llama_server import find_server
from edgeprof.runners.loadgen import RequestRecord
from support.plans import plan_toml

# The tests that need the real llama-server: skipped where setup has not built it, never under CI.
SERVER, _WHERE = find_server()
needs_server = pytest.mark.skipif(
    SERVER is None and not os.environ.get("CI"),
    reason="llama-server not built (scripts/setup.sh builds it; CI always has it)",
)


def synthetic_request(idx: int, ttft_s: float, status: str = "ok") -> RequestRecord:
    """A synthetic request sent at t = 10 s: 3 output tokens, chunks at ttft, +50 ms, +150 ms."""
    rec = RequestRecord(idx=idx, kind="measured", status=status)
    rec.t_send = 10.0
    if status == "ok":
        rec.t_first = 10.0 + ttft_s
        rec.chunk_times = [rec.t_first, rec.t_first + 0.050, rec.t_first + 0.150]
        rec.t_end = rec.t_first + 0.150
        rec.output_tokens = 3
        rec.prompt_tokens = 16
        rec.server_prompt_ms = ttft_s * 1000.0 - 2.0
        rec.server_predicted_ms = 147.0
    else:
        rec.t_end = 10.5
        rec.error = "synthetic failure"
    return rec


def serving_plan_toml(
    model: Path,
    conc: Sequence[int] = (1, 4),
    requests: int | None = 8,
    req_timeout: float = 60,
    ready_timeout: float = 90,
    runner: Sequence[str] | None = ("llama-server",),
    repeat: dict[str, int] | None = None,
    **more: Any,
) -> str:
    """One model under the server at each concurrency. ``runner=None``: no runner axis at all; ``more``:
    keys of the [serving] table (``duration_s``), or ``request_rate`` for the matrix."""
    matrix: dict[str, Any] = {"runner": list(runner)} if runner is not None else {}
    matrix["concurrency"] = list(conc)
    if "request_rate" in more:
        matrix["request_rate"] = more.pop("request_rate")
    serving = {
        "requests": requests,
        "warmup_requests": 1,
        "request_timeout_s": req_timeout,
        "ready_timeout_s": ready_timeout,
        "slo": {"ttft_ms": 60000, "tpot_ms": 60000},
        **more,
    }
    return plan_toml(
        {"q4": model},
        name="serve",
        matrix=matrix,
        workloads=[{"name": "w", "prompt_tokens": 16, "n_predict": 8}],
        repeat={"steady": 5, **(repeat or {})},  # cold 1, warm-up 1, steady 5: the parser's own defaults
        run={"timeout_s": 180, "cold_cache": "keep"},
        tables={"serving": {k: v for k, v in serving.items() if v is not None}},
    )


def foreign_plan_toml(
    target: str,
    endpoint: str = "chat",
    conc: Sequence[int] = (1, 2),
    requests: int = 4,
    workload: dict[str, Any] | None = None,
    request_rate: Sequence[float] | None = None,
    **more: Any,
) -> str:
    """The openai runner against ``target`` at each concurrency (and ``request_rate``: open loop); no model
    file (the server has its own); ``more``: keys of the [serving] table."""
    serving = {
        "target": target,
        "endpoint": endpoint,
        "requests": requests,
        "warmup_requests": 1,
        "request_timeout_s": 60,
        "slo": {"ttft_ms": 60000, "tpot_ms": 60000},
        **more,
    }
    return plan_toml(
        [],
        name="foreign",
        matrix={"runner": ["openai"], "concurrency": list(conc)}
        | ({"request_rate": list(request_rate)} if request_rate is not None else {}),
        workloads=[workload or {"name": "w", "prompt": "Once upon a time", "n_predict": 8}],
        run={"timeout_s": 120},
        tables={"serving": serving},
    )


@contextlib.contextmanager
def running_llama_server(
    binary: str, model: Path, slots: int = 2, ready_s: float = 60.0, extra: Sequence[str] = ()
) -> Iterator[str]:
    """A llama-server on a free loopback port serving ``model`` with ``slots`` slots and /metrics (``extra``:
    more of its flags); yields its base URL and stops it after."""
    from edgeprof.runners.llama_server import free_port

    port = free_port()
    cmd = [binary, "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", str(256 * slots),
           "-np", str(slots), "-t", "1", "--metrics", "--no-webui", *extra]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base, proc, ready_s)
        yield base
    finally:
        stop_server(proc)


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """A server the test started, stopped: SIGTERM, then SIGKILL if it has not exited within 10 s."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _wait_healthy(base: str, proc: subprocess.Popen[bytes], ready_s: float) -> None:
    import httpx

    deadline = time.monotonic() + ready_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama-server exited with {proc.returncode} before it was ready")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(base + "/health", timeout=2.0).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"llama-server at {base} not ready within {ready_s:g} s")
