"""Any stored sweep as llama-bench's records: one dict per llama-bench test, keyed by ``FIELDS``.

A sweep made by ``edgeprof bench`` has one config per llama-bench test (its workload is named after it) and
gives one record per config. Any other sweep gives two records per generation config, as llama-bench would
have measured it: ``pp<P>`` over the prefill and ``tg<N>`` over the decode steps. A sweep imported from
llama-bench's own output gives back the identity fields it came with (CPU, GPU, build, model type), which
edgeprof cannot know about another machine; its timings are read from the stored repetitions like any other.

Only ``ok`` configs with steady repetitions appear; quality, soak and serving configs have no llama-bench
test and are left out.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterator
from typing import Any

from sqlalchemy.orm import Session

from edgeprof.report.llamabench.fields import FIELD_NAMES, FLASH_ATTN_CODES, LLAMA_BENCH_DEFAULTS
from edgeprof.report.llamabench.identity import IMPORTED_KEY, UNKNOWN_COMMIT, bench_ngl, build_identity
from edgeprof.report.llamabench.model_desc import model_desc
from edgeprof.report.llamabench.plan import BENCH_MARK, parse_test_name
from edgeprof.report.rows import sweep_runs
from edgeprof.storage.models import Measurement, Run, Sweep

_BACKENDS = {"cpu": "CPU", "cuda": "CUDA", "metal": "Metal", "vulkan": "Vulkan", "gpu": "GPU"}


def sweep_records(session: Session, sweep_id: int | None) -> list[dict[str, Any]]:
    """The llama-bench records of a sweep (default: the latest); ReportError when there is none."""
    sweep_id, runs = sweep_runs(session, sweep_id)
    sweep = session.get(Sweep, sweep_id)
    assert sweep is not None  # sweep_runs raised otherwise
    from_bench = sweep.plan_text.startswith(BENCH_MARK)
    out: list[dict[str, Any]] = []
    for run in runs.inprocess:
        if run.status != "ok":
            continue
        steady = [m for m in run.measurements if m.kind == "steady"]
        if not steady:
            continue
        base = _context(sweep, run)
        for n_prompt, n_gen, samples_ns in _tests(run, steady, from_bench):
            if samples_ns:
                out.append(_record(base, run, n_prompt, n_gen, samples_ns))
    return out


def _tests(run: Run, steady: list[Measurement], from_bench: bool) -> Iterator[tuple[int, int, list[int]]]:
    """(n_prompt, n_gen, samples_ns) of each llama-bench test this config measured."""
    test = parse_test_name(run.workload_name) if from_bench or _imported(run) else None
    if test is not None:
        yield test[0], test[1], [_ns(_test_ms(m)) for m in steady]
        return
    n_prompt = _median_int(m.n_prompt for m in steady)
    if n_prompt:
        yield n_prompt, 0, [_ns(m.prefill_ms) for m in steady if m.prefill_ms]
    n_gen = _median_int(m.n_gen for m in steady)
    if n_gen:
        yield 0, n_gen, [_ns(m.decode_ms) for m in steady if m.decode_ms]


def _test_ms(m: Measurement) -> float | None:
    """A bench test's timed part: prefill and decode as llama.cpp timed them; an imported pp+tg sample has
    only its total."""
    if m.prefill_ms is None and m.decode_ms is None:
        return m.e2e_ms
    return (m.prefill_ms or 0.0) + (m.decode_ms or 0.0)


def _context(sweep: Sweep, run: Run) -> dict[str, Any]:
    """The fields that are the same for every test of a config: build, machine, model, llama.cpp knobs."""
    imported = _imported(run)
    if imported is not None:
        return dict(imported)
    build = run.build
    backend = build.backend if build is not None else "cpu"
    commit, number = (
        build_identity(build.build_flags, build.runtime_version) if build is not None else (UNKNOWN_COMMIT, 0)
    )
    model = run.model_file
    device = sweep.device
    effective = _json(run.effective_json)
    return {
        **LLAMA_BENCH_DEFAULTS,
        "build_commit": commit,
        "build_number": number,
        "cpu_info": device.cpu_model or "",
        "gpu_info": (device.gpu or "") if backend != "cpu" else "",
        "backends": _BACKENDS.get(backend, backend.upper()),
        # as typed on a bench command line (its label); a plan's model: its file
        "model_filename": run.model_label if sweep.plan_text.startswith(BENCH_MARK) else run.model_path,
        "model_type": model_type(effective, model),
        # llama.cpp's own figures when the run recorded them (llama_model_size, llama_model_n_params)
        "model_size": effective.get("model_size_bytes") or _file_bytes(model),
        "model_n_params": effective.get("n_params") or (model.n_params or 0 if model else 0),
        "n_batch": run.n_batch,
        "n_ubatch": run.n_ubatch,
        "n_threads": run.n_threads,
        "poll": run.poll if run.poll is not None else 50,
        "type_k": run.type_k,
        "type_v": run.type_v,
        "n_gpu_layers": bench_ngl(run.n_gpu_layers),
        "no_kv_offload": run.offload_kqv is False,
        "flash_attn": FLASH_ATTN_CODES.get(run.flash_attn, -1),
        "no_op_offload": 1 if run.op_offload is False else 0,
        **_run_knobs(effective),
    }


def _file_bytes(model: Any) -> int:
    return int(model.tensor_bytes or model.size_bytes or 0) if model is not None else 0


def model_type(effective: dict[str, Any], model: Any) -> str:
    """llama.cpp's description as the run recorded it; for an older run, rebuilt from the GGUF."""
    desc = effective.get("model_desc")
    if isinstance(desc, str) and desc:
        return desc
    if model is None:
        return ""
    return model_desc(model.arch, model.file_type, model.quant_type)


def _run_knobs(effective: dict[str, Any]) -> dict[str, Any]:
    """llama-bench's thread knobs a bench command set (-C, --cpu-strict), as the run recorded them."""
    out: dict[str, Any] = {}
    if isinstance(effective.get("cpu_mask"), str):
        out["cpu_mask"] = effective["cpu_mask"]
    if isinstance(effective.get("cpu_strict"), bool):
        out["cpu_strict"] = effective["cpu_strict"]
    return out


def _record(
    base: dict[str, Any], run: Run, n_prompt: int, n_gen: int, samples_ns: list[int]
) -> dict[str, Any]:
    ts = [1e9 * (n_prompt + n_gen) / ns for ns in samples_ns]
    rec = {
        **base,
        "n_prompt": n_prompt,
        "n_gen": n_gen,
        "n_depth": run.depth or 0,
        "test_time": run.started_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "avg_ns": sum(samples_ns) // len(samples_ns),
        "stddev_ns": stdev_ns(samples_ns),
        "avg_ts": sum(ts) / len(ts),
        "stddev_ts": stdev_ts(ts),
    }
    out = {name: rec.get(name) for name in FIELD_NAMES}
    out["samples_ns"] = samples_ns
    out["samples_ts"] = ts
    return out


_U64 = (1 << 64) - 1


def stdev_ns(samples: list[int]) -> int:
    """llama-bench's stdev of the nanosecond samples, in its own uint64 arithmetic (sqrt(sum of squares /
    (n - 1) - mean^2 n / (n - 1)), each step truncated and wrapped at 2^64 as C++ does), so that a record
    reads the same number llama-bench printed for the same samples."""
    n = len(samples)
    if n <= 1:
        return 0
    mean = (sum(samples) & _U64) // n
    sq_sum = sum(v * v for v in samples) & _U64
    inner = (sq_sum // (n - 1) - ((mean * mean & _U64) * n & _U64) // (n - 1)) & _U64
    return int(math.sqrt(inner))


def stdev_ts(values: list[float]) -> float:
    """llama-bench's stdev of the tokens-per-second samples (the same formula, in doubles)."""
    n = len(values)
    if n <= 1:
        return 0.0
    mean = sum(values) / n
    inner = sum(v * v for v in values) / (n - 1) - mean * mean * n / (n - 1)
    return math.sqrt(inner) if inner > 0 else 0.0


def _imported(run: Run) -> dict[str, Any] | None:
    effective = _json(run.effective_json)
    value = effective.get(IMPORTED_KEY)
    return value if isinstance(value, dict) else None


def _json(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _median_int(values: Iterator[int | None] | Any) -> int:
    known = [v for v in values if v is not None]
    return int(statistics.median(known)) if known else 0


def _ns(ms: float | None) -> int:
    return round((ms or 0.0) * 1e6) if ms is not None and math.isfinite(ms) else 0
