"""Verdicts on stored runs: gather a run's inputs from the database, judge it, store the ``Verdict`` rows.

The judging itself is pure (``throttle``, ``stability``, ``interference``); this module is the one that talks
to the database: it loads a run's samples, phases and measurements, the roles and trip points stored with its
sweep and the reference clocks of comparable runs, and replaces the run's verdict rows with new ones.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from edgeprof.collectors import MetricRole
from edgeprof.storage.models import CollectorStatus, Measurement, Phase, Run, SoakWindow, Verdict
from edgeprof.storage.samples import max_value, read_samples, sample_metrics
from edgeprof.telemetry import Series
from edgeprof.verdicts.interference import Rep, interference_verdict
from edgeprof.verdicts.result import VerdictResult
from edgeprof.verdicts.serving import level_inputs, level_interference, level_stability
from edgeprof.verdicts.soak import SoakThresholds, judge_soak
from edgeprof.verdicts.soak_telemetry import WindowSpeed
from edgeprof.verdicts.stability import StabilityThresholds, stability
from edgeprof.verdicts.throttle import (
    RepSample,
    ThrottleInputs,
    ThrottleThresholds,
    clock_domains,
    is_cap_domain,
    throttle_verdict,
)

VERDICT_KINDS = ("throttle", "stability", "interference")
SOAK_KIND = "soak"  # a soak's own verdict (agent/verdicts/soak.py), beside the three every run gets

# Phases in which the model is working: the window "under load".
LOAD_PHASES = ("load", "prefill", "decode")

TripPoints = Mapping[str, Sequence[tuple[str, float]]]


def gpu_in_use(run: Run) -> bool:
    """Whether a run's llama.cpp offloaded layers to a GPU: it asked for some (-ngl > 0, the default "all")
    and its build can offload (a CPU-only build ignores -ngl; the worker records which it was)."""
    if run.n_gpu_layers == 0:
        return False
    try:
        effective = json.loads(run.effective_json) if run.effective_json else {}
    except ValueError:
        effective = {}
    return (effective or {}).get("gpu_offload_supported") is not False


def trip_points_from(collectors: Iterable[Any]) -> dict[str, list[tuple[str, float]]]:
    """Trip points of the ``sysfs_thermal`` collector among ``collectors`` ({} if none or unreadable)."""
    for collector in collectors:
        if getattr(collector, "name", None) == "sysfs_thermal" and hasattr(collector, "trip_points"):
            try:
                return dict(collector.trip_points())
            except Exception:  # noqa: BLE001 - no trip points is a weaker verdict, never a failed run
                return {}
    return {}


# -- what the sweep stored about its collectors -------------------------------------------------------------
def _status_entries(
    session: Session, sweep_id: int, collector: str | None = None
) -> Iterable[dict[str, Any]]:
    """The metric entries of the sweep's collector status rows (of one ``collector`` when given)."""
    query = select(CollectorStatus.metrics_json).where(CollectorStatus.sweep_id == sweep_id)
    if collector is not None:
        query = query.where(CollectorStatus.name == collector)
    for raw in session.scalars(query):
        try:
            entries = json.loads(raw)
        except (TypeError, ValueError):
            continue
        yield from (e for e in (entries if isinstance(entries, list) else []) if isinstance(e, dict))


def stored_roles(session: Session, sweep_id: int) -> dict[str, MetricRole]:
    """Metric roles as the collectors declared them when the sweep ran (stored with their status), so a
    sweep measured with a collector this installation lacks is still judged by what its metrics were."""
    out: dict[str, MetricRole] = {}
    for entry in _status_entries(session, sweep_id):
        role = entry.get("role")
        parsed = MetricRole.from_json(role) if isinstance(role, dict) else None
        if parsed is not None:
            out.setdefault(str(entry.get("name")), parsed)
    return out


def stored_trip_points(session: Session, sweep_id: int) -> dict[str, list[tuple[str, float]]]:
    """Trip points stored with the sweep's collector status: a later ``analyse`` needs no live device."""
    out: dict[str, list[tuple[str, float]]] = {}
    for entry in _status_entries(session, sweep_id, "sysfs_thermal"):
        trips = entry.get("trip_points")
        if trips:
            out[str(entry["name"])] = [(str(t), float(c)) for t, c in trips]
    return out


def run_roles(session: Session, sweep_id: int, sources: Mapping[str, str]) -> dict[str, MetricRole]:
    """metric -> role for a stored run's metrics (``sources``: metric -> the collector that reported it).

    The roles stored with the sweep come first. Only a metric the sweep stored no role for (a sweep recorded
    before roles were stored, a tegrastats log imported later) is classified by the collector classes, by
    the rule the live sweep uses (``collectors.roles_for``): the registry that imports every collector
    driver is loaded for such sweeps only.
    """
    declared = stored_roles(session, sweep_id)
    out = {m: declared[m] for m in sources if m in declared}
    missing = [m for m in sources if m not in declared]
    if missing:
        from edgeprof.collectors import roles_for

        out.update(roles_for(missing, sources))
    return out


# -- a run's telemetry -----------------------------------------------------------------------------------
def _read_series(
    session: Session, run_ids: Sequence[int], metrics: Sequence[str] | None = None
) -> tuple[dict[int, dict[str, Series]], dict[int, dict[str, str]]]:
    """(run id -> metric -> readings, run id -> metric -> the collector they came from)."""
    out: dict[int, dict[str, Series]] = {}
    owners: dict[int, dict[str, str]] = {}
    for r in read_samples(session, None, metrics=metrics, run_ids=run_ids):
        if r.run_id is None:
            continue
        # Two collectors may report one metric (tegrastats and jtop both give temp.* on a Jetson): keep
        # the first source's readings only, as Telemetry does, so two samplers are never interleaved.
        if owners.setdefault(r.run_id, {}).setdefault(r.metric, r.source) != r.source:
            continue
        out.setdefault(r.run_id, {}).setdefault(r.metric, []).append((r.t_mono, r.value))
    return out, owners


def series_of(
    session: Session, run_ids: Sequence[int], metrics: Sequence[str] | None = None
) -> dict[int, dict[str, Series]]:
    """run id -> metric -> its readings, one collector's per metric."""
    return _read_series(session, run_ids, metrics)[0]


def _load_span(phases: Sequence[Phase]) -> tuple[float, float] | None:
    working = [p for p in phases if p.name in LOAD_PHASES]
    if not working:
        return None
    return min(p.t_start_mono for p in working), max(p.t_end_mono for p in working)


def reference_clocks(session: Session, run: Run, roles: Mapping[str, MetricRole]) -> dict[str, float]:
    """Reference maxima per clock domain for ``run``, from the sweep (computed by SQL aggregates: cheap even
    when the sweep holds millions of samples).

    - ``cpu``/``gpu``: the highest reading under load (load, prefill and decode phases) in runs of the sweep
      with the same thread count and GPU offload (the same load shape), this run included. Not the
      hardware maximum: an x86 CPU's ``cpuinfo_max_freq`` is a single-core turbo that an all-core load never
      reaches, and a Jetson GPU's DVFS follows utilisation; comparing with them would call every run
      throttled. (The pointwise max over policies that ``throttle_verdict`` uses has the same maximum as
      the readings themselves, so a plain MAX is the right aggregate.)
    - ``cpu_cap.policyN``: the highest cap (scaling_max_freq) seen anywhere in the sweep, so a power mode
      that caps clocks for the whole sweep is not a "drop", but a cap lowered mid-sweep is.
    """
    domains = clock_domains(sorted(sample_metrics(session, run.id)), True, roles)
    if not domains:
        return {}
    sweep_runs = select(Run.id).where(Run.sweep_id == run.sweep_id)
    same_shape = sweep_runs.where(Run.n_threads == run.n_threads, Run.n_gpu_layers == run.n_gpu_layers)
    spans_q = (
        select(Phase.run_id, func.min(Phase.t_start_mono), func.max(Phase.t_end_mono))
        .where(Phase.run_id.in_(same_shape), Phase.name.in_(LOAD_PHASES))
        .group_by(Phase.run_id)
    )
    spans = {int(r): (float(a), float(b)) for r, a, b in session.execute(spans_q)}
    all_runs = list(session.scalars(sweep_runs))
    refs: dict[str, float] = {}
    for name, metrics in domains.items():
        # storage.samples.max_value: numpy over the blocks (cached per block), no rows built
        if is_cap_domain(name):
            top = max_value(session, all_runs, metrics)
        else:
            top = max_value(session, list(spans), metrics, spans)
        if top is not None and math.isfinite(top) and top > 0:
            refs[name] = float(top)
    return refs


def _steady(session: Session, run_id: int) -> list[Measurement]:
    query = select(Measurement).where(Measurement.run_id == run_id, Measurement.kind == "steady")
    return list(session.scalars(query))


def inputs_for_run(session: Session, run: Run, trip_points: TripPoints | None = None) -> ThrottleInputs:
    """Gather a run's throttle inputs from the database."""
    phases = list(session.scalars(select(Phase).where(Phase.run_id == run.id)))
    reps = [
        RepSample(m.rep, m.t_start_mono, m.t_end_mono, m.tg_tps)
        for m in _steady(session, run.id)
        if m.t_start_mono is not None and m.t_end_mono is not None
    ]
    span = _load_span(phases)
    if span is None and reps:
        span = (min(r.t_start for r in reps), max(r.t_end for r in reps))
    series, owners = _read_series(session, [run.id])
    roles = run_roles(session, run.sweep_id, owners.get(run.id, {}))
    return ThrottleInputs(
        reps=reps,
        series=series.get(run.id, {}),
        load_start=span[0] if span else None,
        load_end=span[1] if span else None,
        trip_points=dict(trip_points or {}),
        max_freq_mhz=reference_clocks(session, run, roles),
        gpu_in_use=gpu_in_use(run),
        roles=roles,
    )


# -- judging and storing -----------------------------------------------------------------------------------
# The soak judgement's per-window telemetry figures, stored on the window rows. Energy, mean power and J per
# token are not among them: the soak executor sets those from the power source the sweep's telemetry chose
# for every run's energy, so a soak's figures add up with the rest of the report.
_WINDOW_FIGURES = ("temp_max_c", "cpu_mhz", "cpu_cap_mhz", "gpu_mhz", "gpu_cap_mhz", "emc_mhz", "other_cores")


def _soak_thresholds(run: Run) -> SoakThresholds:
    """The verdict's thresholds with the steady-state slope and span the plan stated for this soak."""
    try:
        soak = json.loads(run.workload_json or "{}").get("soak") or {}
    except (ValueError, AttributeError):
        soak = {}
    th = SoakThresholds()
    if soak.get("steady_c_per_min") is not None:
        th = replace(th, steady_c_per_min=float(soak["steady_c_per_min"]))
    if soak.get("steady_span_s") is not None:
        th = replace(th, steady_span_s=float(soak["steady_span_s"]))
    return th


def _judge_soak(session: Session, run: Run, inputs: ThrottleInputs) -> VerdictResult | None:
    """A soak run's verdict from its stored windows and the run's series (None for any other run); each
    window row gets its telemetry figures. The soak's windows are its steady state: the stability and
    interference of five reps do not apply, the soak verdict says both window by window."""
    rows = list(
        session.scalars(select(SoakWindow).where(SoakWindow.run_id == run.id).order_by(SoakWindow.idx))
    )
    if not rows:
        return None
    speeds = [
        WindowSpeed(w.idx, w.t_start_mono, w.t_end_mono, w.tokens, w.decode_s, w.tg_tps, w.pp_tps)
        for w in rows
    ]
    judgement = judge_soak(
        speeds, inputs.series, inputs.roles, _soak_thresholds(run), gpu_in_use=inputs.gpu_in_use
    )
    by_idx = {w.idx: w for w in rows}
    for window in judgement.windows:
        row = by_idx.get(window.index)
        if row is None:
            continue
        for name in _WINDOW_FIGURES:
            setattr(row, name, getattr(window, name))
        row.temps_json = json.dumps(window.temps_c) if window.temps_c else None
        row.throttle_json = json.dumps(window.throttle_signals) if window.throttle_signals else None
    return VerdictResult(judgement.value, judgement.evidence)


# A verdict that raised: stored as this value with its reason, never a silent gap (a report shows it, the
# sweep warns once; the worst-first orders in ``summary`` rank it before inconclusive).
ERROR_VALUE = "error"


def error_result(kind: str, exc: BaseException) -> VerdictResult:
    """The stored form of a verdict that raised: ``error``, with what raised and its message."""
    return VerdictResult(
        ERROR_VALUE,
        {"reasons": [f"the {kind} verdict failed: {type(exc).__name__}: {exc}"], "error": type(exc).__name__},
    )


def _guarded(kind: str, judge: Callable[[], VerdictResult]) -> VerdictResult:
    """One verdict, judged: a bug in one costs that verdict (stored as ``error``), never its siblings."""
    try:
        return judge()
    except Exception as exc:  # noqa: BLE001 - stored as an error verdict with its reason, and warned
        return error_result(kind, exc)


def _steady_stability(
    session: Session, run: Run, steady: Sequence[RepSample], thresholds: StabilityThresholds | None
) -> VerdictResult:
    """The spread of the steady reps' tg_tps, with their pp_tps spread beside it."""
    stable = stability([r.tg_tps for r in steady], thresholds)
    stable.evidence["metric"] = "tg_tps"
    pp_check = stability([m.pp_tps for m in _steady(session, run.id)], thresholds)
    stable.evidence["pp_tps"] = {"value": pp_check.value} | {
        k: pp_check.evidence.get(k) for k in ("n", "cv", "max_over_median", "min_over_median")
    }
    return stable


def _judge(
    session: Session,
    run: Run,
    inputs: ThrottleInputs,
    thresholds: ThrottleThresholds | None,
    stability_thresholds: StabilityThresholds | None,
) -> dict[str, VerdictResult]:
    """kind -> verdict for one run whose inputs are gathered; each verdict guarded on its own."""
    throttle = _guarded("throttle", lambda: throttle_verdict(inputs, thresholds))
    try:
        soak: VerdictResult | None = _judge_soak(session, run, inputs)
    except Exception as exc:  # noqa: BLE001 - as _guarded: stored as an error verdict
        soak = error_result(SOAK_KIND, exc)
    level = level_inputs(session, run)
    if level is not None:  # a serving level: its requests and its window play the steady reps' part
        return {
            "throttle": throttle,
            "stability": _guarded("stability", lambda: level_stability(level, stability_thresholds)),
            "interference": _guarded(
                "interference", lambda: level_interference(level, inputs.series, inputs.roles)
            ),
            **({SOAK_KIND: soak} if soak is not None else {}),  # a soak held on a server
        }
    if soak is not None:
        return {"throttle": throttle, SOAK_KIND: soak}
    steady = sorted(inputs.reps, key=lambda r: r.rep)
    reps = [Rep(r.rep, r.t_start, r.t_end) for r in steady]
    return {
        "throttle": throttle,
        "stability": _guarded(
            "stability", lambda: _steady_stability(session, run, steady, stability_thresholds)
        ),
        "interference": _guarded(
            "interference",
            lambda: VerdictResult(*interference_verdict(reps, inputs.series, inputs.roles, run.n_threads)),
        ),
    }


def analyse_run(
    session: Session,
    run_id: int,
    trip_points: TripPoints | None = None,
    thresholds: ThrottleThresholds | None = None,
    stability_thresholds: StabilityThresholds | None = None,
    *,
    commit: bool = True,
) -> list[Verdict]:
    """Judge a stored run (throttle from its telemetry, stability of its steady tg_tps), replace its
    verdict rows with the new ones and return them (committed unless ``commit`` is False). A verdict that
    raises is stored as ``error`` with its reason (``ERROR_VALUE``); where gathering the run's inputs
    raises, every verdict is."""
    run = session.get(Run, run_id)
    if run is None:
        raise ValueError(f"no run with id {run_id}")
    try:
        if trip_points is None:
            trip_points = stored_trip_points(session, run.sweep_id)
        inputs = inputs_for_run(session, run, trip_points)
    except Exception as exc:  # noqa: BLE001 - every verdict of the run is an error, said with its reason
        results = {kind: error_result(kind, exc) for kind in VERDICT_KINDS}
    else:
        results = _judge(session, run, inputs, thresholds, stability_thresholds)
    return store_verdicts(session, run_id, results, commit=commit)


def store_verdicts(
    session: Session, run_id: int, results: Mapping[str, VerdictResult], *, commit: bool = True
) -> list[Verdict]:
    """Replace a run's verdict rows (every kind a run can have) with ``results``."""
    kinds = (*VERDICT_KINDS, SOAK_KIND)
    session.execute(delete(Verdict).where(Verdict.run_id == run_id, Verdict.kind.in_(kinds)))
    rows = [
        Verdict(
            run_id=run_id,
            kind=kind,
            value=result.value,
            evidence_json=json.dumps(result.evidence, allow_nan=False, default=str),
        )
        for kind, result in results.items()
    ]
    session.add_all(rows)
    if commit:
        session.commit()
    else:
        session.flush()
    return rows


def analyse_sweep(
    session: Session,
    sweep_id: int,
    trip_points: TripPoints | None = None,
    thresholds: ThrottleThresholds | None = None,
) -> dict[int, list[Verdict]]:
    """``analyse_run`` for every run of a sweep (for sweeps recorded before verdicts existed)."""
    out: dict[int, list[Verdict]] = {}
    for run_id in session.scalars(select(Run.id).where(Run.sweep_id == sweep_id).order_by(Run.id)):
        out[run_id] = analyse_run(session, run_id, trip_points, thresholds, commit=False)
    session.commit()
    return out
