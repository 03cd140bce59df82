"""The thresholds of the interleaved comparison, each pinned just inside and just outside with the defaults:
blocks of 2 steady reps, at least 2 shared blocks before contended rivals may decide, a tensor-type mix warned
under half of the matrices of the named type, compare's "within noise" at the rank interval's 95 %. Values
and reasons: docs/thresholds.md."""

from __future__ import annotations

from typing import Any

from edgeprof.gguf.quantizer import NAMED_TYPE_MIN_SHARE, TensorMix
from edgeprof.report.compare import NOISE_CONFIDENCE_PCT, within_noise
from edgeprof.report.recommend import MIN_PAIRED_BLOCKS, recommend
from edgeprof.sweep.interleave import BLOCK_REPS, block_sizes


def test_blocks_hold_2_steady_reps() -> None:
    assert BLOCK_REPS == 2
    assert block_sizes(2) == [2]  # one block: nothing to alternate
    assert block_sizes(3) == [2, 1]  # the least that is interleaved


def _row(run_id: int, label: str, blocks: dict[int, list[float]]) -> dict[str, Any]:
    reps = [x for v in blocks.values() for x in v]
    bpw = 8.5 if label == "q8" else 4.9
    return {
        "run_id": run_id, "model_label": label, "model_group": "g", "quant": label, "workload": "w",
        "runner": "llama-cpp", "status": "ok", "reason": None, "bits_per_weight": bpw,
        "tg_tps_median": sorted(reps)[(len(reps) - 1) // 2], "tg_tps_min": min(reps), "tg_tps_max": max(reps),
        "tg_tps_n": len(reps), "_tg_tps_reps": reps, "_tg_tps_blocks": blocks, "kld_mean": None,
        "same_top_pct": None, "ctx": 512, "depth": 0, "ngl": 0, "threads": 1, "flash_attn": "off",
        "interference_verdict": "contended",
    }  # fmt: skip


def test_contended_rivals_decide_from_2_shared_blocks() -> None:
    assert MIN_PAIRED_BLOCKS == 2
    fast = {0: [30.0, 30.2, 30.1], 1: [29.9, 30.3, 30.05]}
    slow = {k: [x / 1.5 for x in v] for k, v in fast.items()}
    (two,) = recommend([_row(1, "q4", fast), _row(2, "q8", slow)])
    assert two.decision == "faster"
    one = {0: fast[0] + fast[1]}
    (single,) = recommend([_row(1, "q4", one), _row(2, "q8", {0: slow[0] + slow[1]})])
    assert single.decision == "no_decision"


def test_a_mix_is_warned_under_half_of_its_matrices_of_the_named_type() -> None:
    assert NAMED_TYPE_MIN_SHARE == 0.5
    assert TensorMix({"Q5_K": 1.0}, "Q5_K", 0.5, 1000).warning is None
    assert TensorMix({"Q5_K": 1.0}, "Q5_K", 0.499, 1000).warning is not None


def test_compare_calls_noise_at_the_rank_intervals_95_percent() -> None:
    assert NOISE_CONFIDENCE_PCT == 95.0

    def side(reps: list[float]) -> dict[str, Any]:
        return {"_reps_tg_tps": reps}

    # every rep of B above every rep of A: with 4 a side the 95 % interval excludes 1, with 3 none exists
    assert within_noise(side([10.0, 10.1, 10.2, 10.3]), side([12.0, 12.1, 12.2, 12.3]), "tg_tps") is False
    assert within_noise(side([10.0, 10.1, 10.2]), side([12.0, 12.1, 12.2]), "tg_tps") is True
