"""The plan model: what a validated plan holds, and the frozen run specs its matrix expands into.

Every class here is frozen: a spec id is a hash of what is measured, so nothing may change a spec after it
was made. Fields added after plans were first stored are left out of the JSON (and so of the spec id) while
they hold their default, so that the spec ids of plans written before those fields existed stay as they
were and a resumed sweep still finds its finished configs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from edgeprof.gguf import GGUFInfo
from edgeprof.plan.budget import Decide, QualityBudget
from edgeprof.plan.quality import QualitySpec
from edgeprof.plan.serving import Serving
from edgeprof.plan.tasks import TaskSpec
from edgeprof.runners.registry import DEFAULT_RUNNER, is_serving


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
    # A model's own chat template (Jinja text) overrides its GGUF's, for a GGUF that has none or a wrong
    # one; its own prompt replaces a text workload's prompt for this model only (say an instruction model
    # that needs a different wording)
    chat_template: str | None = None
    prompt: str | None = None


# A soak's defaults: ten minutes is MLPerf Inference's minimum for a performance run (long enough for
# thermal effects to show); ten-second windows see a throttle step without a row per token.
SOAK_DEFAULT_DURATION_S = 600.0
SOAK_DEFAULT_WINDOW_S = 10.0


@dataclass(frozen=True)
class SoakSpec:
    """A ``kind = "soak"`` workload's load: its request repeated back to back for ``duration_s``, cut into
    windows of ``window_s`` on the monotonic clock."""

    duration_s: float = SOAK_DEFAULT_DURATION_S
    window_s: float = SOAK_DEFAULT_WINDOW_S
    # Thermal steady state: the hottest zone's slope under this many °C/min over the trailing span; None:
    # the soak verdict's defaults (``SoakThresholds``). Left out of to_json while unset, so a plan that
    # does not state them keeps its spec ids.
    steady_c_per_min: float | None = None
    steady_span_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"duration_s": self.duration_s, "window_s": self.window_s}
        if self.steady_c_per_min is not None:
            out["steady_c_per_min"] = self.steady_c_per_min
        if self.steady_span_s is not None:
            out["steady_span_s"] = self.steady_span_s
        return out


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
    # Chat, EOS and per-model workloads. Absent from to_json while unset, so that the spec ids of plans
    # written before these keys existed stay as they were.
    messages: tuple[tuple[str, str], ...] | None = None  # (role, content) pairs, rendered with a template
    chat_template: str | None = None  # a Jinja template that overrides the model's own
    parse_special: bool = False  # text prompts: tokenize "<|im_start|>"-like text as special tokens
    stop: tuple[str, ...] = ()  # stop strings: generation ends with finish_reason "stop"
    models: tuple[str, ...] | None = None  # model labels or groups this workload applies to (None: all)
    # The context sized to this request at its depth instead of the matrix's ctx, as llama-bench sizes each
    # test's own (p + n + d); set by ``edgeprof bench``, not a plan key
    ctx_fit: bool = False
    # Set for kind = "quality" (agent/plan/quality.py): a quality run scores a text, it generates nothing
    quality: QualitySpec | None = None
    # Set for kind = "soak": the same generation request, repeated back to back for a duration
    soak: SoakSpec | None = None
    # Set for kind = "task" (agent/plan/tasks/): task accuracy over a task set, it generates nothing
    task: TaskSpec | None = None

    @property
    def kind(self) -> str:
        if self.soak is not None:
            return "soak"
        if self.task is not None:
            return "task"
        return "generation" if self.quality is None else "quality"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        del out["quality"]  # generation workloads keep the spec ids they always had
        del out["soak"]
        del out["task"]
        if self.task is not None:
            out["kind"] = "task"
            out["task"] = self.task.to_json()  # the file's hash and the subset, never the tasks
        if self.quality is not None:
            out["kind"] = "quality"
            out["quality"] = self.quality.to_json()  # the text's hash, never the text
        if self.soak is not None:  # another duration or window is another measurement
            out["kind"] = "soak"
            out["soak"] = self.soak.to_json()
        for key, unset in (
            ("messages", None),
            ("chat_template", None),
            ("parse_special", False),
            ("stop", ()),
            ("models", None),
            ("ctx_fit", False),
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


# The Params fields for llama.cpp parity with llama-bench, at llama-bench's values: spec ids leave them out
# at these values, so plans written before the fields existed keep their spec ids.
PARITY_DEFAULTS: dict[str, Any] = {
    "swa_full": False,
    "kv_unified": False,
    "offload_kqv": True,
    "op_offload": True,
    "poll": 50,
    "n_seq_max": 1,
    "depth": 0,
    "cpu_mask": "0x0",
    "cpu_strict": False,
    "prio": 0,
}


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
    # llama-bench's values (tools/llama-bench: swa_full = false, -nkvo 0, -nopo 0, --poll 50, one sequence,
    # -d 0), so that a number here compares with llama-bench's; kv_unified is
    # llama_context_default_params()'s, which llama-bench keeps.
    swa_full: bool = False
    kv_unified: bool = False
    offload_kqv: bool = True
    op_offload: bool = True
    poll: int = 50
    n_seq_max: int = 1
    depth: int = 0  # tokens in the KV cache before each measured request (llama-bench -d)
    # the CPU threadpool's placement, as llama-bench's -C, --cpu-strict and --prio: "0x0" = no affinity
    cpu_mask: str = "0x0"
    cpu_strict: bool = False
    prio: int = 0
    # Which runner measures this config, and the serving load (llama-server only)
    runner: str = DEFAULT_RUNNER
    concurrency: int | None = None  # closed loop: N clients (open loop: the cap on requests in flight)
    request_rate: float | None = None  # open loop: Poisson arrivals, requests/s

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if out["power_mode"] is None:
            del out["power_mode"]  # keeps spec ids of plans without the axis as they were
        # Absent for the in-process runner, so every spec id from before the runner axis stays valid
        if out["runner"] == DEFAULT_RUNNER:
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
    serving: Serving | None = None  # the [serving] table, for the llama-server runner only

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
        if self.serving is not None and is_serving(self.params.runner):
            ident["serving"] = self.serving.to_json()  # another request count or SLO is another config
        return _digest(ident)[:16]

    def job(
        self, *, cold_only: bool = False, cold_rep: int = 0, block: dict[str, int] | None = None
    ) -> dict[str, Any]:
        """The JSON the worker process receives (``block``: a later block of steady reps, in a process of
        its own; see runners/llama_worker.py rep_plan)."""
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
            **({"block": block} if block is not None else {}),
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
    # The runner axis and the serving load axes (concurrency and request_rate cross llama-server only)
    runners: tuple[str, ...] = (DEFAULT_RUNNER,)
    concurrency: tuple[int, ...] = (1,)
    request_rates: tuple[float | None, ...] = (None,)
    serving: Serving | None = None
    # MiB of MemAvailable the fit check keeps back for the rest of the system; what the recommendation
    # accepts against the quality reference
    reserve_mb: float = 0.0
    quality_budget: QualityBudget = field(default_factory=QualityBudget)
    decide: Decide = field(default_factory=Decide)  # how a group of rivals is settled

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def specs_per_model(self) -> dict[str, int]:
        """Configs per model label: only the workloads that apply to it (a workload may name its models)."""
        per_combo = max(1, len(self.power_modes))
        # in-process runs once per combo; each serving runner once per (concurrency, request_rate)
        per_combo *= sum(
            len(self.concurrency) * len(self.request_rates) if is_serving(r) else 1 for r in self.runners
        )
        for values in self.axes.values():
            per_combo *= len(values)
        # a quality workload runs once per model (and power mode): its numbers do not depend on the speed axes
        n_quality = max(1, len(self.power_modes)) * sum(
            1 for wl in self.workloads if wl.quality is not None or wl.task is not None
        )
        # a soak runs once per matrix cell in-process, and per concurrency on each serving runner
        per_soak = max(1, len(self.power_modes)) * sum(
            len(self.concurrency) if is_serving(r) else 1 for r in self.runners
        )
        for values in self.axes.values():
            per_soak *= len(values)
        return {
            m.label: per_combo * self._applying(m, "generation")
            + per_soak * self._applying(m, "soak")
            + n_quality
            for m in self.models
        }

    def _applying(self, model: ModelEntry, kind: str) -> int:
        return sum(1 for wl in self.workloads if wl.kind == kind and workload_applies(wl, model))

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


def estimate_prompt_tokens(workload: Workload) -> int:
    """Upper bound of a prompt's token count without a tokenizer: one token per UTF-8 byte, plus BOS.

    Exact for ``prompt_tokens``; for text every tokenizer here emits at most one token per byte (byte
    fallback), so a plan that passes this bound can never overflow the context.
    """
    if workload.prompt_tokens is not None:
        return workload.prompt_tokens
    return len((workload.prompt or "").encode("utf-8")) + 1


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
