"""Report pieces for workloads as users run them: tokens out and EOS beside n_predict, the parameters in
effect, depth curves.

A row that stopped at EOS after 20 of 64 tokens must not read like the others: tokens out (median and min over
the steady reps), how many reps ended at EOS, and whether EOS was ignored are shown beside n_predict. Depth
rows (llama-bench's ``-d``) are summarised as tg t/s and TTFT against depth, per model and workload.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from edgeprof.stats import Summary, median


def workload_fields(run: Any, steady: Sequence[Any]) -> dict[str, Any]:
    """The workload report fields of one run (NULL where a run recorded before them did not store them)."""
    effective = json.loads(run.effective_json) if run.effective_json else {}
    outs = [m.tokens_out for m in steady if m.tokens_out is not None]
    reasons: dict[str, int] = {}
    for m in steady:
        if m.finish_reason:
            reasons[m.finish_reason] = reasons.get(m.finish_reason, 0) + 1
    first = next((m for m in steady if m.prompt_n_tokens is not None), None)
    used = [m.kv_used_cells for m in steady if m.kv_used_cells is not None]
    return {
        "depth": run.depth,
        "tokens_out_median": Summary.of(outs).median,
        "tokens_out_min": min(outs) if outs else None,
        "eos_count": reasons.get("eos", 0),
        "finish_reasons": ",".join(f"{k}:{v}" for k, v in sorted(reasons.items())) or None,
        "ignore_eos": run.ignore_eos,
        "prompt_n_tokens": first.prompt_n_tokens if first else None,
        "prompt_sha256": first.prompt_sha256 if first else None,
        "parse_special": first.parse_special if first else None,
        "kv_used_cells": max(used) if used else None,
        "kv_cache_mib": run.kv_cache_mib,
        "n_ctx_effective": effective.get("n_ctx"),
        "swa_full": effective.get("swa_full", run.swa_full),
        "kv_unified": effective.get("kv_unified", run.kv_unified),
        "offload_kqv": effective.get("offload_kqv", run.offload_kqv),
        "op_offload": effective.get("op_offload", run.op_offload),
        "poll": effective.get("poll", run.poll),
        "n_seq_max": effective.get("n_seq_max", run.n_seq_max),
    }


def output_until_eos(tokens: list[int], first_eos_index: int | None) -> list[int]:
    """The output up to and including its first EOS: what follows an ignored EOS is not an answer, so quality
    never compares it (a reference that did not stop there is compared over its longer output)."""
    if first_eos_index is None:
        return tokens
    return tokens[: first_eos_index + 1]


def depth_curves(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """tg t/s and TTFT against depth: one curve per (model, workload, ctx, ngl, threads) with ≥ 2 depths."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("depth") is None or row.get("status") != "ok":
            continue
        key = (row["model_label"], row.get("quant"), row["workload"], row["ctx"], row["ngl"], row["threads"])
        groups.setdefault(key, []).append(row)
    curves = []
    for key, members in groups.items():
        by_depth = sorted(members, key=lambda r: r["depth"])
        if len({r["depth"] for r in by_depth}) < 2:
            continue
        curves.append(
            {
                "model_label": key[0],
                "quant": key[1],
                "workload": key[2],
                "ctx": key[3],
                "points": [
                    {
                        "depth": r["depth"],
                        "tg_tps_median": r.get("tg_tps_median"),
                        "tg_tps_min": r.get("tg_tps_min"),
                        "tg_tps_max": r.get("tg_tps_max"),
                        "ttft_ms_p50": r.get("ttft_ms_p50"),
                        "n": r.get("tg_tps_n"),
                    }
                    for r in by_depth
                ],
            }
        )
    return curves


def render_depth_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Text lines: for each curve, tg t/s (median [min–max]) and TTFT p50 at each depth, and the change."""
    lines: list[str] = []
    for curve in depth_curves(rows):
        pts = curve["points"]
        lines.append(f"{curve['model_label']} ({curve['quant']}) wl={curve['workload']} ctx={curve['ctx']}:")
        for p in pts:
            tg = (
                "—"
                if p["tg_tps_median"] is None
                else (f"{p['tg_tps_median']:.1f} [{p['tg_tps_min']:.1f}–{p['tg_tps_max']:.1f}] n={p['n']}")
            )
            ttft = "—" if p["ttft_ms_p50"] is None else f"{p['ttft_ms_p50']:.1f}"
            lines.append(f"  depth {p['depth']:>6}: tg t/s {tg}   TTFT p50 {ttft} ms")
        first, last = pts[0]["tg_tps_median"], pts[-1]["tg_tps_median"]
        if first and last:
            lines.append(f"  tg at depth {pts[-1]['depth']} / depth {pts[0]['depth']}: {last / first:.2f}")
    return lines


def depth_medians(rows: Sequence[Mapping[str, Any]]) -> dict[int, float | None]:
    """Median tg t/s per depth over all ok rows (for a one-line summary)."""
    by: dict[int, list[float]] = {}
    for r in rows:
        if r.get("depth") is not None and r.get("tg_tps_median") is not None:
            by.setdefault(int(r["depth"]), []).append(float(r["tg_tps_median"]))
    return {d: median(v) for d, v in sorted(by.items())}
