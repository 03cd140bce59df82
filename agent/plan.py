"""Plans: load a TOML plan, validate all of it at once, expand the matrix into frozen run specs.

Validation never stops at the first problem: a user fixing a plan at 11 p.m. before an overnight sweep wants
every mistake listed with its place, and nothing started until the plan is right.
"""

from __future__ import annotations

import difflib
import glob
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.gguf_info import GGUFError, GGUFInfo, read_gguf_info
from edgeprof.runners.protocol import KV_CACHE_TYPES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (JetPack 6)
    import tomli as tomllib


class PlanError(Exception):
    """One or more problems with a plan; ``problems`` lists each as 'place: what is wrong'."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__("; ".join(problems))

    def lines(self) -> list[str]:
        return [f"{self.source}: {p}" for p in self.problems]


@dataclass(frozen=True)
class ModelEntry:
    path: str
    label: str
    group: str | None = None


@dataclass(frozen=True)
class Workload:
    name: str
    prompt: str | None
    prompt_tokens: int | None
    n_predict: int
    temperature: float = 0.0
    top_k: int = 40
    top_p: float = 0.95
    seed: int = 42
    ignore_eos: bool = True

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def hash(self) -> str:
        return _digest(self.to_json())


@dataclass(frozen=True)
class Params:
    """The llama.cpp knobs of one run (llama-bench's: -c, -ngl, -t, -b, -ub, -fa, -ctk, -ctv, -mmp)."""

    n_ctx: int
    n_gpu_layers: int
    n_threads: int
    n_batch: int
    n_ubatch: int
    flash_attn: str
    type_k: str
    type_v: str
    use_mmap: bool
    power_mode: str | None = None  # nvpmodel mode name; None = leave the device as it is

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if out["power_mode"] is None:
            del out["power_mode"]  # keeps spec ids of plans without the axis as they were
        return out


@dataclass(frozen=True)
class Repeat:
    cold: int = 1
    warmup: int = 1
    steady: int = 5

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Cooldown:
    below_c: float | None = None
    max_wait_s: float = 300.0
    delay_s: float = 0.0
    slope_c_per_min: float = 0.5
    window_s: float = 30.0
    per_rep: bool = False


@dataclass(frozen=True)
class Collect:
    interval_ms: int = 200
    idle_s: float = 3.0
    collectors: tuple[str, ...] | None = None


@dataclass(frozen=True)
class RunSpec:
    """One configuration to measure; frozen, with an id stable across runs of the same plan."""

    model: ModelEntry
    model_sha256: str
    params: Params
    workload: Workload
    repeat: Repeat
    timeout_s: float
    cold_cache: str
    cooldown_per_rep: bool = False  # pacing, not part of what is measured: not in the spec id

    @property
    def spec_id(self) -> str:
        return _digest(
            {
                "model_sha256": self.model_sha256,
                # the same file under two labels (say on NVMe and on an SD card) is two configs
                "model_label": self.model.label,
                "params": self.params.to_json(),
                "workload": self.workload.to_json(),
                "repeat": self.repeat.to_json(),
            }
        )[:16]

    def job(self, *, cold_only: bool = False, cold_rep: int = 0) -> dict[str, Any]:
        """The JSON the worker process receives."""
        return {
            "model_path": self.model.path,
            "params": self.params.to_json(),
            "workload": self.workload.to_json(),
            "repeat": self.repeat.to_json(),
            "cold_only": cold_only,
            "cold_rep": cold_rep,
            "pause_between_reps": self.cooldown_per_rep and not cold_only,
        }


@dataclass(frozen=True)
class Plan:
    name: str
    source: str
    text: str
    models: tuple[ModelEntry, ...]
    axes: dict[str, tuple[Any, ...]]
    workloads: tuple[Workload, ...]
    repeat: Repeat
    timeout_s: float
    cold_cache: str
    cooldown: Cooldown
    collect: Collect
    model_info: dict[str, GGUFInfo] = field(default_factory=dict)
    power_modes: tuple[str, ...] = ()

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def n_specs(self) -> int:
        n = len(self.models) * len(self.workloads) * max(1, len(self.power_modes))
        for values in self.axes.values():
            n *= len(values)
        return n


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# Axis name in the plan -> (Params field, default). Order = expansion order inside one model: the axes that
# force a model reload (ngl, mmap) vary slowest, so consecutive runs reuse the model file in the page cache.
AXES: dict[str, tuple[str, Any]] = {
    "ngl": ("n_gpu_layers", 0),
    "mmap": ("use_mmap", True),
    "ctx": ("n_ctx", 2048),
    "n_batch": ("n_batch", 512),
    "n_ubatch": ("n_ubatch", None),  # None: llama.cpp's default 512, capped at n_batch (as llama.cpp does)
    "flash_attn": ("flash_attn", "off"),
    "type_k": ("type_k", "f16"),
    "type_v": ("type_v", "f16"),
    "threads": ("n_threads", None),
}
AXIS_ALIASES = {
    "batch": "n_batch",
    "ubatch": "n_ubatch",
    "fa": "flash_attn",
    "n_gpu_layers": "ngl",
    "n_ctx": "ctx",
    "n_threads": "threads",
    "use_mmap": "mmap",
}

TOP_KEYS = {"name", "description", "matrix", "workload", "repeat", "run", "cooldown", "collect", "schedule"}
MATRIX_KEYS = {"models", "power_mode", *AXES, *AXIS_ALIASES}
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
}
REPEAT_KEYS = {"cold", "warmup", "steady"}
RUN_KEYS = {"timeout_s", "cold_cache", "allow_power_mode_change"}
COOLDOWN_KEYS = {"below_c", "max_wait_s", "delay_s", "slope_c_per_min", "window_s", "per_rep"}
COLLECT_KEYS = {"interval_ms", "idle_s", "collectors"}
SCHEDULE_KEYS = {"until"}
MODEL_KEYS = {"path", "label", "group"}


@dataclass(frozen=True)
class SystemProbe:
    """What validation may ask of the machine (injected in tests): its root, our uid, where a tool is."""

    root: Path = Path("/")
    euid: int = field(default_factory=lambda: os.geteuid())
    which: Any = None  # Callable[[str], str | None]; shutil.which by default

    def find(self, tool: str) -> str | None:
        import shutil

        return (self.which or shutil.which)(tool)


def nvpmodel_modes(root: Path) -> dict[str, int]:
    """Power modes defined in ``/etc/nvpmodel.conf`` (``< POWER_MODEL ID=0 NAME=MAXN >``): name -> id."""
    import re

    try:
        text = (root / "etc/nvpmodel.conf").read_text(errors="replace")
    except OSError:
        return {}
    modes: dict[str, int] = {}
    for m in re.finditer(r"<\s*POWER_MODEL\s+ID=(\d+)\s+NAME=([^\s>]+)\s*>", text):
        modes[m.group(2)] = int(m.group(1))
    return modes


def _check_power_modes(chk: _Checker, raw: Any, allowed: bool, system: SystemProbe) -> tuple[str, ...]:
    """Switching nvpmodel changes the device for everyone on it: refused unless the plan permits it, we are
    root, and the modes exist. Every refusal is reported before anything runs."""
    items = _as_list(raw)
    names: list[str] = []
    for i, item in enumerate(items):
        place = f"matrix.power_mode[{i}]" if isinstance(raw, list) else "matrix.power_mode"
        value = chk.string(item, place)
        if value is not None:
            names.append(value)
    if not items:
        chk.add("matrix.power_mode", "empty list: give mode names, or drop the key")
    if not allowed:
        chk.add(
            "matrix.power_mode",
            "switching the power mode changes the device for everything running on it; set "
            "[run] allow_power_mode_change = true to permit it",
        )
        return tuple(names)
    if system.find("nvpmodel") is None or not (system.root / "etc/nv_tegra_release").exists():
        chk.add("matrix.power_mode", "needs a Jetson with nvpmodel; this machine has none")
        return tuple(names)
    if system.euid != 0:
        chk.add(
            "matrix.power_mode",
            "nvpmodel -m needs root: run the sweep as root (the edgeprof service user cannot), or drop "
            "power_mode and compare modes as separate sweeps (edgeprof compare A B)",
        )
    modes = nvpmodel_modes(system.root)
    for name in names:
        if modes and name not in modes:
            chk.add("matrix.power_mode", f"unknown mode {name!r}; /etc/nvpmodel.conf has {', '.join(modes)}")
    if not modes:
        chk.add("matrix.power_mode", "no modes found in /etc/nvpmodel.conf")
    if len(set(names)) != len(names):
        chk.add("matrix.power_mode", "duplicate values")
    return tuple(dict.fromkeys(names))


def default_threads() -> int:
    """Physical cores where known (llama.cpp's own default), else all logical CPUs."""
    try:
        import psutil

        physical = psutil.cpu_count(logical=False)
    except Exception:  # noqa: BLE001 - psutil missing or unable to tell
        physical = None
    return int(physical or os.cpu_count() or 1)


class _Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def add(self, place: str, message: str) -> None:
        self.problems.append(f"{place}: {message}")

    def unknown_keys(self, table: dict[str, Any], allowed: set[str], place: str) -> None:
        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(key, sorted(allowed), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                self.add(f"{place}.{key}" if place else key, f"unknown key{hint}")

    def table(self, doc: dict[str, Any], key: str, place: str) -> dict[str, Any]:
        value = doc.get(key, {})
        if not isinstance(value, dict):
            self.add(place, f"expected a table, got {_tname(value)}")
            return {}
        return value

    def integer(self, value: Any, place: str, minimum: int | None = None) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int):
            self.add(place, f"expected an integer, got {_tname(value)} {value!r}")
            return None
        if minimum is not None and value < minimum:
            self.add(place, f"must be >= {minimum}, got {value}")
            return None
        return value

    def number(self, value: Any, place: str, minimum: float | None = None) -> float | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.add(place, f"expected a number, got {_tname(value)} {value!r}")
            return None
        if minimum is not None and value < minimum:
            self.add(place, f"must be >= {minimum:g}, got {value}")
            return None
        return float(value)

    def boolean(self, value: Any, place: str) -> bool | None:
        if not isinstance(value, bool):
            self.add(place, f"expected true or false, got {_tname(value)} {value!r}")
            return None
        return value

    def string(self, value: Any, place: str) -> str | None:
        if not isinstance(value, str):
            self.add(place, f"expected a string, got {_tname(value)} {value!r}")
            return None
        return value


def _tname(value: Any) -> str:
    return {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "array",
        dict: "table",
    }.get(type(value), type(value).__name__)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _check_axis(chk: _Checker, axis: str, raw: Any) -> tuple[Any, ...]:
    values: list[Any] = []
    items = _as_list(raw)
    if not items:
        chk.add(f"matrix.{axis}", "empty list: give at least one value")
    for i, item in enumerate(items):
        place = f"matrix.{axis}[{i}]" if isinstance(raw, list) else f"matrix.{axis}"
        value: Any = None
        if axis == "ngl":
            if item == "all":
                value = 999
            elif isinstance(item, int) and not isinstance(item, bool) and item < 0:
                chk.add(place, f'negative -ngl ({item}); use 0 for CPU only or "all" for every layer')
            else:
                value = chk.integer(item, place, minimum=0)
        elif axis in ("ctx", "n_batch", "n_ubatch"):
            value = chk.integer(item, place, minimum=1)
        elif axis == "threads":
            value = default_threads() if item == "auto" else chk.integer(item, place, minimum=1)
        elif axis == "mmap":
            value = chk.boolean(item, place)
        elif axis == "flash_attn":
            if isinstance(item, bool):
                value = "on" if item else "off"
            elif item in ("on", "off", "auto"):
                value = item
            else:
                chk.add(place, f'expected true, false, "on", "off" or "auto", got {item!r}')
        elif axis in ("type_k", "type_v"):
            if isinstance(item, str) and item.lower() in KV_CACHE_TYPES:
                value = item.lower()
            else:
                chk.add(place, f"unknown KV cache type {item!r}; one of {', '.join(KV_CACHE_TYPES)}")
        if value is not None:
            values.append(value)
    if len(set(values)) != len(values):
        chk.add(f"matrix.{axis}", "duplicate values")
    return tuple(dict.fromkeys(values))


def _expand_model_paths(raw: str, base: Path) -> list[Path]:
    expanded = os.path.expandvars(os.path.expanduser(raw))
    path = Path(expanded)
    if not path.is_absolute():
        path = base / path
    if any(ch in expanded for ch in "*?["):
        return sorted(Path(p) for p in glob.glob(str(path)))
    return [path]


def _check_models(chk: _Checker, raw: Any, base: Path) -> tuple[list[ModelEntry], dict[str, GGUFInfo]]:
    entries: list[ModelEntry] = []
    infos: dict[str, GGUFInfo] = {}
    if raw is None:
        chk.add("matrix.models", "missing: list the GGUF files (paths or globs) to measure")
        return entries, infos
    items = _as_list(raw)
    if not items:
        chk.add("matrix.models", "empty list: give at least one GGUF file")
    labels: dict[str, str] = {}
    for i, item in enumerate(items):
        place = f"matrix.models[{i}]"
        label: str | None = None
        group: str | None = None
        if isinstance(item, dict):
            chk.unknown_keys(item, MODEL_KEYS, place)
            path_raw = chk.string(item.get("path"), f"{place}.path") if "path" in item else None
            if "path" not in item:
                chk.add(place, "missing 'path'")
            if "label" in item:
                label = chk.string(item["label"], f"{place}.label")
            if "group" in item:
                group = chk.string(item["group"], f"{place}.group")
        else:
            path_raw = chk.string(item, place)
        if path_raw is None:
            continue
        paths = _expand_model_paths(path_raw, base)
        if not paths:
            chk.add(place, f"no file matches {path_raw!r}")
            continue
        if label is not None and len(paths) > 1:
            chk.add(f"{place}.label", f"one label for a glob matching {len(paths)} files")
            continue
        for path in paths:
            try:
                info = read_gguf_info(path)
            except GGUFError as exc:
                chk.add(place, str(exc))
                continue
            entry_label = label or path.stem
            if entry_label in labels:
                chk.add(place, f"duplicate label {entry_label!r} (also {labels[entry_label]}); set 'label'")
                continue
            labels[entry_label] = place
            infos[str(path)] = info
            entries.append(ModelEntry(path=str(path), label=entry_label, group=group))
    return entries, infos


def _check_workloads(chk: _Checker, raw: Any) -> list[Workload]:
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
        chk.unknown_keys(table, WORKLOAD_KEYS, place)
        name = chk.string(table.get("name", f"workload{i}"), f"{place}.name")
        if name is not None:
            if name in names:
                chk.add(f"{place}.name", f"duplicate workload name {name!r}")
            names.add(name)
        prompt = chk.string(table["prompt"], f"{place}.prompt") if "prompt" in table else None
        prompt_tokens = (
            chk.integer(table["prompt_tokens"], f"{place}.prompt_tokens", minimum=1)
            if "prompt_tokens" in table
            else None
        )
        if "prompt" not in table and "prompt_tokens" not in table:
            chk.add(place, "needs 'prompt' (fixed text) or 'prompt_tokens' (a prompt of exactly N tokens)")
        if "n_predict" not in table:
            chk.add(place, "missing 'n_predict'")
        n_predict = chk.integer(table.get("n_predict", 1), f"{place}.n_predict", minimum=1)
        temperature = chk.number(table.get("temperature", 0.0), f"{place}.temperature", minimum=0.0)
        top_k = chk.integer(table.get("top_k", 40), f"{place}.top_k", minimum=1)
        top_p = chk.number(table.get("top_p", 0.95), f"{place}.top_p", minimum=0.0)
        seed = chk.integer(table.get("seed", 42), f"{place}.seed", minimum=0)
        ignore_eos = chk.boolean(table.get("ignore_eos", True), f"{place}.ignore_eos")
        if None in (name, n_predict, temperature, top_k, top_p, seed, ignore_eos):
            continue
        if prompt is None and prompt_tokens is None:
            continue
        out.append(
            Workload(
                name=str(name),
                prompt=prompt,
                prompt_tokens=prompt_tokens,
                n_predict=int(n_predict or 1),
                temperature=float(temperature or 0.0),
                top_k=int(top_k or 40),
                top_p=float(top_p or 0.0),
                seed=int(seed or 0),
                ignore_eos=bool(ignore_eos),
            )
        )
    return out


def estimate_prompt_tokens(workload: Workload) -> int:
    """Upper bound of a prompt's token count without a tokenizer: one token per UTF-8 byte, plus BOS.

    Exact for ``prompt_tokens``; for text every tokenizer here emits at most one token per byte (byte
    fallback), so a plan that passes this bound can never overflow the context.
    """
    if workload.prompt_tokens is not None:
        return workload.prompt_tokens
    return len((workload.prompt or "").encode("utf-8")) + 1


def parse_plan(
    text: str, source: str = "<plan>", base: Path | None = None, system: SystemProbe | None = None
) -> Plan:
    """Validate a plan's text; raises PlanError listing every problem."""
    base = base or Path.cwd()
    system = system or SystemProbe()
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(source, [f"malformed TOML: {exc}"]) from None
    chk = _Checker()
    chk.unknown_keys(doc, TOP_KEYS, "")
    name = chk.string(doc.get("name", Path(source).stem), "name") or "plan"
    matrix = chk.table(doc, "matrix", "matrix")
    chk.unknown_keys(matrix, MATRIX_KEYS, "matrix")
    canonical: dict[str, Any] = {}
    for key, value in matrix.items():
        if key in ("models", "power_mode"):
            continue
        axis = AXIS_ALIASES.get(key, key)
        if axis in canonical:
            chk.add(f"matrix.{key}", f"given twice (also as '{axis}')")
        canonical[axis] = value
    axes: dict[str, tuple[Any, ...]] = {}
    for axis, (_field, default) in AXES.items():
        if axis in canonical:
            axes[axis] = _check_axis(chk, axis, canonical[axis])
        else:
            axes[axis] = (default_threads() if axis == "threads" else default,)
    models, infos = _check_models(chk, matrix.get("models"), base)
    workloads = _check_workloads(chk, doc.get("workload"))

    rep_t = chk.table(doc, "repeat", "repeat")
    chk.unknown_keys(rep_t, REPEAT_KEYS, "repeat")
    cold = chk.integer(rep_t.get("cold", 1), "repeat.cold", minimum=1)
    warmup = chk.integer(rep_t.get("warmup", 1), "repeat.warmup", minimum=0)
    steady = chk.integer(rep_t.get("steady", 5), "repeat.steady", minimum=1)
    repeat = Repeat(cold=cold or 1, warmup=warmup if warmup is not None else 1, steady=steady or 5)

    run_t = chk.table(doc, "run", "run")
    chk.unknown_keys(run_t, RUN_KEYS, "run")
    timeout_s = chk.number(run_t.get("timeout_s", 600), "run.timeout_s", minimum=1) or 600.0
    allow_pm = run_t.get("allow_power_mode_change", False)
    if not isinstance(allow_pm, bool):
        chk.add("run.allow_power_mode_change", f"expected true or false, got {allow_pm!r}")
        allow_pm = False
    power_modes: tuple[str, ...] = ()
    if "power_mode" in matrix:
        power_modes = _check_power_modes(chk, matrix["power_mode"], allow_pm, system)
    cold_cache = run_t.get("cold_cache", "drop")
    if cold_cache not in ("drop", "keep"):
        chk.add("run.cold_cache", f'expected "drop" or "keep", got {cold_cache!r}')
        cold_cache = "drop"

    cd_t = chk.table(doc, "cooldown", "cooldown")
    chk.unknown_keys(cd_t, COOLDOWN_KEYS, "cooldown")
    below_c = chk.number(cd_t["below_c"], "cooldown.below_c") if "below_c" in cd_t else None
    cooldown = Cooldown(
        below_c=below_c,
        max_wait_s=chk.number(cd_t.get("max_wait_s", 300), "cooldown.max_wait_s", minimum=0) or 0.0,
        delay_s=chk.number(cd_t.get("delay_s", 0), "cooldown.delay_s", minimum=0) or 0.0,
        slope_c_per_min=chk.number(cd_t.get("slope_c_per_min", 0.5), "cooldown.slope_c_per_min", minimum=0)
        or 0.0,
        window_s=chk.number(cd_t.get("window_s", 30), "cooldown.window_s", minimum=1) or 30.0,
        per_rep=bool(chk.boolean(cd_t.get("per_rep", False), "cooldown.per_rep")),
    )
    co_t = chk.table(doc, "collect", "collect")
    chk.unknown_keys(co_t, COLLECT_KEYS, "collect")
    interval = chk.integer(co_t.get("interval_ms", 200), "collect.interval_ms", minimum=50) or 200
    collectors_raw = co_t.get("collectors")
    collectors: tuple[str, ...] | None = None
    if collectors_raw is not None:
        if isinstance(collectors_raw, list) and all(isinstance(c, str) for c in collectors_raw):
            collectors = tuple(collectors_raw)
        else:
            chk.add("collect.collectors", "expected an array of collector names")
    collect = Collect(
        interval_ms=interval,
        idle_s=chk.number(co_t.get("idle_s", 3.0), "collect.idle_s", minimum=0) or 0.0,
        collectors=collectors,
    )
    sched_t = chk.table(doc, "schedule", "schedule")
    chk.unknown_keys(sched_t, SCHEDULE_KEYS, "schedule")

    # Cross-field checks, once the parts are known to be well-typed.
    for wl in workloads:
        need = estimate_prompt_tokens(wl) + wl.n_predict
        for ctx in axes.get("ctx", ()):
            if ctx < need:
                bound = "" if wl.prompt_tokens is not None else " at most"
                chk.add(
                    f"workload '{wl.name}'",
                    f"ctx {ctx} < prompt tokens ({bound.strip() + ' ' if bound else ''}"
                    f"{estimate_prompt_tokens(wl)}) + n_predict ({wl.n_predict}) = {need}",
                )
    for i, n_ub in enumerate(a for a in axes.get("n_ubatch", ()) if a is not None):
        if any(n_ub > nb for nb in axes.get("n_batch", ())):
            chk.add(
                f"matrix.n_ubatch[{i}]",
                f"{n_ub} is larger than an n_batch value; llama.cpp needs ubatch <= batch",
            )
    if any(v not in ("f16", "f32", "bf16") for v in axes.get("type_v", ())) and "off" in axes.get(
        "flash_attn", ()
    ):
        chk.add(
            "matrix.type_v", 'a quantized V cache needs flash_attn = "on" (llama.cpp refuses it otherwise)'
        )

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
        cold_cache=str(cold_cache),
        cooldown=cooldown,
        collect=collect,
        model_info=infos,
        power_modes=power_modes,
    )


def load_plan(path: str | Path) -> Plan:
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanError(str(path), ["no such plan file"]) from None
    except IsADirectoryError:
        raise PlanError(str(path), ["is a directory, not a plan file"]) from None
    except UnicodeDecodeError:
        raise PlanError(str(path), ["not UTF-8 text"]) from None
    except OSError as exc:
        raise PlanError(str(path), [f"cannot read: {exc.strerror}"]) from None
    return parse_plan(text, source=str(path), base=p.resolve().parent)


def expand(plan: Plan, sha256_of: dict[str, str]) -> list[RunSpec]:
    """The run specs of a plan, ordered: power mode > model (plan order) > ngl > mmap > ctx > … > threads >
    workload."""
    specs: list[RunSpec] = []
    axis_names = list(AXES)
    # Power mode outermost: a switch takes seconds and changes the thermal state, so it happens once per mode.
    for power_mode in plan.power_modes or (None,):
        for model in plan.models:
            for combo in _product([plan.axes[a] for a in axis_names]):
                values = {AXES[a][0]: v for a, v in zip(axis_names, combo, strict=True)}
                if values["n_ubatch"] is None:
                    values["n_ubatch"] = min(512, values["n_batch"])
                params = Params(**values, power_mode=power_mode)
                for wl in plan.workloads:
                    specs.append(
                        RunSpec(
                            model=model,
                            model_sha256=sha256_of[model.path],
                            params=params,
                            workload=wl,
                            repeat=plan.repeat,
                            timeout_s=plan.timeout_s,
                            cold_cache=plan.cold_cache,
                            cooldown_per_rep=plan.cooldown.per_rep,
                        )
                    )
    return specs


def _product(lists: list[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    if not lists:
        yield ()
        return
    for head in lists[0]:
        for rest in _product(lists[1:]):
            yield (head, *rest)
