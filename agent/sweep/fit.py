"""The sweep's side of the memory and bandwidth figures: the fit check before a config starts (a config
predicted not to fit is never started, since the kernel would OOM-kill it and maybe its neighbours), and the
achieved bandwidth after it, beside the probe's and the datasheet's, for the report's share of the peak.

Kept out of agent/sweep/loop.py (which calls in here at three points) so the sweep loop stays readable.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edgeprof.device import comparable_state
from edgeprof.gguf import (
    RUNTIME_BASE_MIB,
    FitCheck,
    GGUFError,
    ModelShape,
    ProbeResult,
    achieved_gbps,
    check_fit,
    datasheet_bandwidth,
    decode_mean_depth,
    is_unified_memory,
    kv_read_per_token,
    mem_available_mb,
    predict_memory,
    quality_outputs,
    quality_scoring_bytes,
    read_model_shape,
    weights_read_per_token,
)
from edgeprof.gguf.quantizer import QuantizeError, tensor_mix
from edgeprof.plan import RunSpec, estimate_prompt_tokens
from edgeprof.plan.serving import server_slots
from edgeprof.storage.models import Run, Sweep

_OFFLOAD_FLAGS = re.compile(r"GGML_(CUDA|VULKAN|METAL|HIP|SYCL|MUSA|OPENCL)=(ON|1|TRUE)", re.IGNORECASE)


def build_can_offload() -> bool:
    """Whether the installed llama.cpp build offloads at all (scripts/setup.sh records its CMake flags in
    the venv); a CPU build ignores -ngl, so its weights are predicted on the CPU. Read without importing
    llama_cpp into the agent, which would cost the agent its libraries' memory for the whole sweep."""
    path = Path(sys.prefix) / "share" / "edgeprof" / "llama-build.json"
    try:
        return bool(_OFFLOAD_FLAGS.search(path.read_text()))
    except OSError:
        return False


def nvml_gpu_free_mb() -> float | None:
    """Free memory of GPU 0 from NVML (a discrete GPU), MiB; None without pynvml, a driver or a GPU."""
    try:
        import pynvml  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            info = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0))
            return float(info.free) / (1024 * 1024)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - NVML raises its own error types; no reading is "unknown"
        return None


def _request_terms(spec: RunSpec, n_vocab: int) -> dict[str, Any]:
    """What one request of ``spec``'s workload asks of llama.cpp, as predict_memory's keywords: the tokens it
    evaluates and generates, the logits it keeps, and a quality worker's own arrays."""
    p, wl = spec.params, spec.workload
    depth = int(getattr(p, "depth", 0) or 0)
    task = getattr(wl, "task", None)
    if task is not None:
        # A task run's batch holds at most n_ctx tokens, each of them an output row that llama.cpp keeps
        # and the worker copies (float32 x n_vocab): the bound is the plan's (bytes + BOS per sequence).
        n_tokens = min(p.n_ctx, int(task.batch_tokens_bound))
        return {
            "prompt_tokens": depth + n_tokens,
            "n_predict": 0,
            "n_outputs": n_tokens,
            "ubatch_outputs": min(n_tokens, p.n_ubatch),
            "scoring_bytes": n_tokens * n_vocab * 4.0,
        }
    quality = getattr(wl, "quality", None)
    if quality is not None:
        # A quality run evaluates whole chunks of ctx tokens, keeps the logits of their second half and
        # scores them against the reference's rows in the worker's own arrays (see quality_outputs and
        # quality_scoring_bytes for each term).
        n_outputs, ubatch_outputs = quality_outputs(p.n_ctx, min(p.n_ubatch, p.n_batch))
        return {
            "prompt_tokens": depth + p.n_ctx,
            "n_predict": 0,
            "n_outputs": n_outputs,
            "ubatch_outputs": ubatch_outputs,
            "scoring_bytes": quality_scoring_bytes(n_vocab, p.n_ctx, getattr(quality, "chunks", None)),
        }
    try:
        prompt_tokens = estimate_prompt_tokens(wl)
    except Exception:  # noqa: BLE001 - an unusual workload: predict for a full context instead
        prompt_tokens = p.n_ctx
    return {"prompt_tokens": depth + prompt_tokens, "n_predict": int(getattr(wl, "n_predict", 0) or 0)}


class FitChecker:
    """Predicts each spec's memory (the model's GGUF read once) and compares it with MemAvailable."""

    def __init__(
        self,
        root: Path | str = "/",
        reserve_mb: float = 0.0,
        gpu_offload: bool | None = None,
        gpu_free_mb: Callable[[], float | None] | None = None,
    ) -> None:
        self.root = root
        self.reserve_mb = reserve_mb
        self.unified = is_unified_memory(root)
        self.gpu_offload = build_can_offload() if gpu_offload is None else gpu_offload
        # A discrete GPU's own memory is checked apart from the host's (on a Jetson it is the same pool).
        self.gpu_free_mb = gpu_free_mb or nvml_gpu_free_mb
        self._shapes: dict[str, ModelShape | None] = {}
        self._mixes: dict[str, dict[str, Any] | None] = {}
        self.errors: dict[str, str] = {}
        # The runtime's own memory (interpreter, llama.cpp, a CUDA context on a GPU build) as this machine's
        # finished runs show it; None until one has: the measured constant of memory_model is used.
        self.runtime_mb: float | None = None
        self.runtime_from: int | None = None

    def shape(self, path: str) -> ModelShape | None:
        if path not in self._shapes:
            try:
                self._shapes[path] = read_model_shape(path)
            except GGUFError as exc:
                self._shapes[path] = None
                self.errors[path] = str(exc)
        return self._shapes[path]

    def mix(self, path: str) -> dict[str, Any] | None:
        """The file's tensor-type mix (agent/gguf/quantizer.py) as stored with the prediction."""
        if path not in self._mixes:
            try:
                self._mixes[path] = tensor_mix(path).to_json()
            except QuantizeError:
                self._mixes[path] = None
        return self._mixes[path]

    def assess(self, run: Run, spec: RunSpec) -> FitCheck | None:
        """Store the prediction on ``run``; the check's outcome, or None where no prediction is possible."""
        shape = self.shape(spec.model.path)
        if shape is None:
            return None
        p = spec.params
        request = _request_terms(spec, shape.n_vocab)
        slots = server_slots(p.runner, p.concurrency)  # a server: slots x ctx of KV
        try:
            pred = predict_memory(
                shape,
                n_ctx=p.n_ctx * slots,
                n_gpu_layers=p.n_gpu_layers,
                n_batch=p.n_batch,
                n_ubatch=p.n_ubatch,
                type_k=p.type_k,
                type_v=p.type_v,
                flash_attn=p.flash_attn,
                use_mmap=p.use_mmap,
                gpu_offload=self.gpu_offload,
                unified=self.unified,
                swa_full=bool(getattr(p, "swa_full", False)),
                n_seq_max=max(slots, int(getattr(p, "n_seq_max", 1) or 1)),
                runtime_mb=self.runtime_mb if self.runtime_mb is not None else RUNTIME_BASE_MIB,
                **request,
            )
        except ValueError:
            return None
        available = mem_available_mb(self.root)
        fit = check_fit(pred, available, self.reserve_mb)
        if fit.fits is not False and not self.unified and pred.gpu_mb > 0:
            gpu_free = self.gpu_free_mb()
            if gpu_free is not None and pred.gpu_mb > gpu_free:
                fit = FitCheck(False, pred.gpu_mb, max(0.0, gpu_free), 0.0, "GPU memory", gpu_free)
        run.mem_predicted_mb = round(pred.total_mb, 1)
        run.mem_available_mb = round(available, 1) if available is not None else None
        detail = pred.to_json()
        detail["reserve_mb"] = self.reserve_mb
        detail["runtime_calibrated_from_run"] = self.runtime_from
        # what the same tensor table says of the file's types (the report's tensor-type mix and the
        # requantization mark), read here once per file like its shape
        detail["tensor_mix"] = self.mix(spec.model.path)
        run.mem_prediction_json = json.dumps(detail, sort_keys=True)
        run.weights_read_bytes_per_token = weights_read_per_token(shape)
        run.kv_read_bytes_per_position = kv_read_per_token(shape, 1, p.n_ctx, p.n_ubatch, p.type_k, p.type_v)
        return fit

    def calibrate(self, run: Run, spec: RunSpec) -> None:
        """Learn the runtime's memory from a finished generation run: its peak RSS minus the predicted
        weights, KV and compute on the host. The largest seen is kept (erring towards "does not fit" is
        cheaper than an OOM kill); quality runs hold scoring arrays of their own and are not used."""
        if run.status != "ok" or run.peak_rss_mb is None or not run.mem_prediction_json:
            return
        if getattr(spec.workload, "quality", None) is not None or getattr(spec.workload, "task", None):
            return
        detail = json.loads(run.mem_prediction_json)
        try:
            rest = float(detail["host_mb"]) - float(detail["runtime_mb"])
        except (KeyError, TypeError, ValueError):
            return
        observed = run.peak_rss_mb - rest
        if observed > 0 and (self.runtime_mb is None or observed > self.runtime_mb):
            self.runtime_mb, self.runtime_from = round(observed, 1), run.id

    def annotate_bandwidth(self, run: Run, spec: RunSpec) -> None:
        """Achieved GB/s of every rep that decoded: (weights + KV at the rep's mean depth) × tg_tps."""
        shape = self.shape(spec.model.path)
        if shape is None or run.weights_read_bytes_per_token is None:
            return
        p = spec.params
        depth_before = int(getattr(p, "depth", 0) or 0)
        for m in run.measurements:
            if m.tg_tps is None or m.n_gen is None or m.n_prompt is None:
                continue
            depth = decode_mean_depth(m.n_prompt, m.n_gen, depth_before)
            kv = kv_read_per_token(shape, depth, p.n_ctx, p.n_ubatch, p.type_k, p.type_v)
            bw = achieved_gbps(run.weights_read_bytes_per_token + kv, m.tg_tps)
            m.bw_gbps = round(bw, 4) if bw is not None else None


def record_sweep_bandwidth(
    sweep: Sweep,
    facts: dict[str, Any],
    state: dict[str, Any] | None,
    probe: Callable[[], ProbeResult | None] | None,
    say: Callable[[str], None] | None = None,
) -> None:
    """Once per sweep: the probe's figure (skipped on resume when stored) and the board's datasheet one."""
    if sweep.bw_datasheet_gbps is None:
        power_mode = (comparable_state(state) or {}).get("power_mode")  # nvpmodel's name, e.g. MAXN_SUPER
        entry = datasheet_bandwidth(facts.get("board_model"), facts.get("ram_total_mb"), power_mode)
        if entry is not None:
            sweep.bw_datasheet_gbps, sweep.bw_datasheet_source = entry.gbps, entry.source
    if probe is None or sweep.bw_probe_gbps is not None:
        return
    try:
        result = probe()
    except (MemoryError, OSError, RuntimeError) as exc:
        if say is not None:
            say(f"warning: bandwidth probe failed: {type(exc).__name__}: {exc} (bw_pct will be empty)")
        return
    if result is None:
        return
    sweep.bw_probe_gbps = round(result.gbps, 3)
    sweep.bw_probe_json = json.dumps(result.to_json(), sort_keys=True)
    if say is not None:
        spread = ""
        if result.pass_min_gbps is not None and result.pass_max_gbps is not None:
            spread = (
                f"; {result.passes} passes {result.pass_min_gbps:.1f} / {result.pass_median_gbps:.1f} / "
                f"{result.pass_max_gbps:.1f} GB/s min/median/max"
            )
        say(
            f"memory bandwidth probe: {result.gbps:.1f} GB/s (read {result.read_gbps:.1f}, copy "
            f"{result.copy_gbps:.1f}{spread}; {result.method})"
        )
