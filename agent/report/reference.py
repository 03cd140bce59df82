"""The reference of each row and the row against it: token agreement and speed ratios.

The reference per (model group, workload) is the highest-precision variant (most bits per weight) that was
measured. Only a variant that produced output can be a reference: an F16 that ran out of memory is not one.
Speed ratios compare a row with the reference at the same parameters only; agreement falls back to any
reference config of the workload, since greedy output does not depend on them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from edgeprof.report.run_row import agreement

_BASE_PARAM_KEYS = ("ctx", "ngl", "threads", "n_batch", "n_ubatch", "flash_attn", "type_k", "type_v", "mmap")
# Same-config matching also needs llama.cpp's parameters in effect and the depth: depth 4096 is compared with
# depth 4096.
PARAM_KEYS = (
    *_BASE_PARAM_KEYS, "depth", "swa_full", "kv_unified", "offload_kqv", "op_offload", "poll", "n_seq_max",
)  # fmt: skip
RATIOS = (("tg_tps_median", "tg_ratio_vs_ref"), ("pp_tps_median", "pp_ratio_vs_ref"))


def quality_of(
    row: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]
) -> tuple[float | None, float | None]:
    """The variant's quality: its own row's, else a quality row of the same model label (same ngl first)."""
    if row.get("kld_mean") is not None:
        return row["kld_mean"], row.get("same_top_pct")
    same = [
        r
        for r in rows
        if r.get("kld_mean") is not None
        and r["model_label"] == row["model_label"]
        and r["model_group"] == row["model_group"]
    ]
    same.sort(key=lambda r: (r["ngl"] != row["ngl"], r["ctx"] != row["ctx"], r["run_id"]))
    if not same:
        return None, None
    return same[0]["kld_mean"], same[0].get("same_top_pct")


def is_speed_row(row: Mapping[str, Any]) -> bool:
    """A generation workload's row; a quality workload's own rows carry no speed to rank, and a soak's speed
    is a sustained one, not comparable with the steady reps'."""
    kind = row.get("_workload_kind")
    if kind is not None:
        return kind not in ("quality", "soak", "task")
    return row.get("kld_mean") is None or row.get("tg_tps_median") is not None


def _references(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """The variant with the most bits per weight, per (group, workload); none where two files share the most
    (identical tensors one metadata string apart): which would be the reference could not be defended."""
    best: dict[tuple[str, str], dict[str, Any]] = {}
    shared: set[tuple[str, str]] = set()
    for row in rows:
        key = (row["model_group"], row["workload"])
        if row["bits_per_weight"] is None or row["status"] != "ok":
            continue
        cur = best.get(key)
        if cur is None or row["bits_per_weight"] > cur["bits_per_weight"]:
            best[key] = row
            shared.discard(key)
        elif row["bits_per_weight"] == cur["bits_per_weight"] and row["model_label"] != cur["model_label"]:
            shared.add(key)
    return {key: row for key, row in best.items() if key not in shared}


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


# Below this the reference is itself a quantized file (Q8_0 is 8.5 bits per weight; F16 and BF16 are 16).
REFERENCE_MIN_BPW = 9.0
MEANING = "the reference may itself be dequantized; KLD then measures distance from that file"


def reference_warnings(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Per model group, the signs that its KLD figures measure the distance from a lossy file rather than
    from the original weights: a reference under ``REFERENCE_MIN_BPW`` bits per weight, or a variant with
    fewer bits per weight that comes out closer to the reference (by more than the larger of the two
    standard errors) than one with more — what a reference dequantized from a low-bit file gives."""
    by_group: dict[str, dict[str, Mapping[str, Any]]] = {}
    bpw_of: dict[tuple[str, str], float] = {}
    reference: dict[str, str] = {}
    for row in rows:
        key = (str(row["model_group"]), str(row["model_label"]))
        if row.get("bits_per_weight") is not None:
            bpw_of.setdefault(key, float(row["bits_per_weight"]))
        if row.get("kld_mean") is None or row.get("status") != "ok":
            continue
        by_group.setdefault(key[0], {}).setdefault(key[1], row)
        if row.get("quality_reference_label"):
            reference.setdefault(key[0], str(row["quality_reference_label"]))
    out: dict[str, list[str]] = {}
    for group, variants in by_group.items():
        ref = reference.get(group)
        found: list[str] = []
        ref_bpw = bpw_of.get((group, ref)) if ref is not None else None
        if ref_bpw is not None and ref_bpw < REFERENCE_MIN_BPW:
            found.append(
                f"the reference {ref} has {ref_bpw:.2f} bits per weight (under {REFERENCE_MIN_BPW:g}): it is "
                "itself quantized; KLD then measures distance from that file, not from the original weights"
            )
        ranked = sorted(
            ((bpw_of[(group, label)], row) for label, row in variants.items()
             if label != ref and (group, label) in bpw_of),
            key=lambda item: item[0],
        )  # fmt: skip
        for i, (low_bpw, low) in enumerate(ranked):
            for high_bpw, high in ranked[i + 1 :]:
                if low_bpw < high_bpw and _closer(low, high):
                    found.append(
                        f"{low['model_label']} ({low_bpw:.2f} bits per weight) has a lower KLD than "
                        f"{high['model_label']} ({high_bpw:.2f}): {low['kld_mean']:.4f} against "
                        f"{high['kld_mean']:.4f}; {MEANING}"
                    )
        if found:
            out[group] = found
    return out


def _closer(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether ``a``'s mean KLD is below ``b``'s by more than the larger standard error of the two."""
    noise = max(float(a.get("kld_se") or 0.0), float(b.get("kld_se") or 0.0))
    return float(a["kld_mean"]) < float(b["kld_mean"]) - noise


def file_notes(members: Sequence[Mapping[str, Any]]) -> list[str]:
    """What a file's own tensors say against its name: requantized, or mostly of other types."""
    out: list[str] = []
    for row in members:
        label = str(row["model_label"])
        if row.get("requantized_from") and not any(n.startswith(f"{label} was") for n in out):
            out.append(f"{label} was requantized from {row['requantized_from']}: precision lost twice")
        if row.get("tensor_mix_warning") and not any(n.startswith(f"{label} (") for n in out):
            quant = row.get("quant") or "?"
            out.append(f"{label} ({quant}): {row['tensor_mix_warning']} ({row['tensor_mix']})")
    return out


def same_file_notes(members: Sequence[Mapping[str, Any]]) -> list[str]:
    """Labels of one condition whose files have the same sha256: one file, whatever their speeds say."""
    labels: dict[str, list[str]] = {}
    for row in members:
        sha, label = row.get("model_sha256"), str(row["model_label"])
        if sha and label not in labels.setdefault(str(sha), []):
            labels[str(sha)].append(label)
    return [
        f"{' and '.join(names)} are one file (sha256 {sha[:12]}…): "
        "any difference between them is the machine's"
        for sha, names in labels.items()
        if len(names) > 1
    ]


def threads_notes(members: Sequence[Mapping[str, Any]]) -> list[str]:
    """Rows ``contended`` while their threads took every core, where the condition tried no fewer: llama.cpp's
    threads spin-wait, so on a shared machine fewer threads can be faster (5.1 t/s at 2 threads against 27.9
    at 1 on a shared 2-core machine); the line offers the comparison to run."""
    out: list[str] = []
    threads = {r.get("threads") for r in members}
    for row in members:
        cores, n = row.get("_cpu_count"), row.get("threads")
        if row.get("interference_verdict") != "contended" or not cores or not n or n < cores:
            continue
        fewer = sorted({max(1, cores // 2), cores - 1} - {0, n} - threads)
        if fewer:
            axis = ", ".join(str(t) for t in [*fewer, n])
            out.append(
                f"{row['model_label']} ran contended at threads {n} = all {cores} cores: llama.cpp's threads "
                f"spin-wait, so fewer threads may be faster here; compare with [matrix] threads = [{axis}]"
            )
            break
    return out
