"""The checks of the workloads against the models and the matrix, once every table is known to be
well-typed: the models a workload names exist, every chat renders with each model's template, and every
prompt fits every context it will run in."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from edgeprof.plan.chat import ChatMeta, ChatTemplateError, read_chat_meta, render_chat
from edgeprof.plan.checker import Checker
from edgeprof.plan.model import ModelEntry, Workload, estimate_prompt_tokens, workload_applies, workload_for
from edgeprof.runners.protocol import kv_cells


def check_workload_references(chk: Checker, workloads: list[Workload], models: list[ModelEntry]) -> None:
    """A workload's ``models`` and a quality workload's ``reference`` name models of the plan."""
    labels = {m.label for m in models} | {m.group for m in models if m.group}
    for wl in workloads:
        for name in wl.models or ():
            if name not in labels:
                chk.add(f"workload '{wl.name}'.models", f"no model labelled or grouped {name!r}")
        ref = wl.quality.reference if wl.quality is not None else None
        if wl.task is not None:
            ref = wl.task.reference
        if ref is not None and models and ref not in {m.label for m in models}:
            chk.add(f"workload '{wl.name}'.reference", f"no model labelled {ref!r}")


def render_chats(
    chk: Checker, models: list[ModelEntry], workloads: list[Workload]
) -> dict[tuple[str, str], str]:
    """Render every chat workload with each model's template, before anything runs: a model without one is a
    plan error (a wrong or missing template still runs, but gives answers nobody can trust)."""
    rendered: dict[tuple[str, str], str] = {}
    meta_of: dict[str, ChatMeta | None] = {}
    # A template that ran out of render time once is not rendered again for the next model or workload:
    # one hostile template costs one render's bound, not one per pair.
    too_slow: dict[str, ChatTemplateError] = {}
    for wl in workloads:
        if wl.messages is None:
            continue
        for model in models:
            if not workload_applies(wl, model):
                continue
            if model.path not in meta_of:
                meta_of[model.path] = _chat_meta(chk, wl, model)
            meta = meta_of[model.path]
            if meta is None:
                continue
            template = wl.chat_template or model.chat_template or meta.template
            if template is None:
                chk.add(
                    f"workload '{wl.name}'",
                    f"model {model.label} has no chat template (no tokenizer.chat_template in its GGUF); "
                    "give chat_template in the workload or the model entry, or use a text prompt",
                )
                continue
            if template in too_slow:
                chk.add(f"workload '{wl.name}'", f"model {model.label}: {too_slow[template]}")
                continue
            try:
                rendered[(model.label, wl.name)] = render_chat(
                    template,
                    wl.messages,
                    bos_token=meta.bos_token,
                    eos_token=meta.eos_token,
                    add_bos=meta.add_bos,
                )
            except ChatTemplateError as exc:
                if "to render" in str(exc):
                    too_slow[template] = exc
                chk.add(f"workload '{wl.name}'", f"model {model.label}: {exc}")
    return rendered


def _chat_meta(chk: Checker, wl: Workload, model: ModelEntry) -> ChatMeta | None:
    try:
        return read_chat_meta(model.path)
    except Exception as exc:  # noqa: BLE001 - the GGUF was read once already; report, don't crash
        chk.add(f"workload '{wl.name}'", f"{model.label}: cannot read its chat metadata: {exc}")
        return None


def check_contexts(
    chk: Checker,
    axes: dict[str, tuple[Any, ...]],
    models: list[ModelEntry],
    workloads: list[Workload],
    rendered: dict[tuple[str, str], str],
    serving: bool = False,
) -> None:
    """The request fits every ctx of the matrix at every depth, for every model a workload runs on (the
    cells of ``kv_cells``: the last generated token is never decoded; a llama-server runner in the plan
    needs one cell more): an overflow is a plan problem, not a failed run."""
    depths = axes.get("depth") or (0,)
    # llama.cpp splits a non-unified cache between the sequences: one request sees n_ctx / n_seq_max
    seq_split = max(axes.get("n_seq_max") or (1,)) if False in axes.get("kv_unified", (False,)) else 1
    for wl in workloads:
        if wl.ctx_fit:
            continue  # its context is its request's own size
        found: dict[str, None] = {}  # ordered, one line per (depth, ctx) even across models
        for est in _prompt_estimates(wl, models, rendered):
            for depth in depths:
                for ctx in axes.get("ctx", ()):
                    problem = _shortfall(ctx, seq_split, depth, est, wl, serving)
                    if problem is not None:
                        found[problem] = None
        for problem in found:
            chk.add(f"workload '{wl.name}'", problem)


def _prompt_estimates(
    wl: Workload, models: list[ModelEntry], rendered: dict[tuple[str, str], str]
) -> Iterator[int]:
    """The prompt's token bound on each model it runs on; with no valid model (already a problem) the
    prompt itself is still checked against ctx."""
    candidates: list[ModelEntry | None] = list(models) or [None]
    for model in candidates:
        if model is not None and not workload_applies(wl, model):
            continue
        if wl.messages is not None:
            if model is None or (model.label, wl.name) not in rendered:
                continue
            yield len(rendered[(model.label, wl.name)].encode("utf-8")) + 1
        else:
            yield estimate_prompt_tokens(workload_for(wl, model) if model is not None else wl)


def _shortfall(ctx: int, seq_split: int, depth: int, est: int, wl: Workload, serving: bool) -> str | None:
    need = kv_cells(depth, est, wl.n_predict, serving=serving)
    if ctx // seq_split >= need:
        return None
    bound = "" if wl.prompt_tokens is not None else "at most "
    # the last token is sampled, never decoded: one cell less, which llama-server keeps free
    parts = f"prompt tokens ({bound}{est}) + n_predict ({wl.n_predict})" + ("" if serving else " - 1")
    if depth:
        parts = f"depth ({depth}) + " + parts
    room = f"ctx {ctx}" + (f" / n_seq_max {seq_split}" if seq_split > 1 else "")
    return f"{room} < {parts} = {need}"
