"""Will it fit, on real models: memory predictions against the measured peaks of the demo models (run by
llama.cpp), configs skipped as skipped_memory under a fake MemAvailable, the runtime calibrated from a
sweep's own runs, bandwidth per token in stored runs. The hand-computed parts are in
tests/unit/gguf/test_memory.py."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from support.fakes import SYNTHETIC_PROBE, FakeRoot
from support.memory import predict_cpu
from support.plans import plan_toml

from edgeprof.gguf import (
    RUNTIME_BASE_MIB,
    GGUFError,
    build_demo_models,
    decode_mean_depth,
    kv_read_per_token,
    predict_memory,
    quality_outputs,
    quality_scoring_bytes,
    read_model_shape,
    weights_read_per_token,
)
from edgeprof.plan import parse_plan
from edgeprof.report import build_rows, render_table
from edgeprof.runners import run_child
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import Run, Sweep
from edgeprof.sweep import run_plan

# The stated band: |predicted − measured VmHWM| ≤ 5 % of measured + 4 MiB. The issue suggested 15 % + a
# margin; at the demo models' size (57–177 MiB) that would let a KV cache off by half or a missing repack
# copy pass, so the band is what the model actually achieves: on this project's 2-core x86_64 VM (CPU build)
# the error was within 2.3 % (1.4 MiB) over tiny and small demo, Q8_0/Q5_K_M/Q4_K_M, ctx 512/2048/8192.
BAND_REL = 0.05
BAND_ABS_MB = 4.0
# The runtime's own share (interpreter and libraries, no model) is not a property of the code: libraries
# freshly written to the page cache sit in large folios that a fault maps whole, the same files evicted and
# read back map page by page. On this VM the worker's baseline is 53-55 MiB right after setup.sh and 47-49
# MiB in a tree whose libraries were evicted since (every model term matched to <1 MiB in both). The sweep
# therefore learns it from its first finished run (agent/sweep/fit.py); the test does the same, and holds the
# constant it starts from to over-predicting by at most 10 MiB (the safe side) and under-predicting by 4.
RUNTIME_OVER_MB, RUNTIME_UNDER_MB = 10.0, 4.0


@pytest.fixture(scope="module")
def small_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_demo_models(tmp_path_factory.mktemp("small-models"), "small")


def _job(path: Path, ctx: int, mmap: bool = True, fa: str = "off") -> dict[str, Any]:
    return {
        "model_path": str(path),
        "params": {
            "n_ctx": ctx,
            "n_gpu_layers": 0,
            "n_threads": 1,
            "n_batch": 512,
            "n_ubatch": 512,
            "flash_attn": fa,
            "type_k": "f16",
            "type_v": "f16",
            "use_mmap": mmap,
        },
        "workload": {
            "name": "w",
            "prompt": None,
            "prompt_tokens": 128,
            "n_predict": 8,
            "temperature": 0.0,
            "top_k": 40,
            "top_p": 0.95,
            "seed": 42,
            "ignore_eos": True,
        },
        "repeat": {"cold": 1, "warmup": 0, "steady": 1},
        "cold_only": False,
        "cold_rep": 0,
        "pause_between_reps": False,
    }


@pytest.mark.timeout(600)
@pytest.mark.parametrize("ctx", [512, 2048, 8192])
def test_prediction_within_band_of_measured_peak(
    ctx: int, tiny_models: dict[str, Path], small_models: dict[str, Path]
) -> None:
    cases = [
        (tiny_models["Q5_K_M"], True, "off"),
        (small_models["Q8_0"], True, "off"),
        (small_models["Q4_K_M"], True, "on"),  # the CPU repack term
        (small_models["Q4_K_M"], False, "off"),  # no mmap: no second copy
    ]
    report = []
    runtime_mb: float | None = None  # learnt from the first case, as a sweep learns it from its first run
    for path, mmap, fa in cases:
        child = run_child(_job(path, ctx, mmap, fa), 180)
        assert child.status == "ok", child.reason
        assert child.peak_rss_mb is not None

        def predict(runtime: float, path: Path = path, mmap: bool = mmap, fa: str = fa) -> float:
            shape = read_model_shape(path)
            config = dict(n_ctx=ctx, flash_attn=fa, use_mmap=mmap, prompt_tokens=128, n_predict=8)
            return predict_cpu(shape, runtime_mb=runtime, **config).total_mb

        observed_runtime = child.peak_rss_mb - (predict(RUNTIME_BASE_MIB) - RUNTIME_BASE_MIB)
        runtime_mb = observed_runtime if runtime_mb is None else runtime_mb
        pred = predict(runtime_mb)
        report.append(
            f"{path.name} mmap={mmap} fa={fa}: predicted {pred:.1f} (runtime {runtime_mb:.1f}), "
            f"peak {child.peak_rss_mb:.1f}, runtime seen {observed_runtime:.1f}"
        )
        assert abs(pred - child.peak_rss_mb) <= BAND_REL * child.peak_rss_mb + BAND_ABS_MB, "\n".join(report)
        low, high = RUNTIME_BASE_MIB - RUNTIME_OVER_MB, RUNTIME_BASE_MIB + RUNTIME_UNDER_MB
        assert low <= observed_runtime <= high, "\n".join(report)


def test_gguf_shape_of_the_demo_model(tiny_models: dict[str, Path]) -> None:
    import gguf

    shape = read_model_shape(tiny_models["F16"])
    dims = (shape.arch, shape.n_layer, shape.n_embd, shape.n_head, shape.n_vocab)
    assert dims == ("llama", 2, 256, 4, 1024)
    assert shape.n_head_kv == (4, 4) and shape.head_dim_k == 64 and shape.n_swa == 0
    reader = gguf.GGUFReader(str(tiny_models["F16"]))
    assert shape.weight_bytes == sum(int(t.n_bytes) for t in reader.tensors)
    assert not shape.tied_output
    q4 = read_model_shape(tiny_models["Q4_K_M"])
    assert q4.weight_bytes == sum(int(t.n_bytes) for t in gguf.GGUFReader(str(tiny_models["Q4_K_M"])).tensors)


def test_truncated_gguf_is_one_clear_error(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    bad = tmp_path / "cut.gguf"
    bad.write_bytes(tiny_models["F16"].read_bytes()[:2000])
    with pytest.raises(GGUFError, match=r"cut\.gguf"):
        read_model_shape(bad)
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"NOPE" + b"\0" * 64)
    with pytest.raises(GGUFError, match="not a GGUF"):
        read_model_shape(junk)


@pytest.mark.timeout(60)
@pytest.mark.timeout(300)
def test_config_that_cannot_fit_is_skipped_and_the_sweep_goes_on(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    model = tmp_path / "tiny-q4.gguf"
    shutil.copy(tiny_models["Q4_K_M"], model)
    shape = read_model_shape(model)

    def predicted(ctx: int) -> float:
        return predict_cpu(shape, n_ctx=ctx, type_k="f32", type_v="f32", n_predict=8).total_mb

    # A fake MemAvailable between the two configs' predictions: the large ctx cannot fit, the small one can.
    available = (predicted(2048) + predicted(256)) / 2
    root = tmp_path / "root"
    FakeRoot(root).meminfo(MemTotal=99999999, MemAvailable=int(available * 1024))
    text = plan_toml(
        [model],
        name="fit",
        ctx=[2048, 256],
        matrix={"ngl": [0], "n_batch": [512], "flash_attn": ["off"], "type_k": ["f32"], "type_v": ["f32"]},
        workloads=[{"name": "w", "prompt_tokens": 16, "n_predict": 8}],
        repeat={"warmup": 0},
        run={"timeout_s": 120, "cold_cache": "keep"},
    )
    plan = parse_plan(text, str(tmp_path / "p.toml"), tmp_path)
    engine = open_engine(tmp_path / "e.db")
    outcome = run_plan(
        engine, plan, out=io.StringIO(), device_root=root, bandwidth_probe=lambda: SYNTHETIC_PROBE
    )
    assert outcome.counts == {"skipped_memory": 1, "ok": 1}
    with new_session(engine) as s:
        runs = {r.n_ctx: r for r in s.scalars(select(Run).order_by(Run.id))}
        big, small = runs[2048], runs[256]
        assert big.status == "skipped_memory"
        assert big.reason is not None and big.reason.startswith("predicted not to fit: needs ≈ ")
        assert "MiB available" in big.reason and " MB" not in big.reason
        assert big.measurements == [] and big.peak_rss_mb is None  # never started
        assert big.mem_predicted_mb == pytest.approx(predicted(2048), abs=0.1)
        assert big.mem_available_mb == pytest.approx(available, abs=0.1)
        assert small.status == "ok" and small.mem_predicted_mb == pytest.approx(predicted(256), abs=0.1)
        detail = json.loads(small.mem_prediction_json or "{}")
        assert detail["kv_cpu_mb"] > 0 and detail["runtime_mb"] > 0
        steady = [m for m in small.measurements if m.kind == "steady"]
        assert steady and all(m.bw_gbps is not None and m.bw_gbps > 0 for m in steady)
        for m in steady:  # bytes per token × t/s, at the rep's mean depth
            assert m.tg_tps is not None and m.n_prompt is not None and m.n_gen is not None
            depth = decode_mean_depth(m.n_prompt, m.n_gen)
            expect = weights_read_per_token(shape) + kv_read_per_token(shape, depth, 256, 512, "f32", "f32")
            assert m.bw_gbps == pytest.approx(expect * m.tg_tps / 1e9, rel=1e-3)
        sweep = s.scalars(select(Sweep)).one()
        assert sweep.bw_probe_gbps == 10.0 and "synthetic" in (sweep.bw_probe_json or "")
        rows = build_rows(s, sweep.id)
    by = {r["ctx"]: r for r in rows}
    assert by[2048]["status"] == "skipped_memory" and by[2048]["mem_predicted_mb"] is not None
    assert by[256]["bw_pct"] == pytest.approx(round(by[256]["bw_gbps"] * 10, 1), abs=0.11)
    table = render_table(rows)
    # each line names its condition: the thread count is the machine's default here
    where = r"depth 0, ngl 0, threads \d+, w, llama-cpp"
    assert re.search(rf"Recommendation \(ctx 256, {where}\): tiny-q4 — ", table)
    assert re.search(rf"Recommendation \(ctx 2048, {where}\): none — ", table)
    # Resume: both are finished results (a skipped config is not retried unless asked)
    again = run_plan(engine, plan, out=io.StringIO(), device_root=root)
    assert again.n_skipped == 2 and again.counts == {}


@pytest.mark.timeout(300)
def test_the_sweep_calibrates_the_runtime_from_its_runs(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    """After the first finished run, predictions use this machine's runtime memory (peak RSS minus the
    predicted model parts), not the constant."""
    model = tmp_path / "tiny-q8.gguf"
    shutil.copy(tiny_models["Q8_0"], model)
    text = plan_toml(
        [model],
        ctx=[256, 512],
        workloads=[{"name": "w", "prompt_tokens": 16, "n_predict": 4}],
        repeat={"warmup": 0, "steady": 1},
        run={"timeout_s": 600, "cold_cache": "keep"},
    )
    plan = parse_plan(text, str(tmp_path / "p.toml"), tmp_path)
    engine = open_engine(tmp_path / "c.db")
    outcome = run_plan(engine, plan, out=io.StringIO(), device_root=tmp_path)
    assert outcome.counts == {"ok": 2}
    with new_session(engine) as s:
        first, second = s.scalars(select(Run).order_by(Run.id)).all()
        d1 = json.loads(first.mem_prediction_json or "{}")
        d2 = json.loads(second.mem_prediction_json or "{}")
        assert d1["runtime_calibrated_from_run"] is None
        assert d2["runtime_calibrated_from_run"] == first.id
        assert first.peak_rss_mb is not None
        expect = first.peak_rss_mb - (d1["host_mb"] - d1["runtime_mb"])
        assert d2["runtime_mb"] == pytest.approx(expect, abs=0.15)
        assert second.peak_rss_mb is not None and second.mem_predicted_mb is not None
        assert abs(second.mem_predicted_mb - second.peak_rss_mb) <= 0.05 * second.peak_rss_mb + 4.0


def test_discrete_gpu_memory_is_checked_apart(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    """With layers on a discrete GPU (synthetic: an offloading build, 0.5 MiB free GPU memory), the GPU part
    decides; on unified memory (a Jetson) the host check alone does."""
    from edgeprof.plan import expand
    from edgeprof.sweep import FitChecker

    text = plan_toml(
        [tiny_models["Q8_0"]],
        matrix={"ngl": [99]},
        workloads=[{"name": "w", "prompt_tokens": 16, "n_predict": 4}],
    )
    plan = parse_plan(text, str(tmp_path / "p.toml"), tmp_path)
    (spec,) = expand(plan, {m.path: "0" * 64 for m in plan.models})
    fake = FakeRoot(tmp_path)
    fake.meminfo(MemAvailable=99999999)
    run = Run()
    fit = FitChecker(tmp_path, gpu_offload=True, gpu_free_mb=lambda: 0.5).assess(run, spec)
    assert fit is not None and fit.fits is False
    assert "of GPU memory, 0.5 MiB available" in fit.message()
    ok = FitChecker(tmp_path, gpu_offload=True, gpu_free_mb=lambda: 1000.0).assess(Run(), spec)
    assert ok is not None and ok.fits is True
    fake.l4t_release()
    jetson = FitChecker(tmp_path, gpu_offload=True, gpu_free_mb=lambda: 0.5).assess(Run(), spec)
    assert jetson is not None and jetson.fits is True


def test_quality_run_prediction_counts_its_scoring_arrays(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    from edgeprof.plan import expand
    from edgeprof.sweep import FitChecker

    text = plan_toml(
        [tiny_models["Q8_0"]], workloads=[{"name": "kld", "kind": "quality", "ctx": 128, "chunks": 2}]
    )
    plan = parse_plan(text, str(tmp_path / "p.toml"), tmp_path)
    (spec,) = expand(plan, {m.path: "0" * 64 for m in plan.models})
    run = Run()
    assert FitChecker(tmp_path, gpu_offload=False).assess(run, spec) is not None
    detail = json.loads(run.mem_prediction_json or "{}")
    n_ctx = spec.params.n_ctx  # the quality workload's own ctx
    assert n_ctx == 128
    assert detail["scoring_mb"] == pytest.approx(quality_scoring_bytes(1024, 128, 2) / 2**20, abs=0.01)
    # the second half's logits: kept in llama.cpp's output buffer, computed by the chunk's one ubatch
    assert quality_outputs(128, spec.params.n_ubatch) == (64, 64)
    p = spec.params
    expect = predict_memory(
        read_model_shape(tiny_models["Q8_0"]),
        n_ctx=128,
        n_gpu_layers=0,
        n_batch=p.n_batch,
        n_ubatch=p.n_ubatch,
        type_k=p.type_k,
        type_v=p.type_v,
        flash_attn=p.flash_attn,
        use_mmap=p.use_mmap,
        prompt_tokens=128,
        n_predict=0,
        n_outputs=64,
        ubatch_outputs=64,
        scoring_bytes=quality_scoring_bytes(1024, 128, 2),
    )
    assert detail["total_mb"] == pytest.approx(expect.total_mb, abs=0.01)
    assert detail["compute_cpu_mb"] == pytest.approx(expect.compute_cpu_mb, abs=0.01)
