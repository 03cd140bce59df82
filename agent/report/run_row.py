"""One run's report row: the fields every runner's row has (cold start, steady-state speeds, TTFT, memory, as
docs/measurements.md defines them), from its stored run and measurements. The sweep-wide parts (reference,
verdicts, quality, fit, fleet) are attached by ``edgeprof.report.rows.build_rows``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from edgeprof.device import comparable_state
from edgeprof.report.cells import OUTPUT_CHARS
from edgeprof.report.llamabench.identity import imported_quant
from edgeprof.report.soak import SOAK_FIELDS, soak_fields
from edgeprof.report.workload import output_until_eos, workload_fields
from edgeprof.stats import Summary
from edgeprof.storage.models import Measurement, ModelFile, Run


def agreement(tokens: Sequence[int], reference: Sequence[int]) -> tuple[int, float, int]:
    """(identical tokens before the first divergence, share of identical positions, positions compared).

    Positions are compared over the longer of the two outputs, so a run that stopped early is not rewarded.
    """
    n = max(len(tokens), len(reference))
    if n == 0:
        return 0, 1.0, 0
    prefix = 0
    for a, b in zip(tokens, reference, strict=False):
        if a != b:
            break
        prefix += 1
    same = sum(1 for a, b in zip(tokens, reference, strict=False) if a == b)
    return prefix, same / n, n


def _in_output_order(run: Run) -> list[Measurement]:
    """The run's requests, steady ones first: the output of its first steady request speaks (greedy: every
    rep gives the same tokens), a warm-up's or the cold one's where no steady rep stored one."""
    return sorted(
        run.measurements, key=lambda m: ({"steady": 0, "warmup": 1, "cold": 2}.get(m.kind, 3), m.rep)
    )


def output_tokens(run: Run) -> list[int] | None:
    """The output of the run's first steady request (greedy: every rep gives the same tokens)."""
    for m in _in_output_order(run):
        if m.output_tokens_json:
            value = json.loads(m.output_tokens_json)
            if isinstance(value, list):
                # what follows an ignored EOS is not an answer: never compared with the reference
                return output_until_eos([int(t) for t in value], m.first_eos_index)
    return None


# An output shorter than this is not judged an echo: "Yes." may well be in the prompt and be an answer.
ECHO_MIN_CHARS = 12


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


def prompt_texts(workload: dict[str, Any]) -> list[str]:
    """The texts a user wrote as the prompt: the ``prompt`` of a text workload, the contents of a chat's
    messages. A synthetic ``prompt_tokens`` prompt is a filler repeated to length: a model continuing it is
    doing what it was given, so it is never judged an echo."""
    if workload.get("prompt_tokens"):
        return []
    texts = [str(content) for _role, content in workload.get("messages") or []]
    if workload.get("prompt"):
        texts.append(str(workload["prompt"]))
    return [t for t in texts if _normal(t)]


def echoes_prompt(output: str | None, prompts: Sequence[str]) -> bool:
    """Whether an output only repeats its prompt: its first ``OUTPUT_CHARS`` characters (what the report
    shows; whitespace and case aside) are all text of the prompt, or of the prompt said again and again. A
    model that restates a question and then answers it within them is not an echo. One that echoes
    instead of answering still runs at full speed and stops at n_predict: nothing else in its row tells it
    apart."""
    head = _normal(output or "")[:OUTPUT_CHARS]
    if len(head) < ECHO_MIN_CHARS:
        return False
    for prompt in prompts:
        said = _normal(prompt)
        repeated = " ".join([said] * (len(head) // len(said) + 2))
        if head in repeated:
            return True
    return False


def _output(run: Run) -> dict[str, Any]:
    """The generated text of the run's first steady request (not a schema field: the Markdown and HTML
    tables and ``report --show-output`` show its start) and whether it repeats the prompt."""
    text = next((m.output_text for m in _in_output_order(run) if m.output_text is not None), None)
    prompts = prompt_texts(json.loads(run.workload_json))
    return {"_output_text": text, "_output_echo": echoes_prompt(text, prompts)}


def bits_per_weight(mf: ModelFile | None) -> float | None:
    """Bits per parameter from the GGUF tensor sizes (what the weights take, without the metadata and the
    tokenizer, which a large vocabulary makes big); from the file size where the file was recorded before the
    tensor sizes were stored."""
    if mf is None or not mf.n_params:
        return None
    return (mf.tensor_bytes or mf.size_bytes) * 8 / mf.n_params


def _identity(run: Run, mf: ModelFile | None) -> dict[str, Any]:
    """What the row is: its sweep and run, the model file, the workload and the parameters."""
    workload = json.loads(run.workload_json)
    bpw = bits_per_weight(mf)
    return {
        "sweep_id": run.sweep_id,
        "run_id": run.id,
        "spec_id": run.spec_id,
        "model_label": run.model_label,
        "model_group": run.model_group,
        "model_sha256": mf.sha256 if mf else None,
        "quant": mf.quant_type if mf else imported_quant(run.effective_json),
        "bits_per_weight": round(bpw, 3) if bpw is not None else None,
        "workload": run.workload_name,
        "n_prompt": next((m.n_prompt for m in run.measurements if m.n_prompt is not None), None),
        "n_predict": int(workload.get("n_predict", 0)),
        "ctx": run.n_ctx,
        "ngl": run.n_gpu_layers,
        # the model's layer count: -ngl above it is "every layer" (compare pairs 99 with -1 and "all")
        "_n_layers": mf.n_layers if mf else None,
        "threads": run.n_threads,
        "n_batch": run.n_batch,
        "n_ubatch": run.n_ubatch,
        "flash_attn": run.flash_attn,
        "type_k": run.type_k,
        "type_v": run.type_v,
        "mmap": bool(run.use_mmap),
        "status": run.status,
        "reason": run.reason,
        "attempts": 1,
    }


def _speed(run: Run, steady: Sequence[Measurement]) -> dict[str, Any]:
    """The first start of a fresh process apart from the steady reps' order statistics."""
    cold = next((m for m in run.measurements if m.kind == "cold" and m.rep == 0), None)
    pp = Summary.of(m.pp_tps for m in steady)
    tg = Summary.of(m.tg_tps for m in steady)
    ttft = Summary.of(m.ttft_ms for m in steady)
    return {
        "cold_load_ms": cold.load_ms if cold else None,
        "cold_start_ms": cold.cold_start_ms if cold else None,
        "cold_ttft_ms": cold.ttft_ms if cold else None,
        "pp_tps_median": pp.median,
        "pp_tps_min": pp.min,
        "pp_tps_max": pp.max,
        "pp_tps_n": pp.n,
        "tg_tps_median": tg.median,
        "tg_tps_min": tg.min,
        "tg_tps_max": tg.max,
        "tg_tps_n": tg.n,
        "ttft_ms_p50": ttft.p50,
        "ttft_ms_p95": ttft.p95,
        "ttft_n": ttft.n,
        "peak_rss_mb": run.peak_rss_mb,
        # filled against the reference by edgeprof.report.reference
        "reference_label": None,
        "agree_prefix_tokens": None,
        "agree_share": None,
        "agree_n_tokens": None,
        "tg_ratio_vs_ref": None,
        "pp_ratio_vs_ref": None,
    }


def _telemetry(run: Run, steady: Sequence[Measurement]) -> dict[str, Any]:
    """Temperatures, energy and the Jetson state the run was measured in (null without such a sensor)."""
    temps = [m.temp_max_c for m in steady if m.temp_max_c is not None]
    state = comparable_state(json.loads(run.device_state_json)) if run.device_state_json else None
    state = state or {}
    return {
        "start_temp_c": run.start_temp_c,
        "temp_max_c": max(temps) if temps else None,
        "power_source": run.energy_sources or run.power_source,
        "energy_basis": run.energy_basis,
        "energy_whole_board": run.energy_whole_board,
        "decode_power_mw_median": Summary.of(m.decode_power_mw for m in steady).median,
        "decode_j_per_token_median": Summary.of(m.decode_j_per_token for m in steady).median,
        "decode_j_per_token_net_median": Summary.of(m.decode_j_per_token_net for m in steady).median,
        "peak_shared_mb": run.peak_shared_mb,
        "peak_gpu_mem_mb": run.peak_gpu_mem_mb,
        "power_mode": state.get("power_mode"),
        "clocks_locked": state.get("clocks_locked"),
        "device_state_changed": run.device_state_changed,
    }


def _soak(run: Run) -> dict[str, Any]:
    """A soak's windows and figures (its own kind of row: it has no steady reps, so its speed never enters
    the speed columns; the soak's figures are the soak judgement's, ``agent/report/soak.py``)."""
    if json.loads(run.workload_json).get("kind") != "soak":
        return {"soak_windows_n": None, **dict.fromkeys(SOAK_FIELDS)}
    return {"soak_windows_n": len(run.soak_windows), **soak_fields(run)}


def base_row(run: Run, mf: ModelFile | None) -> dict[str, Any]:
    """The row of one run before anything sweep-wide is attached."""
    steady: list[Measurement] = [m for m in run.measurements if m.kind == "steady"]
    return {
        **_identity(run, mf),
        **_speed(run, steady),
        **_telemetry(run, steady),
        **workload_fields(run, steady),
        **_output(run),
        **_soak(run),
    }
