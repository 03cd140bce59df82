"""A llama-bench command line as an edgeprof plan, built in code: each llama-bench test (pp, tg, pp+tg) is a
workload, each of its other flags an axis of the matrix, so the sweep measures every combination llama-bench
would, each config in its own child process with edgeprof's telemetry, and stores it like any sweep.

How a test maps onto edgeprof's request (a prefill of ``prompt_tokens``, then ``n_predict - 1`` single-token
decode steps after the first sampled token), so that the timed tokens are llama-bench's:

- ``pp<P>``: a P-token prompt and one sampled token: the prefill is the timed part (P tokens);
- ``tg<N>``: a one-token prompt (BOS, as llama-bench starts) and N tokens: N single-token decodes in all;
- ``pp<P>+tg<N>``: a P-token prompt, then N decode steps: P + N tokens.

Only the steady repetitions are llama-bench's samples; the cold request and the warm-up stay stored apart.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from edgeprof.gguf import GGUFError, GGUFInfo
from edgeprof.plan import (
    AXES,
    NGL_ALL,
    Collect,
    Cooldown,
    Decide,
    ModelEntry,
    Plan,
    PlanError,
    Repeat,
    Workload,
    default_threads,
)
from edgeprof.plan.model_files import checked_model_info
from edgeprof.report.llamabench.args import BenchArgs
from edgeprof.report.llamabench.identity import ctx_of_test

# The plan text of a bench sweep: its command line as a TOML comment, so that a reader of plan_text that
# parses TOML sees an empty plan, and the records of a sweep can tell a bench sweep from a plan's
BENCH_MARK = "# edgeprof bench"
PLAN_NAME = "llama-bench"
# A hung config must become a stored timeout, not a hung command
TIMEOUT_S = 600.0
_TEST_NAME = re.compile(r"(?:pp(\d+))?(\+)?(?:tg(\d+))?")


def name_of_test(n_prompt: int, n_gen: int) -> str:
    """llama-bench's name of a test: pp512, tg128, pp512+tg128."""
    if n_gen == 0:
        return f"pp{n_prompt}"
    if n_prompt == 0:
        return f"tg{n_gen}"
    return f"pp{n_prompt}+tg{n_gen}"


def parse_test_name(name: str) -> tuple[int, int] | None:
    """(n_prompt, n_gen) of a test name; None for a workload name that is not one."""
    m = _TEST_NAME.fullmatch(name)
    if m is None or (m.group(1) is None and m.group(3) is None):
        return None
    if (m.group(2) is not None) != (m.group(1) is not None and m.group(3) is not None):
        return None
    return int(m.group(1) or 0), int(m.group(3) or 0)


def workload_of_test(n_prompt: int, n_gen: int) -> Workload:
    """The request that times exactly llama-bench's tokens for this test (see the module docstring)."""
    if n_gen == 0:
        prompt_tokens, n_predict = n_prompt, 1
    elif n_prompt == 0:
        prompt_tokens, n_predict = 1, n_gen
    else:
        prompt_tokens, n_predict = n_prompt, n_gen + 1
    return Workload(
        name=name_of_test(n_prompt, n_gen),
        prompt=None,
        prompt_tokens=prompt_tokens,
        n_predict=n_predict,
        ctx_fit=True,  # each test at its own p + n + d, as llama-bench
    )


def _models(given: tuple[str, ...], base: Path) -> tuple[list[ModelEntry], dict[str, GGUFInfo]]:
    """Each -m file read now (a typo is an error before anything runs), labelled as it was typed: llama-bench
    prints model_filename as given."""
    problems: list[str] = []
    models: list[ModelEntry] = []
    infos: dict[str, GGUFInfo] = {}
    for raw in dict.fromkeys(given):
        path = Path(raw).expanduser()
        path = path if path.is_absolute() else base / path
        try:
            infos[str(path)] = checked_model_info(path)
        except GGUFError as exc:
            problems.append(f"-m {raw}: {exc}")
            continue
        models.append(ModelEntry(path=str(path), label=raw))
    if problems:
        raise PlanError("edgeprof bench", problems)
    return models, infos


def bench_cooldown(delay_s: int) -> Cooldown:
    """llama-bench's --delay: a fixed sleep before each test; none by default, as llama-bench."""
    return Cooldown(delay_s=float(delay_s))


def bench_plan(args: BenchArgs, base: Path | None = None) -> Plan:
    """The plan of a llama-bench command line; raises PlanError for a model file it cannot read."""
    from edgeprof.plan.bounds import logical_cpus

    cpus = logical_cpus()
    over = sorted({t for t in args.n_threads if t > cpus})
    if over:  # the plan path's ceiling: more threads than CPUs only oversubscribe (and every config failed)
        raise PlanError(
            "edgeprof bench",
            [f"-t {','.join(map(str, over))}: this machine has {cpus} logical CPUs; more oversubscribes"],
        )
    models, infos = _models(args.models, base or Path.cwd())
    tests = args.tests()
    # Every test runs at its own context (its workload's ctx_fit); the axis holds the largest, which the
    # plan's bounds and memory estimate see
    n_ctx = max(ctx_of_test(p, n, d) for p, n in tests for d in args.n_depth or (0,))
    axes: dict[str, tuple[Any, ...]] = {axis: (default,) for axis, (_f, default) in AXES.items()}
    axes.update(
        ngl=tuple(NGL_ALL if v < 0 else v for v in args.n_gpu_layers),
        ctx=(n_ctx,),
        n_batch=args.n_batch,
        n_ubatch=args.n_ubatch,
        flash_attn=args.flash_attn,
        type_k=args.type_k,
        type_v=args.type_v,
        threads=args.n_threads or (default_threads(),),
        depth=args.n_depth,
        offload_kqv=tuple(not v for v in args.no_kv_offload),
        op_offload=tuple(not v for v in args.no_op_offload),
        poll=args.poll,
        cpu_mask=args.cpu_mask,
        cpu_strict=args.cpu_strict,
        prio=(args.prio,),
    )
    return Plan(
        name=PLAN_NAME,
        source="edgeprof bench",
        text=f"{BENCH_MARK} {shlex.join(args.argv)}\n",
        models=tuple(models),
        axes=axes,
        workloads=tuple(workload_of_test(p, n) for p, n in tests),
        # llama-bench: one warm-up (none with --no-warmup), then -r timed repetitions; edgeprof's cold
        # request comes first
        repeat=Repeat(cold=1, warmup=1 if args.warmup else 0, steady=args.reps),
        decide=Decide(sequential=False),  # llama-bench's -r is the number of samples: exactly that many
        timeout_s=TIMEOUT_S,
        cold_cache="keep",  # llama-bench reads the model from the page cache as it finds it
        cooldown=bench_cooldown(args.delay_s),
        # telemetry samples through every rep, but no idle baseline before each config: llama-bench waits
        # for nothing between tests, and a 3-s baseline per test would be most of a quick bench's time
        collect=Collect(idle_s=0.0),
        model_info=infos,
    )
