"""Plans: load a TOML plan and validate all of it at once, one step per table.

Validation never stops at the first problem: a user fixing a plan at 11 p.m. before an overnight sweep wants
every mistake listed with its place, and nothing started until the plan is right. The steps run in a fixed
order, so the same plan always lists its problems in the same order.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from edgeprof.gguf import GGUFInfo
from edgeprof.plan.bounds import MAX_PLAN_BYTES, check_bounds, check_serving_bounds, count_configs
from edgeprof.plan.checker import Checker
from edgeprof.plan.matrix import check_axis_pairs, parse_axes
from edgeprof.plan.model import ModelEntry, Plan, PlanError
from edgeprof.plan.model_files import parse_models
from edgeprof.plan.power import SystemProbe, parse_power_modes
from edgeprof.plan.serving import check_serving, foreign_target
from edgeprof.plan.tables import (
    parse_cold_cache,
    parse_collect,
    parse_cooldown,
    parse_decide_table,
    parse_name,
    parse_quality_budget,
    parse_repeat,
    parse_run,
    parse_schedule,
)
from edgeprof.plan.workload_checks import check_contexts, check_workload_references, render_chats
from edgeprof.plan.workloads import parse_workloads
from edgeprof.runners.registry import is_serving
from edgeprof.safefs import UnsafePath, read_regular

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (JetPack 6)
    import tomli as tomllib

TOP_KEYS = {"name", "description", "matrix", "workload", "repeat", "run", "cooldown", "collect", "schedule"}
TOP_KEYS |= {"serving"}  # the llama-server runner's load (agent/plan/serving.py)
# what the recommendation accepts against the quality reference (agent/report/recommend.py)
TOP_KEYS |= {"quality_budget"}
# how a group of rivals is settled: sequential decisions, their budget (agent/plan/budget.py Decide)
TOP_KEYS |= {"decide"}


def parse_plan(
    text: str, source: str = "<plan>", base: Path | None = None, system: SystemProbe | None = None
) -> Plan:
    """Validate a plan's text; raises PlanError listing every problem."""
    base = base or Path.cwd()
    doc = read_toml(text, source)
    chk = Checker()
    chk.unknown_keys(doc, TOP_KEYS, "")
    name = parse_name(chk, doc, source)
    matrix = chk.table(doc, "matrix", "matrix")
    axes = parse_axes(chk, matrix)
    # the openai runner alone needs no model file: the server has its own (its URL stands in for it)
    foreign = foreign_target(doc, matrix)
    models, infos = parse_models(chk, matrix.get("models"), base) if foreign is None else ([], {})
    workloads = parse_workloads(chk, doc.get("workload"), base)
    repeat = parse_repeat(chk, doc)
    run_t = chk.table(doc, "run", "run")
    timeout_s, reserve_mb = parse_run(chk, run_t)
    quality_budget, decide = parse_quality_budget(chk, doc), parse_decide_table(chk, doc)
    power_modes = parse_power_modes(chk, matrix, run_t, system or SystemProbe())
    cold_cache = parse_cold_cache(chk, run_t)
    cooldown = parse_cooldown(chk, doc)
    collect = parse_collect(chk, doc)
    parse_schedule(chk, doc)
    # Cross-field checks, once the parts are known to be well-typed.
    check_workload_references(chk, workloads, models)
    rendered = render_chats(chk, models, workloads)
    check_axis_pairs(chk, axes)
    runners, concurrency, request_rates, serving = check_serving(chk, doc, matrix, workloads)
    check_contexts(chk, axes, models, workloads, rendered, serving=any(is_serving(r) for r in runners))
    models = [ModelEntry(path=foreign, label=server_label(foreign))] if foreign else models
    # Ceilings for every number and the matrix size: a plan is unattended input (agent/plan/bounds.py).
    n_configs = count_configs(models, workloads, power_modes, *axes.values())
    trained = _trained_ctx(models, infos)
    check_bounds(chk, doc, axes, trained, workloads, repeat, timeout_s, cooldown, collect, n_configs)
    check_serving_bounds(chk, concurrency, request_rates, serving)
    if chk.problems:
        raise PlanError(source, chk.problems)
    return Plan(
        name=name,
        source=source,
        text=text,
        models=tuple(models),
        axes=axes,
        workloads=tuple(workloads),
        repeat=repeat,
        timeout_s=timeout_s,
        cold_cache=cold_cache,
        cooldown=cooldown,
        collect=collect,
        model_info=infos,
        power_modes=power_modes,
        rendered=rendered,
        runners=runners,
        concurrency=concurrency,
        request_rates=request_rates,
        serving=serving,
        reserve_mb=reserve_mb,
        quality_budget=quality_budget, decide=decide,
    )


# TOML's parser recurses once per level of nested arrays and inline tables: a 4 KB plan of 2000 nested
# arrays raised RecursionError out of it (a traceback, and an agent restarted into the same file). A real
# plan nests three or four levels; the text is measured before it is parsed.
MAX_TOML_DEPTH = 32


def read_toml(text: str, source: str) -> dict[str, Any]:
    """The plan's TOML document; malformed TOML is the one problem that stops validation at once."""
    depth = toml_nesting(text)
    if depth > MAX_TOML_DEPTH:
        raise PlanError(source, [f"malformed TOML: nested {depth} levels deep (at most {MAX_TOML_DEPTH})"])
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(source, [f"malformed TOML: {exc}"]) from None
    except RecursionError:  # the depth count above should make this unreachable; never a traceback
        raise PlanError(source, ["malformed TOML: nested too deeply"]) from None


def toml_nesting(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` outside strings and comments (table headers count 1 or 2).

    One pass, no recursion; string rules as TOML's: basic strings with backslash escapes, literal strings
    without, and both in their triple-quoted multi-line forms.
    """
    depth = deepest = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            i = _string_end(text, i)
            continue
        if c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth = max(0, depth - 1)
        i += 1
    return deepest


def _string_end(text: str, i: int) -> int:
    """The index just after the string that starts at ``i`` (the end of the text if it never closes)."""
    quote = text[i]
    if text.startswith(quote * 3, i):
        end = text.find(quote * 3, i + 3)
        while quote == '"' and end > 0 and _escaped(text, end):
            end = text.find(quote * 3, end + 1)
        return len(text) if end < 0 else end + 3
    j = i + 1
    while j < len(text) and text[j] != "\n":
        if text[j] == "\\" and quote == '"':
            j += 2
            continue
        if text[j] == quote:
            return j + 1
        j += 1
    return j


def _escaped(text: str, at: int) -> bool:
    """True when the character at ``at`` follows an odd number of backslashes."""
    k = at - 1
    while k >= 0 and text[k] == "\\":
        k -= 1
    return (at - 1 - k) % 2 == 1


def server_label(url: str) -> str:
    """A foreign server's label until it names its model: its host and port."""
    return url.split("://", 1)[1]


def _trained_ctx(models: list[ModelEntry], infos: dict[str, GGUFInfo]) -> dict[str, int | None]:
    """Model label -> the context length its GGUF says it was trained for."""
    return {m.label: (infos[m.path].context_length if m.path in infos else None) for m in models}


def load_plan(path: str | Path) -> Plan:
    p = Path(path).expanduser()
    try:
        if p.is_dir():
            raise IsADirectoryError
        if p.is_file() and p.stat().st_size > MAX_PLAN_BYTES:
            size = p.stat().st_size
            raise PlanError(str(path), [f"{size} bytes; a plan is at most {MAX_PLAN_BYTES} bytes"])
        # Regular files only, read with the same ceiling: a FIFO would block here, a device never end.
        text = read_regular(p, MAX_PLAN_BYTES).decode("utf-8")
    except UnsafePath as exc:
        raise PlanError(str(path), [(exc.strerror or str(exc)).removeprefix(f"{p} ")]) from None
    except FileNotFoundError:
        raise PlanError(str(path), ["no such plan file"]) from None
    except IsADirectoryError:
        raise PlanError(str(path), ["is a directory, not a plan file"]) from None
    except UnicodeDecodeError:
        raise PlanError(str(path), ["not UTF-8 text"]) from None
    except OSError as exc:
        raise PlanError(str(path), [f"cannot read: {exc.strerror}"]) from None
    return parse_plan(text, source=str(path), base=p.resolve().parent)
