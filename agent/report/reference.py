"""The reference of each row and the row against it: token agreement and speed ratios.

The reference per (model group, workload) is the highest-precision variant (most bits per weight) that was
measured. Only a variant that produced output can be a reference: an F16 that ran out of memory is not one.
Speed ratios compare a row with the reference at the same parameters only; agreement falls back to any
reference config of the workload, since greedy output does not depend on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from edgeprof.report.run_row import agreement

_BASE_PARAM_KEYS = ("ctx", "ngl", "threads", "n_batch", "n_ubatch", "flash_attn", "type_k", "type_v", "mmap")
# Same-config matching also needs llama.cpp's parameters in effect and the depth: depth 4096 is compared with
# depth 4096.
PARAM_KEYS = (
    *_BASE_PARAM_KEYS, "depth", "swa_full", "kv_unified", "offload_kqv", "op_offload", "poll", "n_seq_max",
)  # fmt: skip
RATIOS = (("tg_tps_median", "tg_ratio_vs_ref"), ("pp_tps_median", "pp_ratio_vs_ref"))


def _references(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        key = (row["model_group"], row["workload"])
        if row["bits_per_weight"] is None or row["status"] != "ok":
            continue
        cur = best.get(key)
        if cur is None or row["bits_per_weight"] > cur["bits_per_weight"]:
            best[key] = row
    return best


def _compare(
    row: dict[str, Any],
    ref_model: Mapping[str, Any],
    rows: list[dict[str, Any]],
    tokens_of: Mapping[int, Any],
) -> None:
    candidates = [
        r
        for r in rows
        if r["model_label"] == ref_model["model_label"]
        and r["workload"] == row["workload"]
        and r["status"] == "ok"
    ]
    same_params = [r for r in candidates if all(r[k] == row[k] for k in PARAM_KEYS)]
    pool = same_params or candidates
    if not pool:
        return
    ref = pool[0]
    mine, theirs = tokens_of.get(row["run_id"]), tokens_of.get(ref["run_id"])
    if mine is not None and theirs is not None:
        prefix, share, n = agreement(mine, theirs)
        row["agree_prefix_tokens"], row["agree_share"], row["agree_n_tokens"] = prefix, round(share, 4), n
    if same_params:
        for metric, out in RATIOS:
            if row[metric] is not None and ref[metric]:
                row[out] = round(row[metric] / ref[metric], 4)


def attach_reference(rows: list[dict[str, Any]], tokens_of: Mapping[int, list[int] | None]) -> None:
    """Fill each row's reference label, agreement and ratios in place (``tokens_of``: run id -> output)."""
    best = _references(rows)
    for row in rows:
        ref_model = best.get((row["model_group"], row["workload"]))
        if ref_model is None:
            continue
        row["reference_label"] = ref_model["model_label"]
        _compare(row, ref_model, rows, tokens_of)
