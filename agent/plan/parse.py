"""Plans: load a TOML plan, validate all of it at once, expand the matrix into frozen run specs.

Validation never stops at the first problem: a user fixing a plan at 11 p.m. before an overnight sweep wants
every mistake listed with its place, and nothing started until the plan is right.
"""

from __future__ import annotations

import difflib
import glob
import hashlib
import json
import math
import os
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from edgeprof.device.jetson import nvpmodel_modes
from edgeprof.gguf.info import GGUFError, GGUFInfo, read_gguf_info
from edgeprof.plan.bounds import MAX_NGL, MAX_PLAN_BYTES, check_bounds, count_configs
from edgeprof.plan.budget import QualityBudget, parse_budget
from edgeprof.plan.quality import QualitySpec, is_quality, parse_quality, quality_params
from edgeprof.plan.serving import Serving
from edgeprof.plan.serving import check_serving as _check_serving
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
    # issue 10: a model's own chat template (Jinja text) overrides its GGUF's; its own prompt replaces a text
    # workload's prompt for this model only (say an instruction model that needs a different wording)
    chat_template: str | None = None
    prompt: str | None = None


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
    # issue 10 (chat, EOS, per-model workloads). Absent from to_json while unset, so that the spec ids of
    # plans written before these keys existed stay as they were.
    messages: tuple[tuple[str, str], ...] | None = None  # (role, content) pairs, rendered with a template
    chat_template: str | None = None  # a Jinja template that overrides the model's own
    parse_special: bool = False  # text prompts: tokenize "<|im_start|>"-like text as special tokens
    stop: tuple[str, ...] = ()  # stop strings: generation ends with finish_reason "stop"
    models: tuple[str, ...] | None = None  # model labels or groups this workload applies to (None: all)
    quality: QualitySpec | None = None  # issue 9: set for kind = "quality" (agent/plan/quality.py)

    @property
    def kind(self) -> str:
        return "generation" if self.quality is None else "quality"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        del out["quality"]  # generation workloads keep the spec ids they always had
        if self.quality is not None:
            out["kind"] = "quality"
            out["quality"] = self.quality.to_json()  # the text's hash, never the text
        for key, unset in (
            ("messages", None),
            ("chat_template", None),
            ("parse_special", False),
            ("stop", ()),
            ("models", None),
        ):
            if out[key] == unset or (key == "stop" and not out[key]):
                del out[key]
        if "messages" in out:
            out["messages"] = [list(m) for m in out["messages"]]
        if "stop" in out:
            out["stop"] = list(out["stop"])
        if "models" in out:
            out["models"] = list(out["models"])
        return out

    @property
    def is_chat(self) -> bool:
        return self.messages is not None

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
    # issue 10: llama-bench's values (tools/llama-bench: swa_full = false, -nkvo 0, -nopo 0, --poll 50, one
    # sequence, -d 0); kv_unified is llama_context_default_params()'s, which llama-bench keeps.
    swa_full: bool = False
    kv_unified: bool = False
    offload_kqv: bool = True
    op_offload: bool = True
    poll: int = 50
    n_seq_max: int = 1
    depth: int = 0  # tokens in the KV cache before each measured request (llama-bench -d)
    # issue 14: which runner measures this config, and the serving load (llama-server only)
    runner: str = "llama-cpp"
    concurrency: int | None = None  # closed loop: N clients (open loop: the cap on requests in flight)
    request_rate: float | None = None  # open loop: Poisson arrivals, requests/s

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if out["power_mode"] is None:
            del out["power_mode"]  # keeps spec ids of plans without the axis as they were
        # issue 14: absent for the in-process runner, so every spec id from before the runner axis stays valid
        if out["runner"] == "llama-cpp":
            del out["runner"]
        for name in ("concurrency", "request_rate"):
            if out[name] is None:
                del out[name]
        # The parity knobs only enter the spec id (and the job) when the plan moves them off llama-bench's
        # value: the worker applies the same defaults, and records what was in effect.
        for name in PARITY_DEFAULTS:
            if out[name] == PARITY_DEFAULTS[name]:
                del out[name]
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
    rendered_prompt: str | None = None  # a chat workload's messages rendered with this model's template
    serving: Serving | None = None  # issue 14: the [serving] table, for the llama-server runner only

    @property
    def spec_id(self) -> str:
        ident: dict[str, Any] = {
            "model_sha256": self.model_sha256,
            # the same file under two labels (say on NVMe and on an SD card) is two configs
            "model_label": self.model.label,
            "params": self.params.to_json(),
            "workload": self.workload.to_json(),
            "repeat": self.repeat.to_json(),
        }
        if self.rendered_prompt is not None:  # another template is another prompt
            ident["rendered_prompt_sha256"] = hashlib.sha256(self.rendered_prompt.encode()).hexdigest()
        if self.serving is not None and self.params.runner != "llama-cpp":
            ident["serving"] = self.serving.to_json()  # another request count or SLO is another config
        return _digest(ident)[:16]

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
            "rendered_prompt": self.rendered_prompt,
            **({"serving": self.serving.to_json()} if self.serving is not None else {}),
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
    # (model label, workload name) -> the chat workload rendered with that model's template
    rendered: dict[tuple[str, str], str] = field(default_factory=dict)
    # issue 14: runner axis and the serving load axes (concurrency, request_rate cross llama-server only)
    runners: tuple[str, ...] = ("llama-cpp",)
    concurrency: tuple[int, ...] = (1,)
    request_rates: tuple[float | None, ...] = (None,)
    serving: Serving | None = None
    # issue 9: MiB of MemAvailable the fit check keeps back; the recommendation's quality budget
    reserve_mb: float = 0.0
    quality_budget: QualityBudget = field(default_factory=QualityBudget)

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def specs_per_model(self) -> dict[str, int]:
        """Configs per model label: only the workloads that apply to it (a workload may name its models)."""
        per_combo = max(1, len(self.power_modes))
        # in-process runs once per combo; each serving runner once per (concurrency, request_rate)
        per_combo *= sum(
            1 if r == "llama-cpp" else len(self.concurrency) * len(self.request_rates) for r in self.runners
        )
        for values in self.axes.values():
            per_combo *= len(values)
        n_quality = max(1, len(self.power_modes)) * sum(1 for wl in self.workloads if wl.quality is not None)
        return {
            m.label: per_combo
            * sum(1 for wl in self.workloads if wl.quality is None and workload_applies(wl, m))
            + n_quality  # issue 9: a quality workload runs once per model (and power mode)
            for m in self.models
        }

    def n_specs(self) -> int:
        return sum(self.specs_per_model().values())


def workload_applies(workload: Workload, model: ModelEntry) -> bool:
    """A workload with ``models = [...]`` runs only on the models named there, by label or group."""
    if workload.models is None:
        return True
    return model.label in workload.models or (model.group is not None and model.group in workload.models)


def workload_for(workload: Workload, model: ModelEntry) -> Workload:
    """The workload as it runs on this model: a model's own prompt replaces a text workload's prompt."""
    if model.prompt is not None and workload.prompt is not None and workload.prompt_tokens is None:
        return replace(workload, prompt=model.prompt)
    return workload


# Params fields that issue 10 added, with llama-bench's values (spec ids leave them out at these values).
PARITY_DEFAULTS: dict[str, Any] = {
    "swa_full": False,
    "kv_unified": False,
    "offload_kqv": True,
    "op_offload": True,
    "poll": 50,
    "n_seq_max": 1,
    "depth": 0,
}


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# -ngl "all": the bound itself, more layers than any model has; llama.cpp offloads every layer and the output
# (llama-bench: -1)
NGL_ALL = MAX_NGL

# Axis name in the plan -> (Params field, default). Order = expansion order inside one model: the axes that
# force a model reload (ngl, mmap) vary slowest, so consecutive runs reuse the model file in the page cache.
AXES: dict[str, tuple[str, Any]] = {
    # issue 10: llama-bench's defaults where the plan says nothing: every layer offloaded (-ngl -1; "all"
    # here, which a CPU-only build ignores), -b 2048, -ub 512, -fa auto (llama.cpp resolves it per device and
    # the worker records what it chose)
    "ngl": ("n_gpu_layers", NGL_ALL),
    "mmap": ("use_mmap", True),
    "ctx": ("n_ctx", 2048),
    "n_batch": ("n_batch", 2048),
    "n_ubatch": ("n_ubatch", None),  # None: llama.cpp's default 512, capped at n_batch (as llama.cpp does)
    "flash_attn": ("flash_attn", "auto"),
    "type_k": ("type_k", "f16"),
    "type_v": ("type_v", "f16"),
    "threads": ("n_threads", None),
    # issue 10: llama.cpp parity knobs and the context depth, innermost (no reload needed between them
    # except for a new context, which every config gets anyway)
    "swa_full": ("swa_full", False),
    "kv_unified": ("kv_unified", False),
    "offload_kqv": ("offload_kqv", True),
    "op_offload": ("op_offload", True),
    "poll": ("poll", 50),
    "n_seq_max": ("n_seq_max", 1),
    "depth": ("depth", 0),
}
AXIS_ALIASES = {
    "batch": "n_batch",
    "ubatch": "n_ubatch",
    "fa": "flash_attn",
    "n_gpu_layers": "ngl",
    "n_ctx": "ctx",
    "n_threads": "threads",
    "use_mmap": "mmap",
    "n_depth": "depth",
}

TOP_KEYS = {"name", "description", "matrix", "workload", "repeat", "run", "cooldown", "collect", "schedule"}
TOP_KEYS |= {"serving"}  # issue 14
TOP_KEYS |= {"quality_budget"}  # issue 9: the recommendation's quality budget (agent/report/recommend.py)
SERVING_AXES = ("runner", "concurrency", "request_rate")  # issue 14: not in AXES, they cross unevenly
MATRIX_KEYS = {"models", "power_mode", *AXES, *AXIS_ALIASES, *SERVING_AXES}
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
REPEAT_KEYS = {"cold", "warmup", "steady"}
RUN_KEYS = {"timeout_s", "cold_cache", "allow_power_mode_change", "allow_ctx_beyond_train", "max_configs"}
RUN_KEYS |= {"reserve_mb"}  # issue 9: memory the fit check leaves to the rest of the system
COOLDOWN_KEYS = {"below_c", "max_wait_s", "delay_s", "slope_c_per_min", "window_s", "per_rep"}
COLLECT_KEYS = {"interval_ms", "idle_s", "collectors"}
SCHEDULE_KEYS = {"until"}
MODEL_KEYS = {"path", "label", "group", "chat_template", "prompt"}


@dataclass(frozen=True)
class SystemProbe:
    """What validation may ask of the machine (injected in tests): its root, our uid, where a tool is."""

    root: Path = Path("/")
    euid: int = field(default_factory=lambda: os.geteuid())
    which: Any = None  # Callable[[str], str | None]; shutil.which by default

    def find(self, tool: str) -> str | None:
        import shutil

        return (self.which or shutil.which)(tool)


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
        if not math.isfinite(value):  # nan passes every comparison; inf is no bound at all
            self.add(place, f"must be a finite number, got {value}")
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
                value = NGL_ALL
            elif isinstance(item, int) and not isinstance(item, bool) and item < 0:
                chk.add(place, f'negative -ngl ({item}); use 0 for CPU only or "all" for every layer')
            else:
                value = chk.integer(item, place, minimum=0)
        elif axis in ("ctx", "n_batch", "n_ubatch"):
            value = chk.integer(item, place, minimum=1)
        elif axis == "threads":
            value = default_threads() if item == "auto" else chk.integer(item, place, minimum=1)
        elif axis in ("mmap", "swa_full", "kv_unified", "offload_kqv", "op_offload"):
            value = chk.boolean(item, place)
        elif axis == "poll":
            value = chk.integer(item, place, minimum=0)
            if value is not None and value > 100:
                chk.add(place, f"poll is a level 0..100 (llama-bench --poll), got {value}")
                value = None
        elif axis == "n_seq_max":
            value = chk.integer(item, place, minimum=1)
        elif axis == "depth":
            value = chk.integer(item, place, minimum=0)
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
        chat_template: str | None = None
        model_prompt: str | None = None
        if isinstance(item, dict):
            chk.unknown_keys(item, MODEL_KEYS, place)
            path_raw = chk.string(item.get("path"), f"{place}.path") if "path" in item else None
            if "path" not in item:
                chk.add(place, "missing 'path'")
            if "label" in item:
                label = chk.string(item["label"], f"{place}.label")
            if "group" in item:
                group = chk.string(item["group"], f"{place}.group")
            if "chat_template" in item:
                chat_template = chk.string(item["chat_template"], f"{place}.chat_template")
            if "prompt" in item:
                model_prompt = chk.string(item["prompt"], f"{place}.prompt")
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
            entries.append(
                ModelEntry(
                    path=str(path),
                    label=entry_label,
                    group=group,
                    chat_template=chat_template,
                    prompt=model_prompt,
                )
            )
    return entries, infos


def _check_workloads(chk: _Checker, raw: Any, base: Path | None = None) -> list[Workload]:
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
        if is_quality(table):  # issue 9: its own keys (agent/plan/quality.py)
            quality = parse_quality(chk, table, place, base or Path.cwd())
            if quality is not None and name is not None:
                out.append(Workload(name=name, prompt=None, prompt_tokens=None, n_predict=0, quality=quality))
            continue
        chk.unknown_keys(table, WORKLOAD_KEYS, place)
        if table.get("kind", "generation") != "generation":
            chk.add(f"{place}.kind", f'expected "generation" or "quality", got {table["kind"]!r}')
        prompt = chk.string(table["prompt"], f"{place}.prompt") if "prompt" in table else None
        prompt_tokens = (
            chk.integer(table["prompt_tokens"], f"{place}.prompt_tokens", minimum=1)
            if "prompt_tokens" in table
            else None
        )
        messages = (
            _check_messages(chk, table["messages"], f"{place}.messages") if "messages" in table else None
        )
        given = [k for k in ("prompt", "prompt_tokens", "messages") if k in table]
        if not given:
            chk.add(
                place,
                "needs 'prompt' (fixed text), 'prompt_tokens' (a prompt of exactly N tokens) or 'messages' "
                "(a chat, rendered with the model's chat template)",
            )
        elif "messages" in table and len(given) > 1:
            chk.add(place, f"'messages' and {' and '.join(repr(k) for k in given if k != 'messages')} "
                    "both given: a chat workload is its messages only")
        chat_template = (
            chk.string(table["chat_template"], f"{place}.chat_template") if "chat_template" in table else None
        )
        if chat_template is not None and "messages" not in table:
            chk.add(f"{place}.chat_template", "only a chat workload ('messages') uses a chat template")
        parse_special = chk.boolean(table.get("parse_special", False), f"{place}.parse_special")
        if "parse_special" in table and "messages" in table and table["parse_special"] is False:
            chk.add(f"{place}.parse_special", "a rendered chat is always tokenized with special tokens")
        stop = _check_str_list(chk, table["stop"], f"{place}.stop") if "stop" in table else ()
        wl_models = _check_str_list(chk, table["models"], f"{place}.models") if "models" in table else None
        if wl_models is not None and not wl_models:
            chk.add(f"{place}.models", "empty list: name the model labels or groups, or drop the key")
        if "n_predict" not in table:
            chk.add(place, "missing 'n_predict'")
        n_predict = chk.integer(table.get("n_predict", 1), f"{place}.n_predict", minimum=1)
        temperature = chk.number(table.get("temperature", 0.0), f"{place}.temperature", minimum=0.0)
        top_k = chk.integer(table.get("top_k", 40), f"{place}.top_k", minimum=1)
        top_p = chk.number(table.get("top_p", 0.95), f"{place}.top_p", minimum=0.0)
        seed = chk.integer(table.get("seed", 42), f"{place}.seed", minimum=0)
        # Only a synthetic prompt (prompt_tokens) generates past EOS by default, like llama-bench's tg test:
        # it measures speed, not an answer. A chat or a text prompt stops at EOS, as a user's request would.
        ignore_eos = chk.boolean(table.get("ignore_eos", "prompt_tokens" in table), f"{place}.ignore_eos")
        if None in (name, n_predict, temperature, top_k, top_p, seed, ignore_eos, parse_special):
            continue
        if prompt is None and prompt_tokens is None and messages is None:
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
                messages=messages,
                chat_template=chat_template,
                parse_special=bool(parse_special) or messages is not None,
                stop=tuple(stop or ()),
                models=tuple(wl_models) if wl_models else None,
            )
        )
    return out


CHAT_ROLES = ("system", "user", "assistant", "tool")


def _check_messages(chk: _Checker, raw: Any, place: str) -> tuple[tuple[str, str], ...] | None:
    """``messages = [{role, content}, ...]``, as an OpenAI-style chat request gives them."""
    if not isinstance(raw, list) or not raw:
        chk.add(place, "expected a non-empty array of {role, content} tables")
        return None
    out: list[tuple[str, str]] = []
    ok = True
    for i, msg in enumerate(raw):
        where = f"{place}[{i}]"
        if not isinstance(msg, dict):
            chk.add(where, f"expected a table {{role, content}}, got {_tname(msg)}")
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


def _check_str_list(chk: _Checker, raw: Any, place: str) -> tuple[str, ...] | None:
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        chk.add(place, "expected an array of strings")
        return None
    return tuple(raw)


def estimate_prompt_tokens(workload: Workload) -> int:
    """Upper bound of a prompt's token count without a tokenizer: one token per UTF-8 byte, plus BOS.

    Exact for ``prompt_tokens``; for text every tokenizer here emits at most one token per byte (byte
    fallback), so a plan that passes this bound can never overflow the context.
    """
    if workload.prompt_tokens is not None:
        return workload.prompt_tokens
    return len((workload.prompt or "").encode("utf-8")) + 1


def _render_chats(
    chk: _Checker, models: list[ModelEntry], workloads: list[Workload]
) -> dict[tuple[str, str], str]:
    """Render every chat workload with each model's template, before anything runs: a model without one is a
    plan error (a wrong or missing template still runs, but gives answers nobody can trust)."""
    from edgeprof.plan.chat import ChatTemplateError, read_chat_meta, render_chat

    rendered: dict[tuple[str, str], str] = {}
    meta_of: dict[str, Any] = {}
    for wl in workloads:
        if wl.messages is None:
            continue
        for model in models:
            if not workload_applies(wl, model):
                continue
            if model.path not in meta_of:
                try:
                    meta_of[model.path] = read_chat_meta(model.path)
                except Exception as exc:  # noqa: BLE001 - the GGUF was read once already; report, don't crash
                    chk.add(f"workload '{wl.name}'", f"{model.label}: cannot read its chat metadata: {exc}")
                    meta_of[model.path] = None
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
            try:
                rendered[(model.label, wl.name)] = render_chat(
                    template,
                    wl.messages,
                    bos_token=meta.bos_token,
                    eos_token=meta.eos_token,
                    add_bos=meta.add_bos,
                )
            except ChatTemplateError as exc:
                chk.add(f"workload '{wl.name}'", f"model {model.label}: {exc}")
    return rendered


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
        if key in ("models", "power_mode", *SERVING_AXES):
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
    workloads = _check_workloads(chk, doc.get("workload"), base)

    rep_t = chk.table(doc, "repeat", "repeat")
    chk.unknown_keys(rep_t, REPEAT_KEYS, "repeat")
    cold = chk.integer(rep_t.get("cold", 1), "repeat.cold", minimum=1)
    warmup = chk.integer(rep_t.get("warmup", 1), "repeat.warmup", minimum=0)
    steady = chk.integer(rep_t.get("steady", 5), "repeat.steady", minimum=1)
    repeat = Repeat(cold=cold or 1, warmup=warmup if warmup is not None else 1, steady=steady or 5)

    run_t = chk.table(doc, "run", "run")
    chk.unknown_keys(run_t, RUN_KEYS, "run")
    timeout_s = chk.number(run_t.get("timeout_s", 600), "run.timeout_s", minimum=1) or 600.0
    reserve_mb = chk.number(run_t.get("reserve_mb", 0), "run.reserve_mb", minimum=0) or 0.0
    budget_problems: list[str] = []
    quality_budget = parse_budget(doc.get("quality_budget"), budget_problems)
    for problem in budget_problems:
        place, _, message = problem.partition(": ")
        chk.add(place, message)
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
    labels = {m.label for m in models} | {m.group for m in models if m.group}
    for wl in workloads:
        for name in wl.models or ():
            if name not in labels:
                chk.add(f"workload '{wl.name}'.models", f"no model labelled or grouped {name!r}")
        ref = wl.quality.reference if wl.quality is not None else None
        if ref is not None and models and ref not in {m.label for m in models}:
            chk.add(f"workload '{wl.name}'.reference", f"no model labelled {ref!r}")
    rendered = _render_chats(chk, models, workloads)
    depths = axes.get("depth") or (0,)
    # llama.cpp splits a non-unified cache between the sequences: one request sees n_ctx / n_seq_max
    seq_split = max(axes.get("n_seq_max") or (1,)) if False in axes.get("kv_unified", (False,)) else 1
    ctx_problems: dict[str, None] = {}  # ordered, one line per (depth, ctx) even across models
    for wl in workloads:
        # with no valid model (already a problem) the prompt itself is still checked against ctx
        candidates: list[ModelEntry | None] = list(models) or [None]
        for model in candidates:
            if model is not None and not workload_applies(wl, model):
                continue
            if wl.messages is not None:
                if model is None or (model.label, wl.name) not in rendered:
                    continue
                est = len(rendered[(model.label, wl.name)].encode("utf-8")) + 1
            else:
                est = estimate_prompt_tokens(workload_for(wl, model) if model is not None else wl)
            exact = wl.prompt_tokens is not None
            for depth in depths:
                need = depth + est + wl.n_predict
                for ctx in axes.get("ctx", ()):
                    if ctx // seq_split < need:
                        bound = "" if exact else "at most "
                        parts = f"prompt tokens ({bound}{est}) + n_predict ({wl.n_predict})"
                        if depth:
                            parts = f"depth ({depth}) + " + parts
                        room = f"ctx {ctx}" + (f" / n_seq_max {seq_split}" if seq_split > 1 else "")
                        ctx_problems[f"{room} < {parts} = {need}"] = None
        for msg in ctx_problems:
            chk.add(f"workload '{wl.name}'", msg)
        ctx_problems.clear()
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

    runners, concurrency, request_rates, serving = _check_serving(chk, doc, matrix, workloads)

    # Ceilings for every number and the matrix size (issue 11), with the reason for each.
    check_bounds(
        chk,
        doc,
        axes,
        {m.label: (infos[m.path].context_length if m.path in infos else None) for m in models},
        workloads,
        repeat,
        timeout_s,
        cooldown,
        collect,
        count_configs(models, workloads, power_modes, *axes.values()),
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
        rendered=rendered,
        runners=runners,
        concurrency=concurrency,
        request_rates=request_rates,
        serving=serving,
        reserve_mb=reserve_mb,
        quality_budget=quality_budget,
    )


def load_plan(path: str | Path) -> Plan:
    p = Path(path).expanduser()
    try:
        if p.is_file() and p.stat().st_size > MAX_PLAN_BYTES:
            size = p.stat().st_size
            raise PlanError(str(path), [f"{size} bytes; a plan is at most {MAX_PLAN_BYTES} bytes"])
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
                base = Params(**values, power_mode=power_mode)
                for params in _runner_params(plan, base):
                    for wl in plan.workloads:
                        if wl.quality is not None:
                            continue  # issue 9: once per model, below
                        if not workload_applies(wl, model):
                            continue  # a per-model workload crosses only its models
                        specs.append(
                            RunSpec(
                                model=model,
                                model_sha256=sha256_of[model.path],
                                params=params,
                                workload=workload_for(wl, model),
                                repeat=plan.repeat,
                                timeout_s=plan.timeout_s,
                                cold_cache=plan.cold_cache,
                                cooldown_per_rep=plan.cooldown.per_rep,
                                rendered_prompt=plan.rendered.get((model.label, wl.name)),
                                serving=plan.serving if params.runner != "llama-cpp" else None,
                            )
                        )
            # issue 9: a quality workload runs once per model (its numbers do not depend on the speed axes),
            # after the model's speed configs, while the model file is still in the page cache.
            for wl in plan.workloads:
                if wl.quality is None:
                    continue
                specs.append(
                    RunSpec(
                        model=model,
                        model_sha256=sha256_of[model.path],
                        params=Params(**quality_params(plan.axes, wl.quality), power_mode=power_mode),
                        workload=wl,
                        repeat=Repeat(cold=1, warmup=0, steady=1),
                        timeout_s=plan.timeout_s,
                        cold_cache=plan.cold_cache,
                    )
                )
    return specs


def _runner_params(plan: Plan, base: Params) -> Iterator[Params]:
    """issue 14: the in-process runner once; a serving runner once per concurrency x request rate (the
    levels of one server config run back to back, lowest load first)."""
    for runner in plan.runners:
        if runner == "llama-cpp":
            yield base
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
