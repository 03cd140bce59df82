"""Interference verdict: did other work compete for the CPU while the steady repetitions ran?

On a shared box (other users, a camera pipeline on a Jetson, a VM's noisy neighbour) tokens/s swing by tens of
percent and the stability verdict says ``unstable`` without saying why. For each steady rep this module
measures, from the ``proc_stat`` collector's counters (``collectors/procstat.py``, read by role):

- ``other_cores``: CPU time of every process other than the llama.cpp child and edgeprof itself, per second
  of the rep (all CPUs' busy time minus the child's and our own utime + stime) -- 1.0 is one core's worth;
- ``steal_fraction``: the hypervisor's steal time as a share of the machine's CPU capacity;
- ``runq_excess``: the median number of runnable tasks that are neither the benchmark child's threads nor
  edgeprof's (``procs_running`` less both, counted by the collector at each reading), less the CPUs the
  benchmark's threads leave free (a task running there waits for nobody's CPU); for sweeps recorded
  before that count existed, ``procs_running`` beyond the child's compute threads and the sampler. Judged
  only over a rep with at least ``min_runq_readings`` readings at least ``runq_edge_s`` from its start and
  end: one instantaneous count is a coin toss, and one taken at a rep's edge catches edgeprof's own
  hand-over.

A rep is ``contended`` when any of them passes its threshold; the run is ``contended`` when any steady rep
was, ``quiet`` when every judged rep was quiet, ``inconclusive`` when none could be judged (no counters).
A CPU-time figure is judged only over readings far enough apart for /proc's 10-ms ticks; when no rep is
that long, the steady window as a whole is judged instead. Pure: plain series in, a verdict with its
evidence out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from edgeprof.collectors import MetricRole
from edgeprof.stats import median
from edgeprof.telemetry import SeriesLike
from edgeprof.verdicts.result import rounded
from edgeprof.verdicts.series import Point, points


@dataclass(frozen=True)
class InterferenceThresholds:
    """When a rep counts as contended; each default with its reason."""

    # A quarter of a core busy with other work during the rep. llama.cpp's decode threads synchronise
    # every token, so one of them descheduled for a slice stalls them all: pyperf already warns about any
    # other busy process; 0.25 core is far above the background of an idle Linux box (~0.01-0.05 core:
    # timers, journald, the shell) and well below what a second user's job or a video pipeline takes.
    max_other_cores: float = 0.25
    # Steal above 5 % of the machine's capacity: the hypervisor is running someone else on our vCPUs often
    # enough to move a decode median by more than the stability verdict's noise allowance.
    max_steal_fraction: float = 0.05
    # One runnable task more than the benchmark's own (median over the rep's readings): something else
    # waits for a CPU the whole time.
    max_runq_excess: float = 1.0
    # An instantaneous count read once or twice in a rep says where the scheduler happened to be at that
    # microsecond (edgeprof's main thread handling the child's event, a kernel worker): three readings at
    # least before a median of them is a figure about the rep.
    min_runq_readings: int = 3
    # The sampler reads the counters again the moment a rep ends, which is the moment edgeprof's threads and
    # the child hand the rep over: their wake-ups, each runnable for microseconds, land in procs_running
    # between the reads of our own task lists, and on an idle machine nearly every such reading showed one
    # task too many. Readings this close to a rep's start or end are left out of its run queue.
    runq_edge_s: float = 0.01
    # /proc counts CPU time in USER_HZ ticks (10 ms on every mainstream kernel build), so each counter's
    # delta can be a tick off. ``other_cores`` is three counters (machine, child, edgeprof): over readings
    # 20 ms apart that is +-1.5 cores of pure rounding. A figure is judged only where its rounding error
    # alone could not pass the threshold; shorter reps are judged together (the steady window).
    cpu_time_tick_s: float = 0.01


@dataclass(frozen=True)
class Rep:
    rep: int
    t_start: float
    t_end: float


def _bracket(series: SeriesLike, t0: float, t1: float) -> tuple[Point, Point] | None:
    """The last reading at or before ``t0`` (else the first after) and the first at or after ``t1`` (else
    the last before): a counter's delta over the smallest span of readings that covers the rep."""
    readings = points(series)
    if len(readings) < 2:
        return None
    start = next((p for p in reversed(readings) if p[0] <= t0), readings[0])
    end = next((p for p in readings if p[0] >= t1), readings[-1])
    return (start, end) if end[0] > start[0] else None


class Delta(NamedTuple):
    increase: float
    span_s: float
    t_start: float
    t_end: float


def _delta(series: SeriesLike | None, t0: float, t1: float) -> Delta | None:
    """A counter's increase around [t0, t1] and the readings it spans; None without two readings."""
    if series is None:
        return None
    pair = _bracket(series, t0, t1)
    if pair is None:
        return None
    (ta, va), (tb, vb) = pair
    if vb < va:
        return None  # a counter that went back (a new child pid, a reset): no number beats a wrong one
    return Delta(vb - va, tb - ta, ta, tb)


def _same_span(a: Delta, b: Delta) -> bool:
    # One collector reads both counters in one sample, so their readings share timestamps. A child that had
    # exited by the closing reading has no value there, and its delta would span less than the machine's.
    return abs(a.t_start - b.t_start) < 1e-6 and abs(a.t_end - b.t_end) < 1e-6


def _by_domain(series: Mapping[str, SeriesLike], roles: Mapping[str, MetricRole]) -> dict[str, str]:
    """CPU-time domain (``host_busy``, ``child``, ...) or ``run_queue`` -> the metric that counts it."""
    out: dict[str, str] = {}
    for metric in sorted(series):
        role = roles.get(metric)
        if role is None:
            continue
        if role.role == "cpu_time" and role.domain:
            out.setdefault(role.domain, metric)
        elif role.role == "run_queue":
            out.setdefault("run_queue_others" if role.domain == "others" else "run_queue", metric)
    return out


def _other_cores(
    entry: dict[str, Any],
    reasons: list[str],
    busy: Delta | None,
    child: Delta | None,
    own: Delta | None,
    th: InterferenceThresholds,
) -> bool:
    """CPU time of everything but the child and edgeprof, in cores; whether it could be judged."""
    if busy is None or child is None:
        return False
    if not _same_span(busy, child):
        entry["note"] = "the child's CPU-time readings do not span the machine's"
        return False
    span = busy.span_s
    if span <= 0:
        return False
    own_s = own.increase if own is not None and _same_span(busy, own) else 0.0
    others_s = busy.increase - child.increase - own_s
    rounding_cores = 3 * th.cpu_time_tick_s / span
    if rounding_cores > th.max_other_cores:
        entry["note"] = (
            f"readings {span:.3f} s apart: CPU-time ticks of {th.cpu_time_tick_s:g} s leave other_cores "
            f"+-{rounding_cores:.2f}"
        )
        return False
    # Counters are read a few microseconds apart, so a quiet machine can show a small negative rest.
    other_cores = max(0.0, others_s) / span
    entry.update({"other_cpu_s": rounded(max(0.0, others_s)), "other_cores": rounded(other_cores)})
    entry["child_cores"] = rounded(child.increase / child.span_s) if child.span_s > 0 else None
    if other_cores > th.max_other_cores:
        reasons.append(f"other processes used {other_cores:.2f} cores (limit {th.max_other_cores:g})")
    return True


def _steal(
    entry: dict[str, Any],
    reasons: list[str],
    total: Delta | None,
    steal: Delta | None,
    th: InterferenceThresholds,
) -> bool:
    """The hypervisor's steal as a share of the machine's capacity; whether it could be judged."""
    if total is None or total.span_s <= 0:
        return False
    entry["cpus"] = rounded(total.increase / total.span_s, 2)
    if steal is None:
        return False
    # Steal and the total are two counters, each a tick off: two ticks of steal in a 0.3-s rep on two
    # CPUs already read 6 %, and a quiet machine's hypervisor does steal a tick now and then.
    rounding = 3 * th.cpu_time_tick_s / total.increase if total.increase > 0 else float("inf")
    if rounding > th.max_steal_fraction:
        entry["steal_note"] = (
            f"{total.increase:.3f} CPU-s between readings: CPU-time ticks of {th.cpu_time_tick_s:g} s leave "
            f"steal +-{100 * rounding:.0f}%"
        )
        return False
    fraction = steal.increase / total.increase
    entry["steal_fraction"] = rounded(fraction, 4)
    if fraction > th.max_steal_fraction:
        reasons.append(f"hypervisor steal {100 * fraction:.1f}% (limit {100 * th.max_steal_fraction:g}%)")
    return True


def _cpu_count(total: Delta | None) -> int | None:
    """The CPUs the machine had during the readings: its total CPU time (idle included) per second."""
    if total is None or total.span_s <= 0:
        return None
    n = round(total.increase / total.span_s)
    return n if n >= 1 else None


def _run_queue(
    entry: dict[str, Any],
    reasons: list[str],
    inside: list[float] | None,
    others: bool,
    benchmark_threads: int | None,
    th: InterferenceThresholds,
    n_cpus: int | None = None,
) -> bool:
    """Runnable tasks beyond the benchmark's own (``inside``: the rep's readings; ``others``: of the count
    that already leaves out the child's and edgeprof's threads); whether judged. Other processes' tasks
    wait for the benchmark's CPUs only once they outnumber the CPUs it leaves free (``n_cpus`` less its
    threads): one runnable task beside a one-thread benchmark on two CPUs runs on the other one, and what
    it takes from the machine is ``other_cores``' to judge."""
    if inside is None:
        return False
    runq = median(inside) if inside else None
    entry["runq_median"] = rounded(runq, 1)
    if runq is None or (benchmark_threads is None and not others):
        return False
    if len(inside) < th.min_runq_readings:
        entry["runq_note"] = f"{len(inside)} run-queue reading(s) in the rep; {th.min_runq_readings} needed"
        return False
    if others:
        free = max(0, n_cpus - benchmark_threads) if n_cpus is not None and benchmark_threads else 0
        excess = runq - free
        why = f"a median of {runq:g} runnable tasks of other processes" + (
            f" for {free} CPU{'s' if free != 1 else ''} the benchmark leaves free" if free else ""
        )
    else:
        own_tasks = (benchmark_threads or 0) + 1  # the child's compute threads and the sampler reading
        excess = runq - own_tasks
        why = f"{runq:g} runnable tasks for {own_tasks} of the benchmark's own"
    entry["runq_excess"] = rounded(excess, 1)
    if excess >= th.max_runq_excess:
        reasons.append(why)
    return True


def judge_rep(
    rep: Rep,
    series: Mapping[str, SeriesLike],
    roles: Mapping[str, MetricRole],
    benchmark_threads: int | None = None,
    thresholds: InterferenceThresholds | None = None,
    edges: Sequence[float] = (),
) -> dict[str, Any]:
    """Evidence for one rep: ``status`` ``contended``/``quiet``/``unknown`` with the figures behind it.
    ``edges``: instants inside the span (the reps' starts and ends, where it spans several) whose run-queue
    readings are left out as its own start's and end's are."""
    th = thresholds or InterferenceThresholds()
    names = _by_domain(series, roles)

    def delta(domain: str) -> Delta | None:
        return _delta(series.get(names.get(domain, "")), rep.t_start, rep.t_end)

    entry: dict[str, Any] = {"rep": rep.rep, "duration_s": rounded(rep.t_end - rep.t_start)}
    reasons: list[str] = []
    others = "run_queue_others" in names
    runq_name = names.get("run_queue_others", names.get("run_queue"))
    avoid = (rep.t_start, rep.t_end, *edges)
    inside = (
        [
            v
            for t, v in points(series[runq_name])
            if rep.t_start <= t <= rep.t_end and all(abs(t - e) >= th.runq_edge_s for e in avoid)
        ]
        if runq_name is not None
        else None
    )
    total = delta("host_total")
    judged = [
        _other_cores(entry, reasons, delta("host_busy"), delta("child"), delta("self"), th),
        _steal(entry, reasons, total, delta("host_steal"), th),
        _run_queue(entry, reasons, inside, others, benchmark_threads, th, _cpu_count(total)),
    ]
    entry["reasons"] = reasons
    entry["status"] = "contended" if reasons else "quiet" if any(judged) else "unknown"
    return entry


def _conclusion(per_rep: list[dict[str, Any]], window: dict[str, Any] | None, reasons: list[str]) -> str:
    """The run's value from its reps' (and the steady window's) evidence, with the reason for it."""
    first = next((e for e in per_rep if e["status"] == "contended"), None)
    if first is not None:
        n = sum(1 for e in per_rep if e["status"] == "contended")
        reasons.append(f"{n} of {len(per_rep)} steady reps contended: {'; '.join(first['reasons'])}")
    if window is not None and window["status"] == "contended":
        why = "; ".join(window["reasons"])
        reasons.append(f"the steady window ({len(per_rep)} reps together) was contended: {why}")
    if reasons:
        return "contended"
    judged = [e for e in per_rep if e["status"] != "unknown"]
    if window is not None and window["status"] == "quiet":
        reasons.append(
            f"{len(judged)} steady reps without competing CPU work, hypervisor steal judged over the steady "
            "window (the reps too short for it one by one)"
            if judged
            else f"no competing CPU work in the steady window ({len(per_rep)} reps, too short one by one)"
        )
        return "quiet"
    if judged:
        reasons.append(f"{len(judged)} steady reps without competing CPU work")
        return "quiet"
    note = (window or {}).get("note")
    reasons.append(
        f"steady reps too short to judge: {note}"
        if note
        else "no CPU-time counters during the steady reps (proc_stat collector off?)"
    )
    return "inconclusive"


def interference_verdict(
    reps: Sequence[Rep],
    series: Mapping[str, SeriesLike],
    roles: Mapping[str, MetricRole],
    benchmark_threads: int | None = None,
    thresholds: InterferenceThresholds | None = None,
) -> tuple[str, dict[str, Any]]:
    """(``contended``|``quiet``|``inconclusive``, evidence) over a run's steady reps."""
    th = thresholds or InterferenceThresholds()
    per_rep = [judge_rep(r, series, roles, benchmark_threads, th) for r in sorted(reps, key=lambda r: r.rep)]
    evidence: dict[str, Any] = {
        "thresholds": asdict(th),
        "benchmark_threads": benchmark_threads,
        "reps": per_rep,
        "contended_reps": [e["rep"] for e in per_rep if e["status"] == "contended"],
        "reasons": [],
    }
    if not per_rep:
        evidence["reasons"].append("no steady reps")
        return "inconclusive", evidence
    other = [e["other_cores"] for e in per_rep if e.get("other_cores") is not None]
    steal_short = any("steal_note" in e for e in per_rep) and not any("steal_fraction" in e for e in per_rep)
    window: dict[str, Any] | None = None
    if other:
        evidence["other_cores_median"] = rounded(median(other))
        evidence["other_cores_max"] = rounded(max(other))
    if not other or steal_short:
        # Reps too short for the CPU-time ticks one by one: the steady window as a whole (first rep's start
        # to the last one's end, whatever ran between them) still gives one honest figure.
        steady_window = Rep(-1, min(r.t_start for r in reps), max(r.t_end for r in reps))
        edges = [t for r in reps for t in (r.t_start, r.t_end)]
        window = evidence["steady_window"] = judge_rep(
            steady_window, series, roles, benchmark_threads, th, edges
        )
        if not other and window.get("other_cores") is not None:
            evidence["other_cores_median"] = evidence["other_cores_max"] = window["other_cores"]
    return _conclusion(per_rep, window, evidence["reasons"]), evidence
