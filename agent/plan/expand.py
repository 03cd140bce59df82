"""A validated plan's matrix as the ordered list of run specs a sweep measures.

Order: power mode > model (plan order) > ngl > mmap > ctx > … > threads > runner load > workload, then the
model's soak workloads (once per matrix cell and runner), then its quality workloads. The outer levels are
the expensive changes: a power-mode switch takes seconds and changes the thermal state, a model reload reads
the file again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from edgeprof.plan.matrix import AXES
from edgeprof.plan.model import (
    ModelEntry,
    Params,
    Plan,
    Repeat,
    RunSpec,
    Workload,
    workload_applies,
    workload_for,
)
from edgeprof.plan.quality import quality_params
from edgeprof.plan.tasks import task_params
from edgeprof.runners.protocol import kv_cells
from edgeprof.runners.registry import is_serving


def expand(plan: Plan, sha256_of: dict[str, str]) -> list[RunSpec]:
    """The run specs of a plan, ordered: power mode > model (plan order) > ngl > mmap > ctx > … > threads >
    workload."""
    specs: list[RunSpec] = []
    # Power mode outermost: a switch takes seconds and changes the thermal state, so it happens once per mode.
    for power_mode in plan.power_modes or (None,):
        for model in plan.models:
            specs += _speed_specs(plan, model, sha256_of[model.path], power_mode)
            # after the speed configs too: a soak heats the device for minutes, which the short reps of the
            # speed configs must not inherit
            specs += _soak_specs(plan, model, sha256_of[model.path], power_mode)
            # after the model's speed configs, while the model file is still in the page cache
            specs += _per_model_specs(plan, model, sha256_of[model.path], power_mode)
    return specs


def _matrix_params(plan: Plan, power_mode: str | None) -> Iterator[Params]:
    """Each cell of the matrix's llama.cpp axes, in the order of AXES (the in-process runner's params)."""
    axis_names = list(AXES)
    for combo in _product([plan.axes[a] for a in axis_names]):
        values = {AXES[a][0]: v for a, v in zip(axis_names, combo, strict=True)}
        if values["n_ubatch"] is None:
            values["n_ubatch"] = min(512, values["n_batch"])
        yield Params(**values, power_mode=power_mode)


def _speed_specs(plan: Plan, model: ModelEntry, sha256: str, power_mode: str | None) -> Iterator[RunSpec]:
    for base in _matrix_params(plan, power_mode):
        for params in _runner_params(plan, base):
            for wl in plan.workloads:
                if wl.kind != "generation":
                    continue  # a soak once per cell in _soak_specs, a quality run once per model
                if not workload_applies(wl, model):
                    continue  # a per-model workload crosses only its models
                yield RunSpec(
                    model=model,
                    model_sha256=sha256,
                    params=fitted_ctx(params, wl),
                    workload=workload_for(wl, model),
                    repeat=plan.repeat,
                    timeout_s=plan.timeout_s,
                    cold_cache=plan.cold_cache,
                    cooldown_per_rep=plan.cooldown.per_rep,
                    rendered_prompt=plan.rendered.get((model.label, wl.name)),
                    serving=plan.serving if is_serving(params.runner) else None,
                )


def fitted_ctx(params: Params, wl: Workload) -> Params:
    """``params`` with the context a ``ctx_fit`` workload is sized to: exactly the cells its request fills
    at the cell's depth (llama.cpp pads it to 256 as it pads llama-bench's p + n + d)."""
    if not wl.ctx_fit or wl.prompt_tokens is None:
        return params
    return replace(params, n_ctx=kv_cells(params.depth, wl.prompt_tokens, wl.n_predict))


def _soak_specs(plan: Plan, model: ModelEntry, sha256: str, power_mode: str | None) -> Iterator[RunSpec]:
    """A soak runs once per matrix cell and runner: in-process, one cold request, then its request back to
    back for the duration; on a serving runner, closed loop at each concurrency (a soak measures what the
    device sustains, so no request rate paces it). Its child may run the duration plus the plan's timeout."""
    soaks = [wl for wl in plan.workloads if wl.soak is not None and workload_applies(wl, model)]
    if not soaks:
        return
    for base in _matrix_params(plan, power_mode):
        for params in _soak_runner_params(plan, base):
            for wl in soaks:
                yield _soak_spec(plan, model, sha256, params, wl)


def _soak_runner_params(plan: Plan, base: Params) -> Iterator[Params]:
    for runner in plan.runners:
        if not is_serving(runner):
            yield replace(base, runner=runner)  # in process: one config per cell
            continue
        for conc in plan.concurrency:
            yield replace(base, runner=runner, concurrency=conc, request_rate=None)


def _soak_spec(plan: Plan, model: ModelEntry, sha256: str, params: Params, wl: Workload) -> RunSpec:
    assert wl.soak is not None
    return RunSpec(
        model=model,
        model_sha256=sha256,
        params=params,
        workload=workload_for(wl, model),
        repeat=Repeat(cold=1, warmup=0, steady=0),
        timeout_s=plan.timeout_s + wl.soak.duration_s,
        cold_cache=plan.cold_cache,
        rendered_prompt=plan.rendered.get((model.label, wl.name)),
        serving=plan.serving if is_serving(params.runner) else None,
    )


def _per_model_specs(plan: Plan, model: ModelEntry, sha256: str, power_mode: str | None) -> Iterator[RunSpec]:
    """Quality workloads, then task workloads: each runs once per model, its numbers do not depend on the
    speed axes."""
    quality = [(wl, quality_params(plan.axes, wl.quality)) for wl in plan.workloads if wl.quality is not None]
    tasks = [(wl, task_params(plan.axes, wl.task)) for wl in plan.workloads if wl.task is not None]
    for wl, params in quality + tasks:
        yield RunSpec(
            model=model,
            model_sha256=sha256,
            params=Params(**params, power_mode=power_mode),
            workload=wl,
            repeat=Repeat(cold=1, warmup=0, steady=1),
            timeout_s=plan.timeout_s,
            cold_cache=plan.cold_cache,
        )


def _runner_params(plan: Plan, base: Params) -> Iterator[Params]:
    """The in-process runner once; a serving runner once per concurrency x request rate (the levels of one
    server config run back to back, lowest load first)."""
    for runner in plan.runners:
        if not is_serving(runner):
            yield replace(base, runner=runner)  # in process: one config per cell
            continue
        for rate in plan.request_rates:
            for conc in plan.concurrency:
                yield replace(base, runner=runner, concurrency=conc, request_rate=rate)


def _product(lists: list[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    if not lists:
        yield ()
        return
    for head in lists[0]:
        for rest in _product(lists[1:]):
            yield (head, *rest)
