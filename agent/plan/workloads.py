"""``[[workload]]`` tables: what each config asks llama.cpp to do (a text, a synthetic prompt of N tokens or
a chat, and how to sample), a ``kind = "soak"`` workload (the same request repeated back to back for a
duration, cut into windows) or a ``kind = "quality"`` workload (agent/plan/quality.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgeprof.plan.checker import Checker, type_name
from edgeprof.plan.model import SOAK_DEFAULT_DURATION_S, SOAK_DEFAULT_WINDOW_S, SoakSpec, Workload
from edgeprof.plan.quality import is_quality, parse_quality
from edgeprof.plan.tasks import is_task, parse_task

WORKLOAD_KEYS = {
    "name",
    "prompt",
    "prompt_tokens",
    "n_predict",
    "temperature",
    "top_k",
    "top_p",
    "seed",
    "ignore_eos",
    "messages",
    "chat_template",
    "parse_special",
    "stop",
    "models",
    "kind",
}
SOAK_KEYS = {"duration_s", "window_s", "steady_c_per_min", "steady_span_s"}
MAX_STEADY_C_PER_MIN = 100.0  # a bound against typos: short test soaks scale the criterion to seconds
# Below a tenth of a second a window holds a token or two on a fast model: a rate per window is noise, and
# the event pipe and the phase table fill with rows that say nothing.
MIN_SOAK_WINDOW_S = 0.1
MIN_SOAK_DURATION_S = 1.0
CHAT_ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class _Prompt:
    """What a generation workload sends: exactly one of the three prompt forms, when the table is valid."""

    prompt: str | None
    prompt_tokens: int | None
    messages: tuple[tuple[str, str], ...] | None
    chat_template: str | None

    @property
    def given(self) -> bool:
        return self.prompt is not None or self.prompt_tokens is not None or self.messages is not None


def parse_workloads(chk: Checker, raw: Any, base: Path | None = None) -> list[Workload]:
    """The plan's workloads in plan order; names are unique (the report tells them apart by name)."""
    out: list[Workload] = []
    if raw is None:
        chk.add("workload", "missing: add at least one [[workload]] with a prompt and n_predict")
        return out
    if not isinstance(raw, list) or not all(isinstance(w, dict) for w in raw):
        chk.add("workload", "expected [[workload]] tables")
        return out
    names: set[str] = set()
    for i, table in enumerate(raw):
        place = f"workload[{i}]"
        name = chk.string(table.get("name", f"workload{i}"), f"{place}.name")
        if name is not None:
            if name in names:
                chk.add(f"{place}.name", f"duplicate workload name {name!r}")
            names.add(name)
        if is_quality(table):  # a quality workload has its own keys (agent/plan/quality.py)
            quality = parse_quality(chk, table, place, base or Path.cwd())
            if quality is not None and name is not None:
                out.append(Workload(name=name, prompt=None, prompt_tokens=None, n_predict=0, quality=quality))
            continue
        if is_task(table):  # a task-accuracy workload (agent/plan/tasks/)
            task = parse_task(chk, table, place, base or Path.cwd())
            if task is not None and name is not None:
                out.append(Workload(name=name, prompt=None, prompt_tokens=None, n_predict=0, task=task))
            continue
        workload = _generation_workload(chk, table, place, name)
        if workload is not None:
            out.append(workload)
    return out


def _generation_workload(
    chk: Checker, table: dict[str, Any], place: str, name: str | None
) -> Workload | None:
    kind = table.get("kind", "generation")
    chk.unknown_keys(table, WORKLOAD_KEYS | SOAK_KEYS if kind == "soak" else WORKLOAD_KEYS, place)
    if kind not in ("generation", "soak"):
        chk.add(f"{place}.kind", f'expected "generation", "soak", "quality" or "task", got {table["kind"]!r}')
    soak = parse_soak(chk, table, place) if kind == "soak" else None
    prompt = _prompt(chk, table, place)
    parse_special = chk.boolean(table.get("parse_special", False), f"{place}.parse_special")
    if "parse_special" in table and "messages" in table and table["parse_special"] is False:
        chk.add(f"{place}.parse_special", "a rendered chat is always tokenized with special tokens")
    stop = str_list(chk, table["stop"], f"{place}.stop") if "stop" in table else ()
    wl_models = str_list(chk, table["models"], f"{place}.models") if "models" in table else None
    if wl_models is not None and not wl_models:
        chk.add(f"{place}.models", "empty list: name the model labels or groups, or drop the key")
    sampling = _sampling(chk, table, place)
    if name is None or sampling is None or parse_special is None or not prompt.given:
        return None
    if kind == "soak" and soak is None:
        return None
    return Workload(
        name=str(name),
        prompt=prompt.prompt,
        prompt_tokens=prompt.prompt_tokens,
        n_predict=int(sampling["n_predict"]),
        temperature=float(sampling["temperature"]),
        top_k=int(sampling["top_k"]),
        top_p=float(sampling["top_p"]),
        seed=int(sampling["seed"]),
        ignore_eos=bool(sampling["ignore_eos"]),
        messages=prompt.messages,
        chat_template=prompt.chat_template,
        parse_special=bool(parse_special) or prompt.messages is not None,
        stop=tuple(stop or ()),
        models=tuple(wl_models) if wl_models else None,
        soak=soak,
    )


def parse_soak(chk: Checker, table: dict[str, Any], place: str) -> SoakSpec | None:
    """A soak's duration and window (the ceilings are agent/plan/bounds.py's); None when either is refused."""
    duration = chk.number(
        table.get("duration_s", SOAK_DEFAULT_DURATION_S), f"{place}.duration_s", minimum=MIN_SOAK_DURATION_S
    )
    window = chk.number(
        table.get("window_s", SOAK_DEFAULT_WINDOW_S), f"{place}.window_s", minimum=MIN_SOAK_WINDOW_S
    )
    if duration is None or window is None:
        return None
    if window > duration:
        chk.add(f"{place}.window_s", f"{window:g} s is longer than duration_s {duration:g} s: not one window")
        return None
    slope = _optional_number(chk, table, "steady_c_per_min", place, 0.01, MAX_STEADY_C_PER_MIN)
    span = _optional_number(chk, table, "steady_span_s", place, window, duration)
    return SoakSpec(duration_s=duration, window_s=window, steady_c_per_min=slope, steady_span_s=span)


def _optional_number(
    chk: Checker, table: dict[str, Any], key: str, place: str, low: float, high: float
) -> float | None:
    """``table[key]`` within [low, high] (None when absent or refused, the problem noted)."""
    if key not in table:
        return None
    value = chk.number(table[key], f"{place}.{key}", minimum=low)
    if value is not None and value > high:
        chk.add(f"{place}.{key}", f"{value:g} is above {high:g}")
        return None
    return value


def _prompt(chk: Checker, table: dict[str, Any], place: str) -> _Prompt:
    prompt = chk.string(table["prompt"], f"{place}.prompt") if "prompt" in table else None
    prompt_tokens = (
        chk.integer(table["prompt_tokens"], f"{place}.prompt_tokens", minimum=1)
        if "prompt_tokens" in table
        else None
    )
    messages = parse_messages(chk, table["messages"], f"{place}.messages") if "messages" in table else None
    given = [k for k in ("prompt", "prompt_tokens", "messages") if k in table]
    if not given:
        chk.add(
            place,
            "needs 'prompt' (fixed text), 'prompt_tokens' (a prompt of exactly N tokens) or 'messages' "
            "(a chat, rendered with the model's chat template)",
        )
    elif "messages" in table and len(given) > 1:
        chk.add(
            place,
            f"'messages' and {' and '.join(repr(k) for k in given if k != 'messages')} "
            "both given: a chat workload is its messages only",
        )
    chat_template = (
        chk.string(table["chat_template"], f"{place}.chat_template") if "chat_template" in table else None
    )
    if chat_template is not None and "messages" not in table:
        chk.add(f"{place}.chat_template", "only a chat workload ('messages') uses a chat template")
    return _Prompt(prompt, prompt_tokens, messages, chat_template)


def _sampling(chk: Checker, table: dict[str, Any], place: str) -> dict[str, Any] | None:
    """n_predict and the sampler's settings; None when any of them is refused."""
    if "n_predict" not in table:
        chk.add(place, "missing 'n_predict'")
    values = {
        "n_predict": chk.integer(table.get("n_predict", 1), f"{place}.n_predict", minimum=1),
        "temperature": chk.number(table.get("temperature", 0.0), f"{place}.temperature", minimum=0.0),
        "top_k": chk.integer(table.get("top_k", 40), f"{place}.top_k", minimum=1),
        "top_p": chk.number(table.get("top_p", 0.95), f"{place}.top_p", minimum=0.0),
        "seed": chk.integer(table.get("seed", 42), f"{place}.seed", minimum=0),
        # Only a synthetic prompt (prompt_tokens) generates past EOS by default, like llama-bench's tg test:
        # it measures speed, not an answer. A chat or a text prompt stops at EOS, as a user's request would.
        "ignore_eos": chk.boolean(table.get("ignore_eos", "prompt_tokens" in table), f"{place}.ignore_eos"),
    }
    return None if None in values.values() else values


def parse_messages(chk: Checker, raw: Any, place: str) -> tuple[tuple[str, str], ...] | None:
    """``messages = [{role, content}, ...]``, as an OpenAI-style chat request gives them."""
    if not isinstance(raw, list) or not raw:
        chk.add(place, "expected a non-empty array of {role, content} tables")
        return None
    out: list[tuple[str, str]] = []
    ok = True
    for i, msg in enumerate(raw):
        where = f"{place}[{i}]"
        if not isinstance(msg, dict):
            chk.add(where, f"expected a table {{role, content}}, got {type_name(msg)}")
            ok = False
            continue
        chk.unknown_keys(msg, {"role", "content"}, where)
        role = chk.string(msg.get("role"), f"{where}.role") if "role" in msg else None
        content = chk.string(msg.get("content"), f"{where}.content") if "content" in msg else None
        if "role" not in msg or "content" not in msg:
            chk.add(where, "needs 'role' and 'content'")
        if role is not None and role not in CHAT_ROLES:
            chk.add(f"{where}.role", f"unknown role {role!r}; one of {', '.join(CHAT_ROLES)}")
            role = None
        if role is None or content is None:
            ok = False
            continue
        out.append((role, content))
    return tuple(out) if ok else None


def str_list(chk: Checker, raw: Any, place: str) -> tuple[str, ...] | None:
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        chk.add(place, "expected an array of strings")
        return None
    return tuple(raw)
