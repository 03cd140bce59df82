"""One builder for the plans the tests run, instead of a TOML literal per test file.

``plan_toml(models, ...)`` renders a plan from Python values with small, fast defaults (one thread,
ctx 256, one 24-token synthetic workload of 8 tokens, 1 cold + 1 warm-up + 2 steady reps, no idle baseline
and no cooldown); a test passes only what it is about. The plan's own default waits 3 s before every config
of a CLI sweep (its idle baseline: a two-config ``edgeprof run`` took 10.2 s with it, 4.1 s without); a test
about the idle baseline or the cooldown asks for it: ``tables={"collect": {"idle_s": 0.5}}``.
``write_plan_file`` writes it where the test wants it.

    plan_toml({"q8": models["Q8_0"]}, ctx=[256, 512], repeat={"steady": 3}, run={"timeout_s": 30})
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

DEFAULT_WORKLOAD: dict[str, Any] = {"name": "w", "prompt_tokens": 24, "n_predict": 8}
DEFAULT_REPEAT: dict[str, Any] = {"cold": 1, "warmup": 1, "steady": 2}
DEFAULT_RUN: dict[str, Any] = {"timeout_s": 60}
# Waits the test does not ask for cost wall time and prove nothing: none unless the test names them.
# The suite's plans run exactly ``steady`` reps (``[decide] sequential = false``): each extra round of the
# sequential default spawns a child per rival, and only the tests about that decision ask for it.
DEFAULT_TABLES: dict[str, dict[str, Any]] = {
    "collect": {"idle_s": 0.0}, "cooldown": {"delay_s": 0.0}, "decide": {"sequential": False},
}  # fmt: skip


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "inf" if math.isinf(v) and v > 0 else ("nan" if math.isnan(v) else repr(v))
    if isinstance(v, Path):
        v = str(v)
    if isinstance(v, str):
        text = v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        # any other control character as TOML's escape (a test of hostile labels writes them)
        return '"' + re.sub(r"[\x00-\x08\x0a-\x1f\x7f]", lambda m: f"\\u{ord(m.group()):04x}", text) + '"'
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{k} = {_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, Sequence):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"no TOML form for {type(v).__name__}")


def _table(name: str, values: Mapping[str, Any]) -> str:
    return "\n".join([f"[{name}]", *(f"{k} = {_value(v)}" for k, v in values.items())])


def plan_toml(
    models: Mapping[str, Path | str] | Sequence[Path | str | Mapping[str, Any]],
    *,
    name: str = "test",
    ctx: Sequence[int] = (256,),
    threads: Sequence[int] = (1,),
    matrix: Mapping[str, Any] | None = None,
    workloads: Sequence[Mapping[str, Any]] = (DEFAULT_WORKLOAD,),
    repeat: Mapping[str, Any] | None = None,
    run: Mapping[str, Any] | None = None,
    tables: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """A plan's TOML. ``models``: label -> path, or the matrix's own list (paths or entry tables); empty:
    no ``models`` key at all.
    ``matrix``: more axes (ngl, depth, runner, ...); ``repeat``/``run`` update the defaults; ``tables``:
    further top-level tables ([cooldown], [collect], [serving], [quality_budget]); a [collect] or [cooldown]
    given updates the builder's (no idle baseline, no cooldown)."""
    if isinstance(models, Mapping):
        entries: list[Any] = [{"path": str(path), "label": label} for label, path in models.items()]
    else:
        entries = [str(m) if isinstance(m, Path) else m for m in models]
    axes: dict[str, Any] = {"models": entries, "ctx": list(ctx), "threads": list(threads), **(matrix or {})}
    if not entries:
        del axes["models"]  # a plan without models (runner "openai": the server has its own)
    parts = [f"name = {_value(name)}", _table("matrix", axes)]
    parts += [_table("[workload]", w) for w in workloads]
    parts.append(_table("repeat", {**DEFAULT_REPEAT, **(repeat or {})}))
    parts.append(_table("run", {**DEFAULT_RUN, **(run or {})}))
    merged = {k: {**v, **(tables or {}).get(k, {})} for k, v in DEFAULT_TABLES.items()}
    parts += [_table(k, v) for k, v in {**(tables or {}), **merged}.items()]
    return "\n\n".join(parts) + "\n"


def write_plan_file(path: Path, models: Any, **kw: Any) -> Path:
    """``plan_toml(models, **kw)`` written to ``path`` (folders created); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(plan_toml(models, **kw), encoding="utf-8")
    return path
