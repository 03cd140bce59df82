"""Will it fit, and the bandwidth limit, without a model file: the memory prediction hand-computed on a
synthetic shape, the fit check and its boundary, bytes per token, the bandwidth probe, the datasheet table.
Predictions against measured peaks and sweeps that skip what cannot fit are in
tests/integration/test_memory_fit.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from support.fakes import SYNTHETIC_PROBE, FakeRoot
from support.memory import predict_cpu

from edgeprof.gguf import (
    ModelShape,
    TensorInfo,
    check_fit,
    datasheet_bandwidth,
    decode_mean_depth,
    fmt_mib,
    kv_cells,
    kv_read_per_token,
    mem_available_mb,
    probe_bandwidth,
    weights_read_per_token,
)
from edgeprof.storage.models import Sweep


def _synthetic_shape(n_swa: int = 0, swa: tuple[bool, ...] = (False, False, False, False)) -> ModelShape:
    """Synthetic: 4 layers, 2 KV heads of 64, a 1000-entry vocabulary, one 1 MB matrix per layer."""
    tensors = [TensorInfo("token_embd.weight", 1000 * 128, 256_000, "F16", None)]
    tensors += [TensorInfo(f"blk.{i}.ffn_up.weight", 500_000, 1_000_000, "F16", i) for i in range(4)]
    tensors += [TensorInfo("output.weight", 1000 * 128, 256_000, "F16", None)]
    return ModelShape(
        arch="synthetic",
        n_layer=4,
        n_embd=128,
        n_head=4,
        n_head_kv=(2, 2, 2, 2),
        head_dim_k=64,
        head_dim_v=64,
        n_vocab=1000,
        n_ff=512,
        n_swa=n_swa,
        swa_layers=swa,
        n_expert=0,
        n_expert_used=0,
        tensors=tuple(tensors),
    )


def test_kv_and_weight_split_by_ngl_hand_computed() -> None:
    shape = _synthetic_shape()
    common: dict[str, Any] = dict(n_ctx=1024, type_v="q8_0", flash_attn="on")
    cpu = predict_cpu(shape, n_gpu_layers=0, **common)
    # KV per layer and cell: 2 heads x 64 x (2 B for f16 K + 34/32 B for q8_0 V); 4 layers x 1024 cells
    assert cpu.kv_cpu_mb * 2**20 == pytest.approx(4 * 1024 * 2 * 64 * (2 + 34 / 32))
    assert cpu.weights_cpu_mb * 2**20 == 4_512_000 and cpu.gpu_mb == 0.0
    # A CPU build ignores -ngl
    assert predict_cpu(shape, n_gpu_layers=99, **common).gpu_mb == 0.0
    two = predict_cpu(shape, n_gpu_layers=2, gpu_offload=True, **common)
    assert two.weights_gpu_mb * 2**20 == 2_000_000  # the last two layers
    assert two.weights_cpu_mb * 2**20 == 2_512_000  # embedding, two layers, output
    assert two.kv_gpu_mb == pytest.approx(cpu.kv_cpu_mb / 2)
    full = predict_cpu(shape, n_gpu_layers=5, gpu_offload=True, unified=True, **common)
    assert full.weights_gpu_mb * 2**20 == 4_256_000  # all layers + output; the embedding stays
    assert full.total_mb == pytest.approx(full.host_mb + full.gpu_mb)  # unified memory: both count


def test_sliding_window_layers_hold_the_window() -> None:
    shape = _synthetic_shape(n_swa=256, swa=(True, False, True, False))
    assert kv_cells(shape, 0, 8192, 512) == 768  # window + ubatch, padded to 256
    assert kv_cells(shape, 1, 8192, 512) == 8192
    assert kv_cells(shape, 0, 8192, 512, swa_full=True) == 8192
    assert kv_cells(shape, 0, 512, 512) == 512  # never more than the context


def test_bytes_per_token_hand_computed() -> None:
    shape = _synthetic_shape()
    # everything but the embedding (one row of 256 bytes) is read
    assert weights_read_per_token(shape) == 4_000_000 + 256_000 + 256
    per_pos = 4 * 2 * 64 * (2 + 2)
    assert kv_read_per_token(shape, 100, 1024, 512, "f16", "f16") == 100 * per_pos
    swa = _synthetic_shape(n_swa=64, swa=(True, True, False, False))
    assert kv_read_per_token(swa, 100, 1024, 512, "f16", "f16") == (2 * 64 + 2 * 100) * per_pos / 4
    assert decode_mean_depth(128, 63) == 128 + 32


def test_meminfo_and_fit_check(tmp_path: Path) -> None:
    # MemAvailable padded into the kernel's column, which the reader must split through
    FakeRoot(tmp_path).write("proc/meminfo", "MemTotal: 8000000 kB\nMemAvailable:    3276800 kB\n")
    assert mem_available_mb(tmp_path) == 3200.0
    assert mem_available_mb(tmp_path / "nowhere") is None
    pred = predict_cpu(_synthetic_shape())
    assert check_fit(pred, 3200.0).fits is True
    fit = check_fit(pred, 60.0, reserve_mb=10.0)
    assert fit.fits is False and fit.message() == (
        f"needs ≈ {pred.total_mb:.0f} MiB, 50 MiB available after the plan's reserve of 10 MiB"
    )
    assert check_fit(pred, None).fits is None


def test_fit_messages_speak_one_unit_and_never_owe_memory() -> None:
    pred = dataclasses.replace(_small_prediction(), total_mb=5222.4)
    big = check_fit(pred, 3276.8)
    assert big.message() == "needs ≈ 5222 MiB, 3277 MiB available"  # not "5.5 GB, 3.4 GB" beside MB
    # A reserve larger than what is free leaves nothing: clamped, and the message says what there was.
    short = check_fit(pred, 300.0, reserve_mb=512.0)
    assert short.fits is False and short.available_mb == 0.0
    assert short.message() == (
        "needs ≈ 5222 MiB, nothing left after the plan's reserve of 512 MiB (300 MiB free)"
    )
    assert check_fit(pred, 0.0).message() == "needs ≈ 5222 MiB, nothing left (0.0 MiB free)"
    small = check_fit(dataclasses.replace(pred, total_mb=3.25), 0.5)
    assert small.message() == "needs ≈ 3.2 MiB, 0.5 MiB available"  # a tenth where whole MiB read as 0
    for fit in (big, short, small, check_fit(pred, None)):
        text = fit.message()
        assert "-" not in text and " MB" not in text and "GB" not in text, text
    assert fmt_mib(12.6) == "13 MiB" and fmt_mib(9.94) == "9.9 MiB"


def test_a_config_needing_exactly_what_is_available_fits() -> None:
    # The check is "needs <= available": a config that needs every MiB there is still fits (nothing says
    # the last MiB is not usable); one that needs a fraction more does not.
    pred = dataclasses.replace(_small_prediction(), total_mb=100.0)
    assert check_fit(pred, 100.0).fits is True
    assert check_fit(pred, 110.0, reserve_mb=10.0).fits is True  # what is left after the reserve, exactly
    assert check_fit(pred, 99.9).fits is False
    assert check_fit(pred, 110.0, reserve_mb=10.1).fits is False


def _small_prediction() -> Any:
    return predict_cpu(_synthetic_shape())


def test_datasheet_table() -> None:
    agx = datasheet_bandwidth("NVIDIA Jetson AGX Orin Developer Kit", 62000)
    assert agx is not None and agx.gbps == 204.8 and "DS-10662-001" in agx.source
    assert datasheet_bandwidth("NVIDIA Jetson Orin Nano Developer Kit", 7600).gbps == 68.0
    super_ = datasheet_bandwidth("NVIDIA Jetson Orin Nano Developer Kit", 7600, "MAXN_SUPER")
    assert super_ is not None and super_.gbps == 102.0
    assert datasheet_bandwidth("NVIDIA Jetson Orin Nano 4GB", 3500).gbps == 34.0
    assert datasheet_bandwidth("Raspberry Pi 5 Model B", 8000) is None
    assert datasheet_bandwidth(None) is None


def test_probe_measures_something_and_says_how() -> None:
    r = probe_bandwidth(buffer_mb=32, budget_s=0.2, threads=1)
    assert r.gbps > 0 and r.read_gbps > 0 and r.copy_gbps > 0 and r.passes >= 2
    assert "numpy" in r.method and r.to_json()["threads"] == 1
    # its own spread over at least 5 passes: the best pass is the figure, the passes' range beside it
    assert r.passes >= 5
    assert r.pass_min_gbps is not None and r.pass_median_gbps is not None and r.pass_max_gbps is not None
    assert r.pass_min_gbps <= r.pass_median_gbps <= r.pass_max_gbps
    assert r.gbps >= r.pass_max_gbps * 0.999  # each pass's figure is one of its read/copy, the best is max


def test_the_bandwidth_note_gives_the_probes_spread() -> None:
    from edgeprof.report.fit import probe_spread

    stored = {"passes": 12, "pass_min_gbps": 5.6, "pass_median_gbps": 18.3, "pass_max_gbps": 27.3}
    assert probe_spread(stored) == (
        "the probe's 12 passes read 5.6 / 18.3 / 27.3 GB/s min/median/max, "
        "so a share of it is good to about 79 %"
    )
    assert probe_spread({"passes": 2}) == ""  # a probe stored before the spread was kept


def test_sweep_records_the_datasheet_figure_for_the_power_mode() -> None:
    from edgeprof.sweep import record_sweep_bandwidth

    sweep = Sweep()
    facts = {
        "board_model": "NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super",
        "ram_total_mb": 7620,
    }
    state = {"nvpmodel": {"name": "MAXN_SUPER", "id": 2}, "jetson_clocks": None, "fan": None}
    record_sweep_bandwidth(sweep, facts, state, lambda: SYNTHETIC_PROBE)
    assert sweep.bw_datasheet_gbps == 102.0 and "Super" in (sweep.bw_datasheet_source or "")
    assert sweep.bw_probe_gbps == 10.0
    plain = Sweep()
    record_sweep_bandwidth(plain, facts, {"nvpmodel": {"name": "15W", "id": 0}}, None)
    assert plain.bw_datasheet_gbps == 68.0 and plain.bw_probe_gbps is None  # no probe: NULL, never 0
