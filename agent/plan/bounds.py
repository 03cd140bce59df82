"""Upper bounds for every number of a plan, each with its reason.

A plan is unattended input: a typo of three zeros must be a validation line, not a 9 GB allocation, a
hang with a fed watchdog, a uint32 wrap inside llama.cpp (ctx 4294967424 ran as 256) or a crash stored as a
measurement. Lower bounds and types stay with each table's parser (agent/plan/parse.py and the modules it
calls); this module adds the ceilings and the matrix size.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from typing import Any

from edgeprof.plan.checker import Checker

# Above any released model's trained context and far below llama.cpp's uint32 n_ctx.
MAX_CTX = 1 << 27
# llama.cpp allocates the logical batch up front; beyond this no prompt step gets faster.
MAX_BATCH = 65_536
# -ngl counts layers; "all" is 999 and nothing has more layers.
MAX_NGL = 999
# The worker keeps every rep's output tokens; these keep one config's memory and duration bounded.
MAX_COLD = 100
MAX_WARMUP = 100
MAX_STEADY = 1_000
# llama.cpp's sampler seed is a uint32.
MAX_SEED = 2**32 - 1
# llama.cpp's LLAMA_MAX_SEQ (src/llama-cparams.h): n_seq_max is a uint32 that wraps past 2^32 (4294967297 ran
# as 1, and was stored as asked), and more sequences than this are refused by llama.cpp itself.
MAX_N_SEQ = 256
# top_k is a C int32 in llama.cpp's sampler (2^63-1 wrapped to 1 through ctypes); no vocabulary has a
# million tokens, so a larger top_k keeps every token anyway.
MAX_TOP_K = 1_000_000
# Logits are divided by the temperature in float32: 1e308 is inf there. Far above 100 every token is
# equally likely already; the bound only stops a typo from becoming an inf or a 0 in the sampler.
MAX_TEMPERATURE = 100.0
# One child process may run a day, not forever: a hang is then a stored timeout by morning.
MAX_TIMEOUT_S = 86_400.0
MAX_WAIT_S = 86_400.0  # cooldown.max_wait_s
MAX_DELAY_S = 3_600.0  # cooldown.delay_s, cooldown.window_s: an hour between configs is already a long night
MAX_IDLE_S = 600.0  # collect.idle_s: a baseline needs seconds, not hours
MAX_INTERVAL_MS = 60_000  # collect.interval_ms: slower sampling sees nothing of a run
# A soak runs at most a night: a longer one is a plan typo (12 hours, not 12 days), and one soak is one child
# process whose events the agent holds until it ends.
MAX_SOAK_S = 43_200.0
# Each window is a stored row and a phase: 12 hours of 0.5 s windows is 86 400 rows, which stays small.
MAX_SOAK_WINDOWS = 100_000
# Serving: each concurrency level is a llama-server slot (--parallel, its sequences: LLAMA_MAX_SEQ) and a
# load-generator thread; a level is bounded by requests or seconds, and one level runs at most a night.
MAX_CONCURRENCY = MAX_N_SEQ
MAX_REQUESTS = 1_000_000
MAX_REQUEST_RATE = 10_000.0  # requests per second: beyond it the generator, not the server, is measured
MAX_SLO_MS = 86_400_000.0  # a day: a latency target beyond it is no target
# A matrix larger than this needs [run] max_configs: 10 000 configs of even a minute each is a week.
DEFAULT_MAX_CONFIGS = 10_000
MAX_MAX_CONFIGS = 1_000_000
# A plan is a page of TOML; a bigger file is refused before it is parsed.
MAX_PLAN_BYTES = 1 << 20


def logical_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _num(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def _too_big(chk: Checker, place: str, value: float, limit: float, why: str) -> None:
    if value > limit:
        chk.add(place, f"{_num(value)} is above the limit {_num(limit)} ({why})")


def _axis(chk: Checker, axes: Mapping[str, Iterable[Any]], axis: str, limit: float, why: str) -> None:
    for i, value in enumerate(axes.get(axis, ())):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            _too_big(chk, f"matrix.{axis}[{i}]", value, limit, why)


def check_bounds(
    chk: Checker,
    doc: Mapping[str, Any],
    axes: Mapping[str, Iterable[Any]],
    train_ctx: Mapping[str, int | None],
    workloads: Iterable[Any],
    repeat: Any,
    timeout_s: float,
    cooldown: Any,
    collect: Any,
    n_configs: int,
) -> None:
    """Add one problem per value above its ceiling; ``train_ctx``: model label -> GGUF context_length."""
    run_t = doc.get("run") if isinstance(doc.get("run"), dict) else {}
    assert isinstance(run_t, dict)
    _check_contexts(chk, run_t, axes, train_ctx)
    _check_axes(chk, axes)
    _check_values(chk, workloads, repeat, timeout_s, cooldown, collect)
    _check_matrix_size(chk, run_t, n_configs)


def _check_contexts(
    chk: Checker,
    run_t: dict[str, Any],
    axes: Mapping[str, Iterable[Any]],
    train_ctx: Mapping[str, int | None],
) -> None:
    """ctx below llama.cpp's 32-bit limit, and within each model's trained context unless the plan asks."""
    beyond = run_t.get("allow_ctx_beyond_train", False)
    if not isinstance(beyond, bool):
        chk.add("run.allow_ctx_beyond_train", f"expected true or false, got {beyond!r}")
        beyond = False
    ctxs = [c for c in axes.get("ctx", ()) if isinstance(c, int)]
    for i, ctx in enumerate(ctxs):
        _too_big(chk, f"matrix.ctx[{i}]", ctx, MAX_CTX, "llama.cpp's n_ctx is 32-bit; no model is that long")
    if beyond:
        return
    for label, trained in train_ctx.items():
        over = [c for c in ctxs if trained and c > trained and c <= MAX_CTX]
        if over:
            chk.add(
                "matrix.ctx",
                f"{', '.join(map(str, over))} above model {label!r}'s trained context_length {trained} "
                "(the KV cache would be allocated for nothing the model can use); set [run] "
                "allow_ctx_beyond_train = true to measure it anyway",
            )


def _check_axes(chk: Checker, axes: Mapping[str, Iterable[Any]]) -> None:
    _axis(chk, axes, "n_batch", MAX_BATCH, "llama.cpp allocates the batch up front")
    _axis(chk, axes, "n_ubatch", MAX_BATCH, "llama.cpp allocates the batch up front")
    _axis(chk, axes, "ngl", MAX_NGL, 'more than every layer; use "all"')
    _axis(chk, axes, "n_seq_max", MAX_N_SEQ, "llama.cpp's LLAMA_MAX_SEQ")
    cpus = logical_cpus()
    _axis(chk, axes, "threads", cpus, f"this machine has {cpus} logical CPUs; more only oversubscribes")


def _check_values(
    chk: Checker, workloads: Iterable[Any], repeat: Any, timeout_s: float, cooldown: Any, collect: Any
) -> None:
    for place, value, cap in (
        ("repeat.cold", repeat.cold, MAX_COLD),
        ("repeat.warmup", repeat.warmup, MAX_WARMUP),
        ("repeat.steady", repeat.steady, MAX_STEADY),
    ):
        _too_big(chk, place, value, cap, "each rep's output is kept in memory; split the plan instead")
    for i, wl in enumerate(workloads):
        seed = getattr(wl, "seed", 0)
        _too_big(chk, f"workload[{i}].seed", seed, MAX_SEED, "llama.cpp's seed is 32-bit")
        top_p = getattr(wl, "top_p", 0.0)
        _too_big(chk, f"workload[{i}].top_p", top_p, 1.0, "a probability")
        top_k = getattr(wl, "top_k", 1)
        _too_big(chk, f"workload[{i}].top_k", top_k, MAX_TOP_K, "llama.cpp's top_k is a 32-bit int")
        temperature = getattr(wl, "temperature", 0.0)
        _too_big(chk, f"workload[{i}].temperature", temperature, MAX_TEMPERATURE, "the sampler's float32")
        soak = getattr(wl, "soak", None)
        if soak is not None:
            _check_soak(chk, f"workload[{i}]", soak)
    _too_big(chk, "run.timeout_s", timeout_s, MAX_TIMEOUT_S, "a hang must be a stored timeout by morning")
    _too_big(chk, "cooldown.max_wait_s", cooldown.max_wait_s, MAX_WAIT_S, "the agent must not wait for days")
    _too_big(chk, "cooldown.delay_s", cooldown.delay_s, MAX_DELAY_S, "the agent must not wait for days")
    _too_big(chk, "cooldown.window_s", cooldown.window_s, MAX_DELAY_S, "a slope over an hour sees nothing")
    _too_big(chk, "collect.idle_s", collect.idle_s, MAX_IDLE_S, "an idle baseline needs seconds")
    _too_big(chk, "collect.interval_ms", collect.interval_ms, MAX_INTERVAL_MS, "slower sampling sees no run")


def check_serving_bounds(
    chk: Checker, concurrency: Iterable[int], request_rates: Iterable[float | None], serving: Any
) -> None:
    """Ceilings of the serving axes and the [serving] table (their lower bounds: agent/plan/serving.py)."""
    for i, level in enumerate(concurrency):
        _too_big(chk, f"matrix.concurrency[{i}]", level, MAX_CONCURRENCY, "llama-server slots: LLAMA_MAX_SEQ")
    for i, rate in enumerate(request_rates):
        if rate is not None:
            _too_big(chk, f"matrix.request_rate[{i}]", rate, MAX_REQUEST_RATE, "requests per second")
    if serving is None:
        return
    for place, value, cap, why in (
        ("serving.requests", serving.requests, MAX_REQUESTS, "one level must end by morning"),
        ("serving.warmup_requests", serving.warmup_requests, MAX_REQUESTS, "one level must end by morning"),
        ("serving.duration_s", serving.duration_s, MAX_SOAK_S, "one level runs at most a night"),
        ("serving.request_timeout_s", serving.request_timeout_s, MAX_TIMEOUT_S, "a hang must end by morning"),
        ("serving.ready_timeout_s", serving.ready_timeout_s, MAX_TIMEOUT_S, "a hang must end by morning"),
    ):
        if value is not None:
            _too_big(chk, place, value, cap, why)
    for key, value in serving.slo:
        _too_big(chk, f"serving.slo.{key}", value, MAX_SLO_MS, "a latency target of more than a day")


def _check_soak(chk: Checker, place: str, soak: Any) -> None:
    _too_big(chk, f"{place}.duration_s", soak.duration_s, MAX_SOAK_S, "a soak runs at most a night")
    windows = soak.duration_s / soak.window_s
    if soak.duration_s <= MAX_SOAK_S and windows > MAX_SOAK_WINDOWS:
        chk.add(
            f"{place}.window_s",
            f"{soak.window_s:g} s windows over {soak.duration_s:g} s are {windows:.0f} windows, above the "
            f"limit {MAX_SOAK_WINDOWS} (each is a stored row); use longer windows",
        )


def _check_matrix_size(chk: Checker, run_t: dict[str, Any], n_configs: int) -> None:
    limit: int = DEFAULT_MAX_CONFIGS
    if "max_configs" in run_t:
        raw = run_t["max_configs"]
        if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= MAX_MAX_CONFIGS:
            chk.add("run.max_configs", f"expected an integer from 1 to {MAX_MAX_CONFIGS}, got {raw!r}")
        else:
            limit = raw
    if n_configs > limit:
        chk.add(
            "matrix",
            f"{n_configs} configs is more than {limit}"
            + (
                "; set [run] max_configs if you mean it"
                if "max_configs" not in run_t
                else " ([run] max_configs)"
            ),
        )


def count_configs(*dims: Iterable[Any] | int) -> int:
    """The matrix size without building it (a 10^8-config matrix is refused, never expanded)."""
    n = 1
    for dim in dims:
        n *= max(1, dim if isinstance(dim, int) else len(list(dim)))
    return n


def finite(value: float) -> bool:
    return math.isfinite(value)
