"""The child process of one run: load a model with llama.cpp, serve the fixed requests, report events.

Run as ``edgeprof.runners.llama_worker --event-fd N`` with the job (JSON) on stdin. Events go out as JSON
lines on fd N; stdout is pointed at stderr first, so nothing llama.cpp prints can corrupt the event stream.
The steps: ``begin`` (event stream, job, start), ``load_reported`` (model and context, set up by
runners/llama_context.py), ``serve`` (each rep's ``Request.run``, its phases and measurement), for a soak
workload ``run_soak`` (runners/soak.py: the request back to back, one event per window), ``done``; the
quality worker shares the first two.

Timing (docs/measurements.md): every time is ``time.monotonic()`` (CLOCK_MONOTONIC, shared with the parent
and the sampler). Prefill and decode durations come from llama.cpp's own counters (``llama_perf_context``),
read before and after each phase, never from this Python loop; TTFT and e2e are measured around the request.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any

from edgeprof.runners.llama_context import free_threadpool, install_log_capture, load_model
from edgeprof.runners.protocol import (
    EXIT_BAD_SPEC,
    EXIT_LOAD_FAILED,
    EXIT_OK,
    EXIT_REQUEST_FAILED,
    FAULT_ARM_ENV,
    FAULT_ARM_VALUE,
    FAULT_ENV,
    SLOW_FILE_ENV,
    TOKEN_TRACE_ENV,
    encode_event,
    kv_cells,
    vm_hwm_mb,
)
from edgeprof.runners.soak import SlowWhileFileSays, run_soak

T_PROCESS_START = time.monotonic()

_EVENT_FD = -1


def emit(event_type: str, /, **fields: Any) -> None:
    fields["event"] = event_type
    data = encode_event(fields)
    view = memoryview(data)
    while view:
        written = os.write(_EVENT_FD, view)
        view = view[written:]


def emit_hello(ll: Any) -> None:
    """The build this child runs (stored as the run's build record): version, system_info, offload."""
    emit(
        "hello",
        t=time.monotonic(),
        llama_cpp_python=getattr(ll, "__version__", "unknown"),
        system_info=ll.llama_print_system_info().decode(errors="replace").strip(),
        gpu_offload=bool(ll.llama_supports_gpu_offload()),
        **ggml_build(),
    )


def ggml_build() -> dict[str, str]:
    """ggml's version and commit, as the library this child loaded was built (the llama.cpp tree's commit,
    which llama-bench prints as build_commit); the path of the loaded library gives the same handle back."""
    import glob

    import llama_cpp

    out: dict[str, str] = {}
    found = sorted(glob.glob(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.*")))
    try:
        lib = ctypes.CDLL(found[0]) if found else None
    except OSError:
        lib = None
    if lib is None:
        return out
    for name in ("ggml_version", "ggml_commit"):
        fn = getattr(lib, name, None)
        if fn is None:
            continue
        fn.restype = ctypes.c_char_p
        value = fn()
        if value:
            out[name] = value.decode(errors="replace")
    return out


def maybe_fault(stage: str, model_path: str) -> None:
    spec = os.environ.get(FAULT_ENV, "")
    # Honoured only when the test suite armed it too (tests/conftest.py): a user's or a service's stray
    # variable must never fake a crash, which would be stored as a real one.
    if not spec or os.environ.get(FAULT_ARM_ENV) != FAULT_ARM_VALUE:
        return
    action, _, rest = spec.partition("@")
    where, _, match = rest.partition(":")
    if where != stage or (match and match not in model_path):
        return
    emit("fault_injected", spec=spec, stage=stage)  # the parent stores the outcome as injected, not real
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "segv":
        ctypes.string_at(0)  # a real invalid read, as a crash inside native code would be
    elif action == "abort":
        os.abort()
    elif action == "hang":
        while True:
            time.sleep(3600)
    elif action == "exit":
        os._exit(1)
    elif action == "raise":
        raise RuntimeError(f"injected failure at {stage}")


def slowdown_for_tests() -> SlowWhileFileSays | None:
    """The soak's simulated throttling (``SLOW_FILE_ENV``), only when the test suite armed it: a stray
    variable must never slow a real soak."""
    path = os.environ.get(SLOW_FILE_ENV, "")
    if not path or os.environ.get(FAULT_ARM_ENV) != FAULT_ARM_VALUE:
        return None
    return SlowWhileFileSays(path)


class TokenTrace:
    """Per decode step of one rep (only when ``TOKEN_TRACE_ENV`` names a folder): wall time in
    ``llama_decode``, in sampling, and between the previous step's end and this one's start, beside
    llama.cpp's ``t_eval_ms`` delta, the figure edgeprof reports. A diagnostic: one JSON line per rep."""

    def __init__(self, folder: str) -> None:
        self.path = os.path.join(folder, f"tokens-{os.getpid()}.jsonl")
        self.rows: list[tuple[float, float, float, float]] = []
        self._end = 0.0
        self._counter = 0.0

    @classmethod
    def from_env(cls) -> TokenTrace | None:
        folder = os.environ.get(TOKEN_TRACE_ENV, "")
        return cls(folder) if folder and os.path.isdir(folder) else None

    def begin(self, counter_ms: float) -> None:
        self.rows, self._end, self._counter = [], time.perf_counter(), counter_ms

    def step(self, t_start: float, t_decoded: float, counter_ms: float) -> None:
        t_end = time.perf_counter()
        ms = 1000.0
        self.rows.append(
            (
                (t_decoded - t_start) * ms,
                (t_end - t_decoded) * ms,
                (t_start - self._end) * ms,
                counter_ms - self._counter,
            )
        )
        self._end, self._counter = t_end, counter_ms

    def write(self, kind: str, rep: int) -> None:
        cols = ("decode_ms", "sample_ms", "gap_ms", "counter_ms")
        line = {
            "kind": kind,
            "rep": rep,
            **{c: [r[i] for r in self.rows] for i, c in enumerate(cols)},
        }
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")


class Request:
    """One greedy (or seeded) generation with llama.cpp's counters read around prefill and decode."""

    def __init__(self, llama_cpp: Any, ctx: Any, vocab: Any, job: dict[str, Any]) -> None:
        self.ll = llama_cpp
        self.ctx = ctx
        self.vocab = vocab
        self.workload = job["workload"]
        self.n_batch = int(job["params"]["n_batch"])
        # one request sees the whole cache only when it is unified or holds one sequence (llama_n_ctx_seq)
        self.n_ctx = int(self.ll.llama_n_ctx_seq(ctx))
        # a chat the agent rendered with the model's template; the context depth a request starts at, as
        # llama-bench -d measures a model with a context already filled
        self.rendered_prompt: str | None = job.get("rendered_prompt")
        self.depth = int(job["params"].get("depth", 0))
        self._depth_state: Any = None  # the KV cache at depth, saved once and restored before each request
        self.fill_interval: tuple[float, float] | None = None
        self.trace = TokenTrace.from_env()

    def prompt_text(self) -> tuple[str | None, bool]:
        """(the text to tokenize, parse_special): a rendered chat always parses its special tokens."""
        if self.rendered_prompt is not None:
            return self.rendered_prompt, True
        return self.workload.get("prompt"), bool(self.workload.get("parse_special", False))

    def tokenize(self) -> list[int]:
        wl = self.workload
        if wl.get("prompt_tokens"):
            return self._exact_tokens(int(wl["prompt_tokens"]), wl.get("prompt") or "")
        text, parse_special = self.prompt_text()
        return self._tokenize(text or "", add_special=True, parse_special=parse_special)

    def _tokenize(self, text: str, add_special: bool, parse_special: bool = False) -> list[int]:
        data = text.encode("utf-8")
        n_max = len(data) + 8
        buf = (self.ll.llama_token * n_max)()
        n = self.ll.llama_tokenize(self.vocab, data, len(data), buf, n_max, add_special, parse_special)
        if n < 0:
            n_max = -n
            buf = (self.ll.llama_token * n_max)()
            n = self.ll.llama_tokenize(self.vocab, data, len(data), buf, n_max, add_special, parse_special)
        return list(buf[:n])

    def fill_depth(self) -> float | None:
        """Bring the KV cache to ``depth`` tokens before a request; returns the fill's wall ms (None when
        restored or depth 0).

        Like llama-bench -d: the first time the context is prefilled (deterministic filler text, not timed as
        part of the request) and its sequence state saved; later requests restore that state, so each
        measured request starts at exactly the same depth.
        """
        ll = self.ll
        mem = ll.llama_get_memory(self.ctx)
        ll.llama_memory_clear(mem, True)
        if self.depth <= 0:
            return None
        if self._depth_state is not None:
            buf, size = self._depth_state
            if ll.llama_state_seq_set_data(self.ctx, buf, size, 0) == size:
                return None
            ll.llama_memory_clear(mem, True)  # incompatible state: fill again
        t0 = time.monotonic()
        tokens = self._exact_tokens(self.depth, "")
        for start in range(0, len(tokens), self.n_batch):
            self.decode_tokens(tokens[start : start + self.n_batch])
        ll.llama_synchronize(self.ctx)
        t1 = time.monotonic()
        fill_ms = (t1 - t0) * 1000.0
        self.fill_interval = (t0, t1)  # a phase of its own, apart from the request's prefill
        size = int(ll.llama_state_seq_get_size(self.ctx, 0))
        buf = (ctypes.c_uint8 * size)()
        got = int(ll.llama_state_seq_get_data(self.ctx, buf, size, 0))
        self._depth_state = (buf, got) if got > 0 else None
        return fill_ms

    def _exact_tokens(self, n_tokens: int, seed_text: str) -> list[int]:
        # A fixed text, tokenized, repeated and cut to exactly n tokens (BOS first): deterministic per model.
        filler = seed_text or (
            "The quick brown fox jumps over the lazy dog while the edge device measures every token. "
        )
        first = self._tokenize(filler, add_special=True)
        body = self._tokenize(filler, add_special=False) or first
        out = list(first)
        while len(out) < n_tokens:
            out.extend(body)
        return out[:n_tokens]

    def new_sampler(self) -> Any:
        ll = self.ll
        wl = self.workload
        chain = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
        temperature = float(wl.get("temperature", 0.0))
        if temperature <= 0.0:
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_greedy())
        else:
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_top_k(int(wl.get("top_k", 40))))
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_top_p(float(wl.get("top_p", 0.95)), 1))
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_temp(temperature))
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_dist(int(wl.get("seed", 42))))
        return chain

    def perf(self) -> tuple[float, float, int, int]:
        p = self.ll.llama_perf_context(self.ctx)
        t_p, t_e = float(p.t_p_eval_ms), float(p.t_eval_ms)
        # llama_perf_context reports max(1, n) for both counts (to avoid division by zero in its printer);
        # a count whose time is still zero is really zero.
        n_p = int(p.n_p_eval) if t_p > 0 else 0
        n_e = int(p.n_eval) if t_e > 0 else 0
        return t_p, t_e, n_p, n_e

    def decode_tokens(self, tokens: list[int]) -> None:
        arr = (self.ll.llama_token * len(tokens))(*tokens)
        rc = self.ll.llama_decode(self.ctx, self.ll.llama_batch_get_one(arr, len(tokens)))
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc} (KV cache full or batch rejected)")

    def _prompt_sha256(self, tokens: list[int]) -> str:
        # a text or chat prompt: the hash of the text (as rendered); a synthetic one: of its token ids
        text, _ = self.prompt_text()
        if self.workload.get("prompt_tokens") or text is None:
            return hashlib.sha256(json.dumps(tokens).encode()).hexdigest()
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def piece(self, token: int) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = self.ll.llama_token_to_piece(self.vocab, token, buf, 64, 0, False)
        return buf.raw[: max(n, 0)]

    def run(self, model_path: str) -> dict[str, Any]:
        """One measured request: the depth restored or filled (untimed), the prompt prefilled, then up to
        n_predict tokens decoded; llama.cpp's counters are read after the prefill and at the end."""
        ll = self.ll
        n_predict = int(self.workload["n_predict"])
        ignore_eos = bool(self.workload.get("ignore_eos", True))
        stops = [s for s in self.workload.get("stop", ()) if s]
        depth_fill_ms = self.fill_depth()  # before the request clock starts: the context is already there
        sampler = self.new_sampler()
        ll.llama_perf_context_reset(self.ctx)
        try:
            t_request = time.monotonic()
            tokens = self.tokenize()
            if kv_cells(self.depth, len(tokens), n_predict) > self.n_ctx:
                raise ValueError(
                    f"depth ({self.depth}) + prompt ({len(tokens)} tokens) + n_predict ({n_predict}) - 1 "
                    f"exceeds the context ({self.n_ctx})"
                )
            maybe_fault("prefill", model_path)
            p_pre = self._prefill(tokens)
            token = int(ll.llama_sampler_sample(sampler, self.ctx, -1))
            t_first = time.monotonic()
            gen = self._generate(sampler, token, n_predict, ignore_eos, stops, model_path)
            ll.llama_synchronize(self.ctx)
            t_end = time.monotonic()
            p_end = self.perf()
        finally:
            ll.llama_sampler_free(sampler)
        clock = _Clock(t_request, t_first, t_end, depth_fill_ms)
        return self._measurement(tokens, gen, p_pre, p_end, clock)

    def _prefill(self, tokens: list[int]) -> tuple[float, float, int, int]:
        """The prompt in n_batch pieces; llama.cpp's counters after it."""
        for start in range(0, len(tokens), self.n_batch):
            self.decode_tokens(tokens[start : start + self.n_batch])
        # Compute is asynchronous: llama.cpp books a batch's time when the context synchronizes, so the
        # counters are read only after an explicit sync.
        self.ll.llama_synchronize(self.ctx)
        return self.perf()

    def _generate(
        self, sampler: Any, token: int, n_predict: int, ignore_eos: bool, stops: list[str], model_path: str
    ) -> _Generation:
        """Decode from the first sampled ``token`` until n_predict tokens, an EOS (unless ignored) or a
        stop string; why it ended is stored per request."""
        ll = self.ll
        out = [token]
        finish = "length"
        # the first EOS is noted even when it is ignored, so quality never compares text past an EOS
        # (agent/report/rows.py)
        first_eos: int | None = 0 if ll.llama_vocab_is_eog(self.vocab, token) else None
        tail = self.piece(token) if stops else b""
        maybe_fault("decode", model_path)
        trace = self.trace
        if trace:
            trace.begin(self.perf()[1])
        while len(out) < n_predict:
            if not ignore_eos and ll.llama_vocab_is_eog(self.vocab, token):
                finish = "eos"
                break
            if stops and any(s.encode() in tail for s in stops):
                finish = "stop"
                break
            t_start = time.perf_counter() if trace else 0.0
            self.decode_tokens([token])
            t_decoded = time.perf_counter() if trace else 0.0
            token = int(ll.llama_sampler_sample(sampler, self.ctx, -1))
            if trace:
                trace.step(t_start, t_decoded, self.perf()[1])
            out.append(token)
            if first_eos is None and ll.llama_vocab_is_eog(self.vocab, token):
                first_eos = len(out) - 1
            if stops:
                tail = (tail + self.piece(token))[-256:]
        if finish == "length" and not ignore_eos and ll.llama_vocab_is_eog(self.vocab, token):
            finish = "eos"  # the last allowed token was EOS: the model stopped, not the limit
        if finish == "length" and stops and any(s.encode() in tail for s in stops):
            finish = "stop"
        return _Generation(out, finish, first_eos)

    def _measurement(
        self,
        tokens: list[int],
        gen: _Generation,
        p_pre: tuple[float, float, int, int],
        p_end: tuple[float, float, int, int],
        clock: _Clock,
    ) -> dict[str, Any]:
        """The stored figures of one request (the ``measurement`` event's fields)."""
        ll, out = self.ll, gen.tokens
        prefill_ms = p_pre[0] + p_pre[1]
        n_prompt = p_pre[2] + p_pre[3]
        decode_ms = p_end[1] - p_pre[1]
        n_gen = p_end[3] - p_pre[3]
        ttft_ms = (clock.t_first - clock.t_request) * 1000.0
        e2e_ms = (clock.t_end - clock.t_request) * 1000.0
        text = b"".join(self.piece(t) for t in out).decode("utf-8", errors="replace")
        return {
            "n_prompt": n_prompt,
            "prefill_ms": prefill_ms,
            "pp_tps": n_prompt / (prefill_ms / 1000.0) if prefill_ms > 0 else None,
            "ttft_ms": ttft_ms,
            "n_gen": n_gen,
            "decode_ms": decode_ms if n_gen > 0 else None,
            # over the decode steps actually run; one step is no rate (NULL, not a made-up number)
            "tg_tps": n_gen / (decode_ms / 1000.0) if n_gen >= 2 and decode_ms > 0 else None,
            "e2e_ms": e2e_ms,
            "tpot_ms": (e2e_ms - ttft_ms) / (len(out) - 1) if len(out) > 1 else None,
            "tokens_out": len(out),
            "output_tokens": out,
            "output_hash": hashlib.sha256(json.dumps(out).encode()).hexdigest(),
            "output_text": text[:4000],
            "finish_reason": gen.finish,
            "first_eos_index": gen.first_eos,
            "depth": self.depth,
            "depth_fill_ms": clock.depth_fill_ms,
            # KV occupancy after the request: depth + prompt + decoded tokens (llama_memory_seq_pos_max + 1)
            "kv_used_cells": int(ll.llama_memory_seq_pos_max(ll.llama_get_memory(self.ctx), 0)) + 1,
            "prompt_sha256": self._prompt_sha256(tokens),
            "prompt_n_tokens": len(tokens),
            "parse_special": self.prompt_text()[1] if not self.workload.get("prompt_tokens") else False,
            "t_request": clock.t_request,
            "t_first_token": clock.t_first,
            "t_end": clock.t_end,
        }


@dataclass(frozen=True)
class _Generation:
    tokens: list[int]
    finish: str  # length | eos | stop
    first_eos: int | None  # index of the first end-of-generation token, even one that was ignored


@dataclass(frozen=True)
class _Clock:
    t_request: float
    t_first: float
    t_end: float
    depth_fill_ms: float | None


def begin(argv: list[str], module: str) -> dict[str, Any] | None:
    """What every worker does first: events to the fd of ``--event-fd N`` (stdout into the log), the job
    from stdin, the ``start`` event, the start fault. None, said on stderr or as an event, when there is no
    usable job (the worker then exits with EXIT_BAD_SPEC)."""
    global _EVENT_FD
    if len(argv) != 2 or argv[0] != "--event-fd":
        print(f"usage: python -m {module} --event-fd N < job.json", file=sys.stderr)
        return None
    _EVENT_FD = int(argv[1])
    os.dup2(2, 1)  # llama.cpp and stray prints go to the log, never into the event stream
    try:
        # One line: the parent may keep stdin open to pace the reps (cooldown between reps).
        job: dict[str, Any] = json.loads(sys.stdin.readline())
    except ValueError as exc:
        emit("error", stage="spec", message=f"bad job JSON: {exc}")
        return None
    model_path = job["model_path"]
    emit("start", t=T_PROCESS_START, pid=os.getpid())
    maybe_fault("start", model_path)
    return job


def load_reported(ll: Any, job: dict[str, Any], phase_kind: str, rep: int = 0) -> tuple[Any, Any] | None:
    """Load the model and context, timed, with the ``loaded`` event and the load phase; None after an
    ``error`` event (stage "load") when that fails."""
    t_load = time.monotonic()
    try:
        maybe_fault("load", job["model_path"])
        model, ctx, effective = load_model(ll, job)
    except Exception as exc:  # noqa: BLE001 - reported to the parent as a load failure
        emit("error", stage="load", message=str(exc))
        return None
    t_loaded = time.monotonic()
    emit("loaded", load_ms=(t_loaded - t_load) * 1000.0, t_start=t_load, t_end=t_loaded, effective=effective)
    emit("phase", name="load", kind=phase_kind, rep=rep, t_start=t_load, t_end=t_loaded)
    return model, ctx


def rep_plan(job: dict[str, Any]) -> list[tuple[str, int]]:
    """(kind, rep) of each request: the cold one, then the warm-ups and steady reps unless cold only.

    A later block of steady reps (``job["block"]``: the sweep alternates the blocks of rival configs in time)
    runs in a fresh process of its own, without a cold rep: its first request after the load is a warm-up,
    discarded, however few warm-ups the plan asks for, and its steady reps carry their numbers in the run."""
    repeat = job["repeat"]
    block = job.get("block")
    if block:
        first_warmup = int(block["warmup_from"])
        plan = [("warmup", first_warmup + i) for i in range(max(1, int(repeat["warmup"])))]
        first = int(block["steady_from"])
        return plan + [("steady", first + i) for i in range(int(block["steady_n"]))]
    plan = [("cold", job.get("cold_rep", 0))]
    if not job.get("cold_only"):
        plan += [("warmup", i) for i in range(int(repeat["warmup"]))]
        plan += [("steady", i) for i in range(int(repeat["steady"]))]
    return plan


def serve(request: Request, plan: list[tuple[str, int]], model_path: str, pause: bool) -> None:
    """Each rep of the plan, its phases and its measurement as events; paced by the parent when asked."""
    for i, (kind, rep) in enumerate(plan):
        if pause and i > 0 and kind == "steady":
            # The parent cools the device down before each steady rep, then says go.
            emit("await", kind=kind, rep=rep)
            sys.stdin.readline()
        request.fill_interval = None
        result = request.run(model_path)
        if request.trace:
            request.trace.write(kind, rep)
        phases: list[tuple[str, float, float]] = []
        if request.fill_interval is not None:  # the untimed depth fill, stored as a phase of its own
            phases.append(("depth_fill", *request.fill_interval))
        phases.append(("prefill", result["t_request"], result["t_first_token"]))
        phases.append(("decode", result["t_first_token"], result["t_end"]))
        for name, t_start, t_end in phases:
            emit("phase", name=name, kind=kind, rep=rep, t_start=t_start, t_end=t_end)
        emit("measurement", kind=kind, rep=rep, peak_rss_mb=vm_hwm_mb(), **result)


def main(argv: list[str]) -> int:
    job = begin(argv, "edgeprof.runners.llama_worker")
    if job is None:
        return EXIT_BAD_SPEC
    model_path = job["model_path"]

    import llama_cpp as ll

    install_log_capture(ll)
    ll.llama_backend_init()
    emit_hello(ll)
    block = job.get("block")
    # A block's load is no cold start (the sweep counts cold starts per fresh process of the first block);
    # its phase carries the block's number, which pairs it with the rivals' blocks of the same round.
    kind, block_index = ("warmup", int(block["index"])) if block else ("cold", 0)
    loaded = load_reported(ll, job, phase_kind=kind, rep=block_index)
    if loaded is None:
        return EXIT_LOAD_FAILED
    model, ctx = loaded
    request = Request(ll, ctx, ll.llama_model_get_vocab(model), job)
    plan = rep_plan(job)
    soak = job["workload"].get("soak") if job["workload"].get("kind") == "soak" else None
    try:
        serve(request, plan, model_path, pause=bool(job.get("pause_between_reps")))
        if soak is not None and not job.get("cold_only"):
            # straight after the cold request, in this process: a soak is one measurement with one load
            run_soak(request, soak, emit, lambda: maybe_fault("soak", model_path), pace=slowdown_for_tests())
    except Exception as exc:  # noqa: BLE001 - reported to the parent; earlier reps are already out
        emit("error", stage="request", message=f"{type(exc).__name__}: {exc}")
        return EXIT_REQUEST_FAILED
    finally:
        ll.llama_free(ctx)
        free_threadpool()  # after the context that used it
        ll.llama_model_free(model)
    emit("done", t=time.monotonic())
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
