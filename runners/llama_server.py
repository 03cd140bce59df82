"""The serving runner: llama.cpp's ``llama-server`` started per config on 127.0.0.1, driven by the async
client in ``loadgen``, stopped cleanly; every ending (never ready, died mid-level, hung) is a result with a
status and a reason, like the in-process runner's ``ChildResult``. This module never touches storage.

Why llama-server and not llama-cpp-python's server: the latter serializes requests behind one lock (a second
request interrupts the first stream), so it cannot measure concurrency at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.runners import levels, loadgen
from edgeprof.runners.child_guard import own_process_group
from edgeprof.runners.protocol import (
    FAULT_ARM_ENV,
    FAULT_ARM_VALUE,
    check_model_file,
    check_served_model,
    vm_hwm_mb,
)

SERVER_ENV = "EDGEPROF_LLAMA_SERVER"
# Fault injection for the tests (like the worker's EDGEPROF_TEST_FAULT): "kill@level" SIGKILLs the server
# once the measured level has started, "kill@level:c4" only at concurrency 4; armed only by the test suite.
SERVER_FAULT_ENV = "EDGEPROF_TEST_SERVER_FAULT"
LOG_TAIL_BYTES = 4000


def find_server(env: dict[str, str] | None = None) -> tuple[str | None, str]:
    """(path or None, where it came from): $EDGEPROF_LLAMA_SERVER, else the venv's (scripts/setup.sh builds
    it there from the wheel's llama.cpp), else the PATH."""
    override = (os.environ if env is None else env).get(SERVER_ENV)
    if override:
        path = Path(override).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return str(path), f"${SERVER_ENV}"
        return None, f"${SERVER_ENV}={override} is not an executable file"
    venv_bin = Path(sys.prefix) / "bin" / "llama-server"
    if venv_bin.is_file() and os.access(venv_bin, os.X_OK):
        return str(venv_bin), "built by scripts/setup.sh"
    found = shutil.which("llama-server")
    if found:
        return found, "PATH"
    return None, "not built (run scripts/setup.sh) and not on the PATH; or set $" + SERVER_ENV


def setup_record() -> dict[str, Any] | None:
    """What scripts/setup.sh recorded about the llama-server it built (version, flags, key)."""
    try:
        value = json.loads((Path(sys.prefix) / "share" / "edgeprof" / "llama-server.json").read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


_PROBED: dict[tuple[str, int], dict[str, Any]] = {}


def probe_server(path: str, timeout_s: float = 20.0) -> dict[str, Any]:
    """The binary's build facts: ``--version`` (llama.cpp build number/commit, compiler) and
    ``--list-devices`` (the backends it can offload to; none = CPU only). Cached per binary (path, mtime)."""
    try:
        key = (path, os.stat(path).st_mtime_ns)
    except OSError:
        key = (path, 0)
    if key in _PROBED:
        return dict(_PROBED[key])
    info = _probe(path, timeout_s)
    _PROBED[key] = info
    return dict(info)


def _probe(path: str, timeout_s: float) -> dict[str, Any]:
    info: dict[str, Any] = {"path": path, "runtime": "llama-server"}
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=timeout_s, check=False
        )
        text = (out.stdout + out.stderr).strip()
        info["version_text"] = text[-1000:]
        # "version: 7001 (abc1234)" in llama.cpp's own builds; "version: 0.5.0-dev (build 0, commit unknown)"
        # in newer trees; from an sdist (no .git) the commit is "unknown": the sdist version identifies it
        m = re.search(
            r"version:\s*(\S+)\s*\((?:build\s*(\d+),\s*)?(?:commit\s*)?([0-9a-fA-F]+|unknown)\)", text
        )
        if m:
            info["version"], info["commit"] = m.group(1), m.group(3)
            info["build_number"] = m.group(2) or m.group(1)
    except (OSError, subprocess.SubprocessError) as exc:
        info["error"] = f"--version failed: {exc}"
        return info
    try:
        out = subprocess.run(
            [path, "--list-devices"], capture_output=True, text=True, timeout=timeout_s, check=False
        )
        devices = parse_devices(out.stdout + out.stderr)
        info["devices"] = devices
        info["gpu_offload"] = bool(devices)
    except (OSError, subprocess.SubprocessError) as exc:
        info["devices_error"] = str(exc)
    rec = setup_record()
    if rec is not None and Path(path) == Path(sys.prefix) / "bin" / "llama-server":
        info["setup"] = rec
    return info


def parse_devices(text: str) -> list[str]:
    """Device lines after ``Available devices:`` (e.g. ``  CUDA0: Orin (7620 MiB, 6000 MiB free)``)."""
    lines = text.splitlines()
    out: list[str] = []
    started = False
    for line in lines:
        if line.strip().lower().startswith("available devices"):
            started = True
            continue
        if started and re.match(r"^\s+\S+:\s", line):
            out.append(line.strip())
    return out


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_args(params: dict[str, Any], serving: dict[str, Any], model_path: str, port: int) -> list[str]:
    """The command line for one config. Non-unified KV with ``-c = ctx × slots`` so every slot gets the plan's
    ctx (llama.cpp splits -c between slots); ``--fit off`` so the server never silently shrinks ctx or the
    offload to fit (a config that does not fit must fail visibly); the host-RAM prompt cache off so repeated
    prompts never measure the prefix cache unless the plan turns caching on."""
    slots = int(serving["slots"])
    args = [
        "-m", model_path,
        "--host", "127.0.0.1",
        "--port", str(port),
        "-c", str(int(params["n_ctx"]) * slots),
        "-np", str(slots),
        "--no-kv-unified",
        "-ngl", str(params["n_gpu_layers"]),
        "-t", str(params["n_threads"]),
        "-b", str(params["n_batch"]),
        "-ub", str(params["n_ubatch"]),
        "-fa", str(params["flash_attn"]),
        "-ctk", str(params["type_k"]),
        "-ctv", str(params["type_v"]),
        "--metrics",
        "--no-slots",  # /slots would show every other user's prompt
        "--no-webui",
        "--fit", "off",
    ]  # fmt: skip
    if not params.get("use_mmap", True):
        args.append("--no-mmap")
    if not serving.get("cache_prompt", False):
        args += ["--cache-ram", "0"]
    return args


@dataclass
class ServingResult:
    """Everything one server process gave before it was stopped, and how it ended."""

    status: str  # ok | load_failed | error | crashed | timeout | interrupted
    reason: str | None
    t_spawn: float
    t_ready: float | None = None
    t_exit: float | None = None
    exit_code: int | None = None
    signal_name: str | None = None
    pid: int | None = None
    peak_rss_mb: float | None = None
    build: dict[str, Any] | None = None
    props: dict[str, Any] | None = None
    command: list[str] = field(default_factory=list)
    records: list[loadgen.RequestRecord] = field(default_factory=list)
    level_t_start: float | None = None
    level_t_end: float | None = None
    metrics_before: dict[str, float] | None = None
    metrics_after: dict[str, float] | None = None
    metrics_samples: list[dict[str, float]] = field(default_factory=list)
    phases: list[dict[str, Any]] = field(default_factory=list)
    log_tail: str = ""
    system_info: str | None = None


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - LOG_TAIL_BYTES))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _system_info(log_path: Path) -> str | None:
    try:
        with log_path.open("r", errors="replace") as fh:
            for i, line in enumerate(fh):
                if "system_info:" in line:
                    return line.split("system_info:", 1)[1].strip()[:2000]
                if i > 2000:
                    break
    except OSError:
        return None
    return None


def _last_error_line(text: str) -> str | None:  # the server also names exceptions
    for line in reversed(text.splitlines()):
        low = line.lower()
        if "error" in low or "failed" in low or "assert" in low or "exception" in low:
            return line.strip()[:300]
    return None


def prompt_key(serving: dict[str, Any], idx: int) -> str | None:
    """What makes request ``idx``'s prompt its own: a hash of the config's nonce (fresh per config run, so
    per sweep and level: a server that outlives a sweep holds no earlier prompt to serve) and the request's
    index, so two requests differ from the key's first character on (a shared ``[nonce:`` would be a prefix
    the cache could serve). None when the plan turns the prompt cache on: repeated prompts are then the
    scenario measured."""
    if serving.get("cache_prompt"):
        return None
    return hashlib.sha256(f"{serving.get('nonce') or '0'}:{idx}".encode()).hexdigest()[:12]


def token_prompt(n_tokens: int, vocab_size: int | None, key: str | None) -> list[int]:
    """A prompt of exactly ``n_tokens`` token ids drawn from ``key`` (``prompt_key``), so that two requests
    share no prefix the server could reuse (their first ids already differ but for one chance in ~30 000);
    one fixed prompt for ``key`` None. Ids stay well inside the vocabulary, away from the special tokens at
    its start."""
    span = max(16, min(vocab_size or 32000, 32000) - 300)
    rng = random.Random(key if key is not None else "edgeprof")
    return [300 + rng.randrange(span) for _ in range(n_tokens)]


def text_prompt(text: str, key: str | None) -> str:
    """``text`` behind its request's key (``[key] ``): at the very start, so no two prompts share a prefix."""
    return text if key is None else f"[{key}] {text}"


def payload_for(job: dict[str, Any], idx: int) -> dict[str, Any]:
    """The ``/completion`` body of request ``idx``: the workload greedy by default, streamed."""
    wl = job["workload"]
    serving = job["serving"]
    key = prompt_key(serving, idx)
    if wl.get("prompt_tokens"):
        prompt: Any = token_prompt(int(wl["prompt_tokens"]), job.get("vocab_size"), key)
    else:
        prompt = text_prompt(str(wl["prompt"]), key)
    return {
        "prompt": prompt,
        "n_predict": int(wl["n_predict"]),
        "ignore_eos": bool(wl.get("ignore_eos", True)),
        "temperature": float(wl.get("temperature", 0.0)),
        "top_k": int(wl.get("top_k", 40)),
        "top_p": float(wl.get("top_p", 0.95)),
        "seed": int(wl.get("seed", 42)),
        "cache_prompt": bool(serving.get("cache_prompt", False)),
        "stream": True,
    }


async def _get_json(
    base: str, path: str, timeout_s: float = 5.0, client: Any = None
) -> tuple[int | None, Any]:
    import httpx

    try:
        async with contextlib.AsyncExitStack() as stack:
            c = client if client is not None else await stack.enter_async_context(httpx.AsyncClient())
            code, data, _problem = await loadgen.get_bytes(c, base + path, timeout_s)
            if data is None:
                return code, None
            try:
                return code, loadgen.loads(data)
            except ValueError:
                return code, data.decode("utf-8", "replace")
    except (httpx.HTTPError, OSError):
        return None, None


def parse_prometheus(text: str) -> dict[str, float]:
    """``name value`` lines of a Prometheus text exposition (labels kept in the name); comments skipped."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.rsplit(None, 1)
        if len(parts) != 2:
            continue
        try:
            out[parts[0]] = float(parts[1])
        except ValueError:
            continue
    return out


async def scrape_metrics(base: str, timeout_s: float = 5.0, client: Any = None) -> dict[str, float] | None:
    """``/metrics`` parsed; on ``client`` (kept alive) where given. A fresh ``httpx.AsyncClient`` costs
    ~25 ms of CPU (its TLS context) on the event loop that times the streams: once per poll, that slowed
    a one-thread server's decode by ~10 % on a 2-core machine."""
    import httpx

    try:
        async with contextlib.AsyncExitStack() as stack:
            c = client if client is not None else await stack.enter_async_context(httpx.AsyncClient())
            code, data, _problem = await loadgen.get_bytes(c, base + "/metrics", timeout_s)
            if code != 200 or data is None:
                return None
            return parse_prometheus(data.decode("utf-8", "replace"))
    except (httpx.HTTPError, OSError):
        return None


def control_client() -> Any:
    """One kept-alive connection for the driver's own requests (``/health``, ``/props``, ``/metrics``),
    made before anything is timed; one connection, so it holds one of the server's HTTP threads."""
    import httpx

    return httpx.AsyncClient(limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))


class _Server:
    def __init__(self, cmd: list[str], env: dict[str, str] | None) -> None:
        log = tempfile.NamedTemporaryFile(prefix="edgeprof-server-", suffix=".log", delete=False)  # noqa: SIM115
        self.log_path = Path(log.name)
        self.t_spawn = time.monotonic()
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            **own_process_group(),  # a terminal's Ctrl-C reaches the agent, which stops the server itself
            env=dict(os.environ if env is None else env),
            close_fds=True,
        )
        log.close()
        self.peak_mb: float | None = None

    def poll_peak(self) -> None:
        now = vm_hwm_mb(self.proc.pid)
        if now is not None and (self.peak_mb is None or now > self.peak_mb):
            self.peak_mb = now

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace_s: float = 5.0) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def _ending(res: ServingResult, srv: _Server, stopped_by_us: bool) -> None:
    code = srv.proc.returncode
    res.t_exit = time.monotonic()
    if code is not None and code < 0:
        try:
            res.signal_name = signal.Signals(-code).name
        except ValueError:
            res.signal_name = f"SIG{-code}"
        if stopped_by_us and res.signal_name in ("SIGTERM", "SIGKILL"):
            res.signal_name = None  # our own clean stop, not a crash
    elif code is not None:
        res.exit_code = code


def run_serving(
    job: dict[str, Any],
    timeout_s: float,
    *,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    env: dict[str, str] | None = None,
    heartbeat: Callable[[], None] | None = None,
) -> ServingResult:
    """One serving config: spawn → ready → cold request → warm-ups → the measured level → clean stop."""
    env_map = os.environ if env is None else env
    path, where = find_server(dict(env_map))
    res = ServingResult(status="error", reason=None, t_spawn=time.monotonic())
    if path is None:
        res.reason = f"no llama-server: {where}"
        return res
    res.build = probe_server(path)
    res.build["source"] = where
    identity = job.get("model_identity")
    try:  # a file replaced since the sweep hashed it is never served under the hashed file's identity
        check_model_file(job["model_path"], identity)
    except RuntimeError as exc:
        res.status, res.reason = "load_failed", str(exc)
        return res
    port = free_port()
    serving = job["serving"]
    cmd = [path, *server_args(job["params"], serving, job["model_path"], port)]
    res.command = cmd
    srv = _Server(cmd, dict(env_map))
    res.t_spawn, res.pid = srv.t_spawn, srv.proc.pid
    if on_event is not None:
        on_event({"event": "start", "pid": srv.proc.pid, "runner": "llama-server"})
    base = f"http://127.0.0.1:{port}"
    deadline = srv.t_spawn + timeout_s
    stopped_by_us = False
    try:
        asyncio.run(_Drive(job, res, srv, base, deadline, on_event, heartbeat, dict(env_map)).run())
    except KeyboardInterrupt:
        res.status, res.reason = "interrupted", "stopped by the user (Ctrl-C / SIGTERM) during this run"
    finally:
        srv.poll_peak()
        died = not srv.alive()
        stopped_by_us = not died
        srv.stop()
        _ending(res, srv, stopped_by_us)
        res.peak_rss_mb = srv.peak_mb
        res.log_tail = _tail(srv.log_path)
        res.system_info = _system_info(srv.log_path)
        with contextlib.suppress(OSError):
            srv.log_path.unlink()
    if res.status not in ("ok", "interrupted", "timeout") and res.signal_name and not stopped_by_us:
        res.status = "crashed"
        res.reason = f"llama-server killed by {res.signal_name}" + (f" ({res.reason})" if res.reason else "")
    hint = _last_error_line(res.log_tail) if res.reason and res.status != "ok" else None
    if res.reason and hint and hint not in res.reason:
        res.reason = f"{res.reason} — {hint}"
    return res


class _Drive(levels.LevelDriver):
    """One config's server driven from its first ``/health`` to the end of the measured level (the levels
    are ``levels.LevelDriver``'s, shared with the openai runner); every way it can stop early is a status
    and a reason on ``res``."""

    def __init__(
        self,
        job: dict[str, Any],
        res: ServingResult,
        srv: _Server,
        base: str,
        deadline: float,
        on_event: Callable[[dict[str, Any]], None] | None,
        heartbeat: Callable[[], None] | None,
        env: dict[str, str],
    ) -> None:
        super().__init__(job, res, base, deadline, on_event, heartbeat)
        self.srv, self.base = srv, base
        # only the test suite arms fault injection (as for the worker's EDGEPROF_TEST_FAULT)
        self.fault = env.get(SERVER_FAULT_ENV, "") if env.get(FAULT_ARM_ENV) == FAULT_ARM_VALUE else ""
        self.control: Any = None  # the kept-alive client of ``control_client``, while ``run`` runs

    async def run(self) -> None:
        """ready → cold request → warm-ups → the measured level, then what the level's requests say."""
        async with control_client() as self.control:
            await self.steps()

    async def steps(self) -> None:
        res = self.res
        if not await self.wait_ready():
            return
        assert res.t_ready is not None
        self.phase("load", self.srv.t_spawn, res.t_ready, "cold")
        if not await self.loaded_the_hashed_file():
            return
        _code, props = await _get_json(self.base, "/props", client=self.control)
        res.props = props if isinstance(props, dict) else None
        # the first request of a fresh server (its first token closes the cold start)
        if not await self.level("cold", 1, None, 0, 1):
            return
        await self.levels(first_idx=1)

    def payload(self, idx: int) -> dict[str, Any]:
        return payload_for(self.job, idx)

    async def poll(self, kind: str, concurrency: int) -> dict[str, float] | None:
        self.srv.poll_peak()
        self.beat()
        got = await scrape_metrics(self.base, timeout_s=2.0, client=self.control)
        target = self.fault == "kill@level" or self.fault == f"kill@level:c{concurrency}"
        if target and kind == "measured" and self.srv.alive():
            os.kill(self.srv.proc.pid, signal.SIGKILL)
        return got

    async def counters(self) -> dict[str, float] | None:
        return await scrape_metrics(self.base, client=self.control)

    async def loaded_the_hashed_file(self) -> bool:
        """The file is still the one hashed now that the server has loaded it, and the server's own size of
        what it loaded is the hashed file's tensor bytes (``protocol.check_served_model``)."""
        if not self.job.get("model_identity"):
            return True
        _code, models = await _get_json(self.base, "/v1/models", client=self.control)
        try:
            check_served_model(self.job["model_path"], self.job["model_identity"], models)
        except RuntimeError as exc:
            self.res.status, self.res.reason = "load_failed", str(exc)
            return False
        return True

    async def wait_ready(self) -> bool:
        """``/health`` answers 200 once the model is loaded (503 while loading)."""
        res, srv = self.res, self.srv
        ready_timeout = min(float(self.serving.get("ready_timeout_s", 120.0)), max(0.0, self.left()))
        t_ready_limit = time.monotonic() + ready_timeout
        while True:
            if self.heartbeat is not None:
                self.heartbeat()
            srv.poll_peak()
            if not srv.alive():
                res.status = "load_failed"
                res.reason = f"llama-server exited (code {srv.proc.returncode}) before it was ready"
                return False
            code, _body = await _get_json(self.base, "/health", timeout_s=2.0, client=self.control)
            if code == 200:
                res.t_ready = time.monotonic()
                return True
            if time.monotonic() > t_ready_limit:
                res.status = "load_failed"
                res.reason = f"llama-server not ready within {ready_timeout:g} s (/health never answered 200)"
                return False
            await asyncio.sleep(0.1)

    def judge_level(self) -> None:
        """A server that died is the config's outcome; else what the level's requests say."""
        if not self.srv.alive():
            self.res.status = "crashed"
            self.res.reason = f"llama-server died during the measured level (exit {self.srv.proc.poll()})"
            return
        super().judge_level()
