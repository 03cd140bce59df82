"""The child process of one run: load a model with llama.cpp, serve the fixed requests, report events.

Run as ``edgeprof.runners.llama_worker --event-fd N`` with the job (JSON) on stdin. Events go out as JSON
lines on fd N; stdout is pointed at stderr first, so nothing llama.cpp prints can corrupt the event stream.

Timing (DESIGN §3): every time is ``time.monotonic()`` (CLOCK_MONOTONIC, shared with the parent and the
sampler). Prefill and decode durations come from llama.cpp's own counters (``llama_perf_context``), read
before and after each phase, never from this Python loop; TTFT and e2e are measured around the request.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import signal
import sys
import time
from typing import Any

from edgeprof.runners import threadpool
from edgeprof.runners.procfs import vm_hwm_mb
from edgeprof.runners.protocol import (
    EXIT_BAD_SPEC,
    EXIT_LOAD_FAILED,
    EXIT_OK,
    EXIT_REQUEST_FAILED,
    FAULT_ARM_ENV,
    FAULT_ARM_VALUE,
    FAULT_ENV,
    KV_CACHE_TYPES,
    encode_event,
)

T_PROCESS_START = time.monotonic()

_EVENT_FD = -1
_POOL: threadpool.Threadpool | None = None  # the context's CPU threadpool, freed after the context


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
    )


def maybe_fault(stage: str, model_path: str) -> None:
    spec = os.environ.get(FAULT_ENV, "")
    # Honoured only when the test suite armed it too (tests/conftest.py): a user's or a service's stray
    # variable must never fake a crash (issue 11).
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
        # issue 10: a chat rendered by the agent with the model's template, the context depth (llama-bench -d)
        self.rendered_prompt: str | None = job.get("rendered_prompt")
        self.depth = int(job["params"].get("depth", 0))
        self._depth_state: Any = None  # the KV cache at depth, saved once and restored before each request
        self.fill_interval: tuple[float, float] | None = None

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
            self._decode(tokens[start : start + self.n_batch])
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

    def _sampler(self) -> Any:
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

    def _perf(self) -> tuple[float, float, int, int]:
        p = self.ll.llama_perf_context(self.ctx)
        t_p, t_e = float(p.t_p_eval_ms), float(p.t_eval_ms)
        # llama_perf_context reports max(1, n) for both counts (to avoid division by zero in its printer);
        # a count whose time is still zero is really zero.
        n_p = int(p.n_p_eval) if t_p > 0 else 0
        n_e = int(p.n_eval) if t_e > 0 else 0
        return t_p, t_e, n_p, n_e

    def _decode(self, tokens: list[int]) -> None:
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

    def _piece(self, token: int) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = self.ll.llama_token_to_piece(self.vocab, token, buf, 64, 0, False)
        return buf.raw[: max(n, 0)]

    def run(self, model_path: str) -> dict[str, Any]:
        ll = self.ll
        n_predict = int(self.workload["n_predict"])
        ignore_eos = bool(self.workload.get("ignore_eos", True))
        stops = [s for s in self.workload.get("stop", ()) if s]
        depth_fill_ms = self.fill_depth()  # before the request clock starts: the context is already there
        sampler = self._sampler()
        ll.llama_perf_context_reset(self.ctx)
        try:
            t_request = time.monotonic()
            tokens = self.tokenize()
            if self.depth + len(tokens) + n_predict > self.n_ctx:
                raise ValueError(
                    f"depth ({self.depth}) + prompt ({len(tokens)} tokens) + n_predict ({n_predict}) "
                    f"exceeds the context ({self.n_ctx})"
                )
            maybe_fault("prefill", model_path)
            for start in range(0, len(tokens), self.n_batch):
                self._decode(tokens[start : start + self.n_batch])
            # Compute is asynchronous: llama.cpp books a batch's time when the context synchronizes, so the
            # counters are read only after an explicit sync.
            ll.llama_synchronize(self.ctx)
            p_pre = self._perf()
            token = int(ll.llama_sampler_sample(sampler, self.ctx, -1))
            t_first = time.monotonic()
            out = [token]
            finish = "length"
            # issue 10: why generation ended is stored per request; the first EOS is noted even when it
            # is ignored, so quality never compares text past an EOS (agent/report/rows.py)
            first_eos: int | None = 0 if ll.llama_vocab_is_eog(self.vocab, token) else None
            tail = self._piece(token) if stops else b""
            maybe_fault("decode", model_path)
            while len(out) < n_predict:
                if not ignore_eos and ll.llama_vocab_is_eog(self.vocab, token):
                    finish = "eos"
                    break
                if stops and any(s.encode() in tail for s in stops):
                    finish = "stop"
                    break
                self._decode([token])
                token = int(ll.llama_sampler_sample(sampler, self.ctx, -1))
                out.append(token)
                if first_eos is None and ll.llama_vocab_is_eog(self.vocab, token):
                    first_eos = len(out) - 1
                if stops:
                    tail = (tail + self._piece(token))[-256:]
            if finish == "length" and not ignore_eos and ll.llama_vocab_is_eog(self.vocab, token):
                finish = "eos"  # the last allowed token was EOS: the model stopped, not the limit
            if finish == "length" and stops and any(s.encode() in tail for s in stops):
                finish = "stop"
            ll.llama_synchronize(self.ctx)
            t_end = time.monotonic()
            p_end = self._perf()
        finally:
            ll.llama_sampler_free(sampler)

        prefill_ms = p_pre[0] + p_pre[1]
        n_prompt = p_pre[2] + p_pre[3]
        decode_ms = p_end[1] - p_pre[1]
        n_gen = p_end[3] - p_pre[3]
        ttft_ms = (t_first - t_request) * 1000.0
        e2e_ms = (t_end - t_request) * 1000.0
        text = b"".join(self._piece(t) for t in out).decode("utf-8", errors="replace")
        return {
            "n_prompt": n_prompt,
            "prefill_ms": prefill_ms,
            "pp_tps": n_prompt / (prefill_ms / 1000.0) if prefill_ms > 0 else None,
            "ttft_ms": ttft_ms,
            "n_gen": n_gen,
            "decode_ms": decode_ms if n_gen > 0 else None,
            # over the decode steps actually run; one step is no rate (issue 10: NULL, not a number)
            "tg_tps": n_gen / (decode_ms / 1000.0) if n_gen >= 2 and decode_ms > 0 else None,
            "e2e_ms": e2e_ms,
            "tpot_ms": (e2e_ms - ttft_ms) / (len(out) - 1) if len(out) > 1 else None,
            "tokens_out": len(out),
            "output_tokens": out,
            "output_hash": hashlib.sha256(json.dumps(out).encode()).hexdigest(),
            "output_text": text[:4000],
            "finish_reason": finish,
            "first_eos_index": first_eos,
            "depth": self.depth,
            "depth_fill_ms": depth_fill_ms,
            # KV occupancy after the request: depth + prompt + decoded tokens (llama_memory_seq_pos_max + 1)
            "kv_used_cells": int(ll.llama_memory_seq_pos_max(ll.llama_get_memory(self.ctx), 0)) + 1,
            "prompt_sha256": self._prompt_sha256(tokens),
            "prompt_n_tokens": len(tokens),
            "parse_special": self.prompt_text()[1] if not self.workload.get("prompt_tokens") else False,
            "t_request": t_request,
            "t_first_token": t_first,
            "t_end": t_end,
        }


def _set(struct: Any, name: str, value: Any) -> None:
    """Set a field of a llama.cpp params struct, refusing names the struct lacks: ctypes would silently
    accept them as plain Python attributes, and the knob would do nothing (as ``use_mmap`` once did)."""
    if name not in {f[0] for f in type(struct)._fields_}:
        raise RuntimeError(f"this llama-cpp-python has no {type(struct).__name__}.{name}; cannot apply it")
    setattr(struct, name, value)


def _load(ll: Any, job: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    params = job["params"]
    path = job["model_path"]
    mparams = ll.llama_model_default_params()
    _set(mparams, "n_gpu_layers", int(params["n_gpu_layers"]))
    fields = {f[0] for f in type(mparams)._fields_}
    if "load_mode" in fields:  # llama.cpp replaced use_mmap with a load mode
        load_mode = ll.LLAMA_LOAD_MODE_MMAP if params["use_mmap"] else ll.LLAMA_LOAD_MODE_NONE
        _set(mparams, "load_mode", load_mode)
    else:
        _set(mparams, "use_mmap", bool(params["use_mmap"]))
    model = ll.llama_model_load_from_file(path.encode(), mparams)
    if not model:
        raise RuntimeError(f"llama.cpp could not load {path} (see log tail)")
    cparams = ll.llama_context_default_params()
    _set(cparams, "n_ctx", int(params["n_ctx"]))
    _set(cparams, "n_batch", int(params["n_batch"]))
    _set(cparams, "n_ubatch", int(params["n_ubatch"]))
    _set(cparams, "n_threads", int(params["n_threads"]))
    _set(cparams, "n_threads_batch", int(params["n_threads"]))
    flash = {
        "on": ll.LLAMA_FLASH_ATTN_TYPE_ENABLED,
        "off": ll.LLAMA_FLASH_ATTN_TYPE_DISABLED,
        "auto": ll.LLAMA_FLASH_ATTN_TYPE_AUTO,
    }
    _set(cparams, "flash_attn_type", flash[params["flash_attn"]])
    _set(cparams, "type_k", KV_CACHE_TYPES[params["type_k"]])
    _set(cparams, "type_v", KV_CACHE_TYPES[params["type_v"]])
    _set(cparams, "no_perf", False)  # the default turns llama.cpp's counters off; they are the measurement
    # issue 10: llama-bench's values unless the plan says otherwise (tools/llama-bench/llama-bench.cpp,
    # to_llama_cparams: swa_full = false, offload_kqv = !no_kv_offload, op_offload = !no_op_offload; n_seq_max
    # and kv_unified stay llama_context_default_params()'s). llama_context_default_params() has swa_full =
    # true, which made a sliding-window model's KV cache several times larger than llama.cpp's tools use.
    for name, default in PARITY_CPARAMS.items():
        _set(cparams, name, type(default)(params.get(name, default)))
    poll = int(params.get("poll", DEFAULT_POLL))
    KV_LOG.clear()
    FA_LOG.clear()
    ctx = ll.llama_init_from_model(model, cparams)
    if not ctx:
        ll.llama_model_free(model)
        raise RuntimeError(
            "llama.cpp could not create the context (out of memory, or unsupported parameters)"
        )
    # issue 12: one persistent CPU threadpool per context, as llama-bench/llama-server create; without it
    # ggml builds a pool inside every llama_decode (on a build without OpenMP: n_threads-1 OS threads
    # started and joined per decoded token). See runners/threadpool.py, benchmarks/diag_decode_timeline.py.
    global _POOL
    _POOL, pool_why = threadpool.attach(ll, ctx, int(params["n_threads"]), poll)
    if _POOL is None and poll != DEFAULT_POLL:
        ll.llama_free(ctx)
        ll.llama_model_free(model)
        raise RuntimeError(f"poll {poll} needs an attached threadpool: {pool_why}")
    effective = {
        "n_ctx": int(ll.llama_n_ctx(ctx)),
        "n_batch": int(ll.llama_n_batch(ctx)),
        "n_ubatch": int(ll.llama_n_ubatch(ctx)),
        "n_threads": int(ll.llama_n_threads(ctx)),
        "n_threads_batch": int(ll.llama_n_threads_batch(ctx)),
        "n_gpu_layers": int(params["n_gpu_layers"]),
        # a CPU-only build ignores -ngl: the run measured the CPU whatever the plan asked for
        "gpu_offload_supported": bool(ll.llama_supports_gpu_offload()),
        "n_layer": int(ll.llama_model_n_layer(model)),
        "flash_attn": params["flash_attn"],
        "flash_attn_effective": flash_attn_effective(params["flash_attn"], FA_LOG),
        "type_k": params["type_k"],
        "type_v": params["type_v"],
        "use_mmap": bool(params["use_mmap"]),
        "load_mode": int(mparams.load_mode) if "load_mode" in fields else None,
        "model_size_bytes": int(ll.llama_model_size(model)),
        "n_params": int(ll.llama_model_n_params(model)),
        # issue 10: the context parameters in effect (read back from llama.cpp where it can say)
        **{name: getattr(cparams, name) for name in PARITY_CPARAMS},
        "n_seq_max": int(ll.llama_n_seq_max(ctx)),
        "n_ctx_seq": int(ll.llama_n_ctx_seq(ctx)),
        "n_swa": int(ll.llama_model_n_swa(model)),
        "poll": poll,
        "threadpool": (
            f"attached (n_threads {_POOL.n_threads}, poll {_POOL.poll})"
            if _POOL is not None
            else f"ggml default (created per graph, poll 50): {pool_why}"
        ),
        "depth": int(params.get("depth", 0)),
        "split_mode": int(mparams.split_mode),
        "main_gpu": int(mparams.main_gpu),
        "use_extra_bufts": bool(mparams.use_extra_bufts),
        "n_ctx_train": int(ll.llama_model_n_ctx_train(model)),
        **kv_cache_from_log(KV_LOG),
        "load_mode_effective": LOAD_MODE_SEEN[-1] if LOAD_MODE_SEEN else None,
    }
    return model, ctx, effective


# llama-bench's context values (see _load); poll is its --poll default, also ggml's own threadpool default.
PARITY_CPARAMS: dict[str, Any] = {
    "swa_full": False,
    "kv_unified": False,
    "offload_kqv": True,
    "op_offload": True,
    "n_seq_max": 1,
}
DEFAULT_POLL = 50

# llama.cpp's log lines, kept while a context is created: the KV cache sizes are only reported there.
KV_LOG: list[str] = []
LOAD_MODE_SEEN: list[str] = []  # llama.cpp's "loading model tensors ... (load_mode = mmap)" line
FA_LOG: list[str] = []  # llama.cpp's "Flash Attention enabled" / "... not supported, set to disabled" lines
_LOG_CALLBACK: Any = None

_KV_LINE = re.compile(
    r"llama_kv_cache: size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)/(\d+) seqs\)"
)


def kv_cache_from_log(lines: list[str]) -> dict[str, Any]:
    """KV cache sizes as llama.cpp reports them ('llama_kv_cache: size = 36.00 MiB (2048 cells, 18 layers,
    1/1 seqs) ...'; one line per cache: a sliding-window model has a full-size and a SWA cache)."""
    caches = []
    for line in lines:
        m = _KV_LINE.search(line)
        if m:
            size_mib, cells, layers = float(m.group(1)), int(m.group(2)), int(m.group(3))
            caches.append({"size_mib": size_mib, "cells": cells, "layers": layers})
    if not caches:
        return {"kv_caches": None, "kv_cache_mib": None}
    return {"kv_caches": caches, "kv_cache_mib": round(sum(c["size_mib"] for c in caches), 2)}


def flash_attn_effective(requested: str, lines: list[str]) -> str | None:
    """"on"/"off" as llama.cpp resolved ``requested``; None when "auto" and llama.cpp said nothing (an older
    llama.cpp that does not log its choice): not measured, so not guessed."""
    if requested in ("on", "off"):
        return requested
    for line in lines:
        if "not supported" in line or "disabled" in line:
            return "off"
        if "enabled" in line:
            return "on"
    return None


def install_log_capture(ll: Any) -> None:
    """Route llama.cpp's log through us: every line still goes to stderr (the log tail the parent keeps),
    and the KV cache lines are kept for the effective parameters."""
    global _LOG_CALLBACK

    @ll.llama_log_callback
    def _callback(level: int, text: bytes, _user: Any) -> None:
        if text:
            os.write(2, text)
            if b"llama_kv_cache" in text:
                KV_LOG.append(text.decode("utf-8", errors="replace"))
            elif b"Flash Attention" in text:  # -fa auto: llama.cpp's choice for this model and device
                FA_LOG.append(text.decode("utf-8", errors="replace"))
            elif b"(load_mode = " in text:  # what llama.cpp resolved (AUTO: mmap unless a device lacks it)
                m = re.search(rb"\(load_mode = (\w+)\)", text)
                if m:
                    LOAD_MODE_SEEN.append(m.group(1).decode())

    _LOG_CALLBACK = _callback  # ctypes callbacks must outlive their registration
    ll.llama_log_set(_callback, ctypes.c_void_p(0))


def main(argv: list[str]) -> int:
    global _EVENT_FD
    if len(argv) != 2 or argv[0] != "--event-fd":
        print("usage: python -m edgeprof.runners.llama_worker --event-fd N < job.json", file=sys.stderr)
        return EXIT_BAD_SPEC
    _EVENT_FD = int(argv[1])
    os.dup2(2, 1)  # llama.cpp and stray prints go to the log, never into the event stream
    try:
        # One line: the parent may keep stdin open to pace the reps (cooldown between reps).
        job = json.loads(sys.stdin.readline())
    except ValueError as exc:
        emit("error", stage="spec", message=f"bad job JSON: {exc}")
        return EXIT_BAD_SPEC
    model_path = job["model_path"]
    emit("start", t=T_PROCESS_START, pid=os.getpid())
    maybe_fault("start", model_path)

    import llama_cpp as ll

    install_log_capture(ll)
    ll.llama_backend_init()
    emit_hello(ll)

    t_load = time.monotonic()
    try:
        maybe_fault("load", model_path)
        model, ctx, effective = _load(ll, job)
    except Exception as exc:  # noqa: BLE001 - reported to the parent as a load failure
        emit("error", stage="load", message=str(exc))
        return EXIT_LOAD_FAILED
    t_loaded = time.monotonic()
    emit("loaded", load_ms=(t_loaded - t_load) * 1000.0, t_start=t_load, t_end=t_loaded, effective=effective)
    emit("phase", name="load", kind="cold", rep=0, t_start=t_load, t_end=t_loaded)

    vocab = ll.llama_model_get_vocab(model)
    request = Request(ll, ctx, vocab, job)
    repeat = job["repeat"]
    plan: list[tuple[str, int]] = [("cold", job.get("cold_rep", 0))]
    if not job.get("cold_only"):
        plan += [("warmup", i) for i in range(int(repeat["warmup"]))]
        plan += [("steady", i) for i in range(int(repeat["steady"]))]
    pause = bool(job.get("pause_between_reps"))
    try:
        for i, (kind, rep) in enumerate(plan):
            if pause and i > 0 and kind == "steady":
                # The parent cools the device down before each steady rep, then says go.
                emit("await", kind=kind, rep=rep)
                sys.stdin.readline()
            request.fill_interval = None
            result = request.run(model_path)
            if request.fill_interval is not None:  # issue 10: the untimed depth fill, stored as its own phase
                emit(
                    "phase",
                    name="depth_fill",
                    kind=kind,
                    rep=rep,
                    t_start=request.fill_interval[0],
                    t_end=request.fill_interval[1],
                )
            emit(
                "phase",
                name="prefill",
                kind=kind,
                rep=rep,
                t_start=result["t_request"],
                t_end=result["t_first_token"],
            )
            emit(
                "phase",
                name="decode",
                kind=kind,
                rep=rep,
                t_start=result["t_first_token"],
                t_end=result["t_end"],
            )
            emit("measurement", kind=kind, rep=rep, peak_rss_mb=vm_hwm_mb(), **result)
    except Exception as exc:  # noqa: BLE001 - reported to the parent; earlier reps are already out
        emit("error", stage="request", message=f"{type(exc).__name__}: {exc}")
        return EXIT_REQUEST_FAILED
    finally:
        ll.llama_free(ctx)
        if _POOL is not None:  # after the context that used it
            _POOL.free()
        ll.llama_model_free(model)
    emit("done", t=time.monotonic())
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
