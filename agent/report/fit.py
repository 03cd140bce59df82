"""Report fields that answer "will it fit, and how close to the memory bandwidth does it run": predicted vs
measured memory, achieved bandwidth, and the recommendation.

- ``mem_predicted_mb`` / ``mem_available_mb``: what agent/gguf/memory.py predicted before the config ran and
  what MemAvailable said then (a ``skipped_memory`` row has both and nothing measured);
- ``bw_gbps``: median over the steady reps of (bytes read per decode token × tg_tps)
  (agent/gguf/bandwidth.py);
  ``bw_pct``: its share of the sweep's measured probe figure, ``bw_datasheet_pct`` of the board's datasheet
  figure (Jetson). Both NULL where the figure they divide by is missing, and ``bw_pct`` also where layers
  ran on a discrete GPU (they read VRAM, which the host probe did not measure);
- ``recommendation``: "best" / "runner_up" for the rows agent/report/recommend.py picked, NULL otherwise;
  ``recommendation_decision`` what the row's condition came to ("faster", "tie", "only", "no_decision",
  "none"), ``recommendation_excluded`` why the row did not compete or could not decide, and
  ``tg_ratio_vs_best`` (with ``_ci_low`` / ``_ci_high``) its steady tg median against the recommended
  variant's, with the rank interval the decision used;
- ``quality_warning``: why the group's KLD figures may measure distance from a lossy reference.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from edgeprof.collectors.flags import throttle_names
from edgeprof.collectors.registry import roles_for
from edgeprof.collectors.roles import MetricRole
from edgeprof.gguf.quantizer import describe_shares
from edgeprof.plan import Decide, QualityBudget, budget_from_plan_text, decide_from_plan_text
from edgeprof.report.recommend import (
    Recommendation,
    mark_rows,
    recommend,
    render_recommendations,
)
from edgeprof.report.reference import reference_warnings
from edgeprof.report.speed_ratio import reps_by_block
from edgeprof.stats import Summary
from edgeprof.storage.models import Measurement, Run, Sweep
from edgeprof.storage.samples import read_samples


def _pct(value: float | None, of: float | None) -> float | None:
    if value is None or not of:
        return None
    return round(100.0 * value / of, 1)


def attach_fit(session: Session, rows: list[dict[str, Any]]) -> list[Recommendation]:
    """Fill the fields above on every row; returns the recommendations (also kept for the renderers)."""
    sweeps: dict[int, Sweep | None] = {}
    for row in rows:
        run = session.get(Run, int(row["run_id"]))
        sid = int(row["sweep_id"])
        if sid not in sweeps:
            sweeps[sid] = session.get(Sweep, sid)
        sweep = sweeps[sid]
        steady = [m for m in run.measurements if m.kind == "steady"] if run is not None else []
        bw = Summary.of(m.bw_gbps for m in steady).median
        probe = sweep.bw_probe_gbps if sweep is not None else None
        sheet = sweep.bw_datasheet_gbps if sweep is not None else None
        detail = json.loads(run.mem_prediction_json) if run is not None and run.mem_prediction_json else {}
        on_dgpu = bool(row["ngl"] > 0 and detail.get("gpu_mb") and not detail.get("unified"))
        # for the recommendation, not the schema: the reps its speed ratios are taken over, and whether the
        # row is a quality workload's own (no speed to rank)
        row["_tg_tps_reps"] = [m.tg_tps for m in steady if m.tg_tps is not None]
        # ... and the blocks they ran in, paired with the rivals' blocks of the same round (interleaved)
        loads = [(ph.t_start_mono, ph.rep or 0) for ph in run.phases if ph.name == "load"] if run else []
        row["_tg_tps_blocks"] = reps_by_block(
            loads, [(m.t_start_mono, m.tg_tps) for m in steady if m.tg_tps is not None and m.tg_tps > 0]
        )
        # how its group was settled, the device state each block started in, why a block ran throttled
        row.update(rep_evidence(session, run, steady, loads) if run is not None else {})
        row["_cpu_count"] = sweep.device.cpu_count if sweep is not None and sweep.device is not None else None
        row["_workload_kind"] = (
            json.loads(run.workload_json).get("kind", "generation") if run is not None else None
        )
        # the share of the probe's slowest and fastest pass: the bandwidth share with the probe's own spread
        row["_bw_pct_range"] = None if on_dgpu else share_range(bw, sweep)
        row.update(
            {
                "mem_predicted_mb": run.mem_predicted_mb if run is not None else None,
                "mem_available_mb": run.mem_available_mb if run is not None else None,
                "bw_gbps": round(bw, 3) if bw is not None else None,
                "bw_pct": None if on_dgpu else _pct(bw, probe),
                "bw_probe_gbps": probe,
                "bw_datasheet_gbps": sheet,
                "bw_datasheet_pct": None if on_dgpu else _pct(bw, sheet),
                **mix_fields(detail.get("tensor_mix")),
            }
        )
    budget, decide = QualityBudget(), Decide()
    if len(sweeps) == 1:
        only = next(iter(sweeps.values()))
        budget = budget_from_plan_text(only.plan_text if only is not None else None)
        decide = decide_from_plan_text(only.plan_text if only is not None else None)
    recs = recommend(rows, budget, decide)
    mark_rows(rows, recs)
    warnings = reference_warnings(rows)
    for row in rows:
        row["quality_warning"] = "; ".join(warnings.get(str(row["model_group"]), [])) or None
    note = bandwidth_note(rows, session)
    lines = render_recommendations(recs, warnings)
    for row in rows:
        # for the renderers, not the schema; text only (a Recommendation holds its rows: a cycle)
        row["_recommendation_lines"] = lines
        row["_bw_note"] = note
    return recs


def mix_fields(mix: Any) -> dict[str, Any]:
    """The model file's tensor-type mix as stored with its memory prediction (agent/gguf/quantizer.py)."""
    if not isinstance(mix, dict):
        return {"tensor_mix": None, "tensor_mix_warning": None, "requantized_from": None}
    shares = mix.get("shares") or {}
    return {
        "tensor_mix": describe_shares(shares) if shares else None,
        "tensor_mix_warning": mix.get("warning"),
        "requantized_from": mix.get("requantized_from"),
    }


def recommendation_lines(rows: list[dict[str, Any]]) -> list[str]:
    return list(rows[0].get("_recommendation_lines") or []) if rows else []


def share_range(bw: float | None, sweep: Sweep | None) -> tuple[float, float] | None:
    """``bw`` as a share (%) of the probe's fastest and of its slowest pass; None without either."""
    if bw is None or sweep is None or not sweep.bw_probe_json:
        return None
    stored = json.loads(sweep.bw_probe_json)
    fastest, slowest = stored.get("pass_max_gbps"), stored.get("pass_min_gbps")
    if not fastest or not slowest:
        return None
    return round(100.0 * bw / fastest, 1), round(100.0 * bw / slowest, 1)


def probe_spread(stored: dict[str, Any]) -> str:
    """The probe's own spread over its passes and what it makes of a share: "passes 5.6 / 18.3 / 27.3 GB/s
    min/median/max (a share of it can be off by as much)"; "" for a probe stored before it was kept."""
    lo, mid, hi = (stored.get(k) for k in ("pass_min_gbps", "pass_median_gbps", "pass_max_gbps"))
    if lo is None or mid is None or hi is None:
        return ""
    return (
        f"the probe's {stored.get('passes', '?')} passes read {lo:.1f} / {mid:.1f} / {hi:.1f} GB/s "
        f"min/median/max, so a share of it is good to about {100 * (hi - lo) / hi:.0f} %"
    )


def bandwidth_note(rows: list[dict[str, Any]], session: Session | None = None) -> str | None:
    """One line: the sweep's probe figure and method, and the datasheet figure with its source."""
    if not rows:
        return None
    probe = rows[0].get("bw_probe_gbps")
    sheet = rows[0].get("bw_datasheet_gbps")
    parts = []
    if probe is not None:
        parts.append(f"BW % = achieved / {probe:.1f} GB/s measured by this sweep's numpy probe")
    if sheet is not None:
        parts.append(f"datasheet {sheet:.1f} GB/s")
    if session is not None:
        sweep = session.get(Sweep, int(rows[0]["sweep_id"]))
        if sweep is not None and sweep.bw_probe_json:
            stored = json.loads(sweep.bw_probe_json)
            parts.append(probe_spread(stored))
            parts.append(str(stored.get("method", "")))
        if sweep is not None and sweep.bw_datasheet_source:
            parts.append(f"source: {sweep.bw_datasheet_source}")
    return "; ".join(p for p in parts if p) or None


# nvbench sets aside the samples taken below this share of the clock's maximum; a rep that starts with its
# clock capped below it ran on another machine than its rivals.
CAP_SHARE_MIN = 0.75


def throttle_reasons(
    readings: Sequence[tuple[float, str, float]],
    roles: Mapping[str, MetricRole],
    t_start: float,
    t_end: float,
) -> list[str]:
    """Why a rep (``t_start``–``t_end``, monotonic) ran throttled, from the telemetry's readings (time,
    metric, value) by their roles: throttle flags set at its start or during it, a throttle counter that
    moved during it, a clock cap under ``CAP_SHARE_MIN`` of its maximum at its start."""
    last: dict[str, float] = {}
    before: dict[str, float] = {}
    out: list[str] = []
    for t, metric, value in readings:
        if t > t_end:
            break
        role = roles.get(metric)
        if role is None:
            continue
        if t <= t_start:
            before[metric] = value
        last[metric] = value
        # only the bits that hold the clock down now, decoded by the word's own source (a Pi's sticky
        # "since boot" bits or its under-voltage note alone are not a throttled rep)
        if role.role == "throttle_flags" and t >= t_start - 1.0 and throttle_names(role, value):
            word = f"throttle flags {metric} 0x{int(value):x} ({', '.join(throttle_names(role, value))})"
            out += [] if word in out else [word]
    for metric, value in last.items():
        role = roles[metric]
        if role.role == "throttle_counter" and metric in before and value > before[metric]:
            out.append(f"{metric} +{value - before[metric]:g} throttle events")
        if role.role == "clock_cap" and role.clock_max and metric in before:
            top = before.get(role.clock_max)
            if top and before[metric] < CAP_SHARE_MIN * top:
                out.append(f"clock cap {before[metric]:.0f} of {top:.0f} MHz")
    return out


def block_throttle(
    session: Session, run_id: int, loads: Sequence[tuple[float, int]], reps: Sequence[tuple[float, float]]
) -> dict[int, list[str]]:
    """Block id -> why its reps (start, end) ran throttled, from the run's stored telemetry."""
    found = read_samples(session, run_ids=[run_id], with_nulls=False)
    readings = [(r.t_mono, r.metric, float(r.value)) for r in found if r.value is not None]
    roles = roles_for({r.metric for r in found}, {r.metric: r.source for r in found})
    wanted = {m: role for m, role in roles.items()
              if role.role in ("throttle_flags", "throttle_counter", "clock_cap", "clock_limit")}  # fmt: skip
    out: dict[int, list[str]] = {}
    if not wanted:
        return out
    ordered = sorted(loads)
    readings = [r for r in readings if r[1] in wanted]
    for t_start, t_end in reps:
        block = max((b for t, b in ordered if t <= t_start), default=0)
        why = throttle_reasons(readings, wanted, t_start, t_end)
        if why:
            out.setdefault(block, []).extend(w for w in why if w not in out.get(block, []))
    return out


def rep_evidence(
    session: Session, run: Run, steady: Sequence[Measurement], loads: Sequence[tuple[float, int]]
) -> dict[str, Any]:
    """A report row's private fields for the recommendation: how its group was settled (``_decision``), the
    device state each block started in (``_block_states``) and why a block ran throttled (``_block_flags``):
    it compares only reps of one state (``set_aside``)."""
    timed = [
        (t0, t1) for m in steady if (t0 := m.t_start_mono) is not None and (t1 := m.t_end_mono) is not None
    ]
    return {
        "_decision": json.loads(run.decision_json) if run.decision_json else None,
        "_block_states": json.loads(run.block_states_json) if run.block_states_json else None,
        "_block_flags": block_throttle(session, run.id, loads, timed),
    }
