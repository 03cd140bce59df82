"""Interference verdict (agent/verdicts/interference.py) on synthetic counter series whose answer is known
(the counters the proc_stat collector gives, collectors/procstat.py, judged by their declared roles)."""

from __future__ import annotations

import pytest
from support.roles import declared_roles

from edgeprof.report import stability_note
from edgeprof.verdicts import InterferenceThresholds, Rep, interference_verdict, judge_rep


def _series(
    child_cores: float,
    other_cores: float,
    steal_frac: float = 0.0,
    runq: float = 2.0,
    n: int = 11,
    step: float = 0.1,
    others: float | None = None,
):
    """Counters (seconds) sampled every ``step`` s (0.1 s over 1 s by default) on a 2-CPU machine."""
    names = ("host.cpu_busy_s", "host.cpu_total_s", "host.cpu_steal_s", "host.procs_running")
    out: dict[str, list[tuple[float, float | None]]] = {k: [] for k in (*names, "proc.cpu_s", "self.cpu_s")}
    for i in range(n):
        t = i * step
        out["host.cpu_total_s"].append((t, 2.0 * t))
        out["host.cpu_steal_s"].append((t, steal_frac * 2.0 * t))
        out["host.cpu_busy_s"].append((t, (child_cores + other_cores + 0.01) * t))
        out["proc.cpu_s"].append((t, child_cores * t))
        out["self.cpu_s"].append((t, 0.01 * t))
        out["host.procs_running"].append((t, runq))
        if others is not None:
            out.setdefault("host.procs_running_others", []).append((t, others))
    return out


REPS = [Rep(0, 0.0, 0.5), Rep(1, 0.5, 1.0)]
# what the proc_stat collector declares for these counters (and a sweep stores with its collector status)
ROLES = declared_roles(_series(1.0, 0.0))


def test_quiet_when_only_the_child_and_edgeprof_use_the_cpu() -> None:
    value, evidence = interference_verdict(REPS, _series(1.0, 0.0), ROLES, benchmark_threads=1)
    assert value == "quiet", evidence
    assert evidence["reps"][0]["other_cores"] == pytest.approx(0.0, abs=1e-6)
    assert evidence["reps"][0]["child_cores"] == pytest.approx(1.0)
    assert evidence["reps"][0]["cpus"] == pytest.approx(2.0)


def test_contended_by_other_processes_steal_or_run_queue() -> None:
    value, evidence = interference_verdict(REPS, _series(1.0, 0.6), ROLES, benchmark_threads=1)
    assert value == "contended" and evidence["contended_reps"] == [0, 1]
    assert evidence["reps"][0]["other_cores"] == pytest.approx(0.6)
    assert "other processes used 0.60 cores" in evidence["reasons"][0]
    stolen = _series(1.0, 0.0, steal_frac=0.10)
    assert interference_verdict(REPS, stolen, ROLES, benchmark_threads=1)[0] == "contended"
    assert (
        interference_verdict(REPS, _series(1.0, 0.0, runq=4.0), ROLES, benchmark_threads=1)[0] == "contended"
    )
    # thresholds are parameters: the same 0.6 cores is quiet under a looser limit
    loose = InterferenceThresholds(max_other_cores=1.0)
    assert (
        interference_verdict(REPS, _series(1.0, 0.6), ROLES, benchmark_threads=1, thresholds=loose)[0]
        == "quiet"
    )


def test_inconclusive_without_counters_and_unknown_for_a_counter_that_went_back() -> None:
    assert interference_verdict(REPS, {}, ROLES, benchmark_threads=1)[0] == "inconclusive"
    assert interference_verdict([], _series(1.0, 0.0), ROLES)[0] == "inconclusive"
    series = _series(1.0, 0.0)
    series["proc.cpu_s"] = [(0.0, 5.0), (1.0, 1.0)]  # a new pid: its counter starts again
    series.pop("host.cpu_steal_s")
    series.pop("host.procs_running")
    entry = judge_rep(Rep(0, 0.0, 1.0), series, ROLES, benchmark_threads=1)
    assert entry["status"] == "unknown" and "other_cores" not in entry


def test_reps_too_short_for_the_tick_are_judged_together_as_the_steady_window() -> None:
    # Readings every 20 ms, reps of 20 ms: three counters a 10-ms tick off each are +-1.5 cores, so no
    # single rep is judged; ten of them together span 0.2 s (+-0.15 cores), enough.
    short = [Rep(i, 0.1 + 0.02 * i, 0.12 + 0.02 * i) for i in range(10)]
    quiet = _series(1.0, 0.0, n=51, step=0.02)
    value, evidence = interference_verdict(short, quiet, ROLES, benchmark_threads=1)
    # (the run queue, a gauge, still judges a rep with a reading inside it)
    assert all("other_cores" not in e and "ticks of 0.01 s" in e["note"] for e in evidence["reps"]), evidence
    assert "+-1.50" in evidence["reps"][0]["note"]
    assert value == "quiet" and evidence["steady_window"]["other_cores"] == pytest.approx(0.0, abs=1e-6)
    value, evidence = interference_verdict(
        short, _series(1.0, 0.6, n=51, step=0.02), ROLES, benchmark_threads=1
    )
    assert value == "contended" and "steady window" in evidence["reasons"][0]
    assert evidence["other_cores_median"] == pytest.approx(0.6)
    # two of them (0.04 s) are too short even together; without the run queue nothing judges them
    quiet.pop("host.procs_running")
    value, evidence = interference_verdict(short[:2], quiet, ROLES, benchmark_threads=1)
    assert value == "inconclusive" and "too short" in evidence["reasons"][0], evidence["reasons"]


def test_a_child_gone_before_the_closing_reading_is_not_counted_as_other_work() -> None:
    # The machine's counters have a reading after the rep; the child's stops at 0.5 (it had exited): its
    # delta spans less time than the machine's, and busy - child would charge its last 0.5 s to "others".
    series = _series(1.0, 0.0)
    series["proc.cpu_s"] = [p for p in series["proc.cpu_s"] if p[0] <= 0.5]
    entry = judge_rep(Rep(0, 0.2, 0.9), series, ROLES, benchmark_threads=1)
    assert "other_cores" not in entry and "do not span" in entry["note"]
    assert entry["status"] == "quiet"  # steal and the run queue still judge it
    assert judge_rep(Rep(0, 0.2, 0.5), series, ROLES, benchmark_threads=1)["other_cores"] == pytest.approx(
        0.0, abs=1e-6
    )


def test_stability_note_says_whether_instability_coincides_with_contention() -> None:
    row = {"model_label": "q4", "ctx": 512, "ngl": 0, "stability_verdict": "unstable"}
    assert "competed for the CPU" in stability_note(row | {"interference_verdict": "contended"})
    assert "quiet machine" in stability_note(row | {"interference_verdict": "quiet"})
    assert stability_note(row | {"stability_verdict": "stable", "interference_verdict": "contended"}) == ""


def test_the_run_queue_of_other_processes_is_judged_without_guessing_the_benchmarks_threads() -> None:
    """The collector's count that leaves out the child's and edgeprof's own threads decides: 6 runnable
    tasks of which none is another process's is quiet whatever thread count was assumed; one other task
    waiting through the rep is contended."""
    busy_ours = _series(1.0, 0.0, runq=6.0, others=0.0)
    roles = declared_roles(busy_ours)
    value, evidence = interference_verdict(REPS, busy_ours, roles, benchmark_threads=1)
    assert value == "quiet", evidence
    assert evidence["reps"][0]["runq_excess"] == -1.0  # no other task, and one CPU the benchmark leaves free
    waiting = _series(1.0, 0.0, runq=3.0, others=1.0)
    value, evidence = interference_verdict(REPS, waiting, roles, benchmark_threads=None)
    assert value == "contended"
    assert "a median of 1 runnable tasks of other processes" in evidence["reasons"][0]


def test_a_rep_with_too_few_run_queue_readings_is_not_judged_by_them() -> None:
    """One or two instantaneous counts in a rep are where the scheduler happened to be, not a figure."""
    # readings at 0, 0.2 and 0.4 s: the one at the rep's start is left out, two are inside
    two = _series(1.0, 0.0, runq=6.0, n=3, step=0.2)
    rep = judge_rep(Rep(0, 0.0, 0.5), two, ROLES, benchmark_threads=1)
    assert "runq_excess" not in rep and rep["runq_note"] == "2 run-queue reading(s) in the rep; 3 needed"
    assert "runnable" not in " ".join(rep["reasons"])


def test_readings_at_a_reps_edges_are_left_out_of_its_run_queue() -> None:
    """The readings taken as a rep starts and ends catch edgeprof's and the child's own hand-over: one
    task too many at each, on an idle machine. Counted, a rep read at 0, 0.25 and 0.5 s would have a
    median of 1; left out, what is inside decides."""
    series = _series(1.0, 0.0, others=0.0, n=5, step=0.25)
    series["host.procs_running_others"] = [
        (t, 1.0 if t in (0.0, 0.5, 1.0) else 0.0) for t in (0, 0.25, 0.5, 0.75, 1.0)
    ]
    roles = declared_roles(series)
    value, evidence = interference_verdict(REPS, series, roles, benchmark_threads=1)
    assert value == "quiet", evidence
    # the same count at readings inside the reps is judged (a two-thread benchmark fills both CPUs)
    waiting = _series(1.0, 0.0, others=1.0, n=21, step=0.05)
    assert interference_verdict(REPS, waiting, roles, benchmark_threads=2)[0] == "contended"


def test_other_tasks_wait_only_once_they_outnumber_the_cpus_the_benchmark_leaves_free() -> None:
    """What an idle 2-CPU VM gave a one-thread benchmark: a kernel worker runnable at two of a rep's three
    readings (a median of 1) read as contention, though it ran on the CPU the benchmark left free. One
    other task beside a one-thread benchmark is quiet; two are one too many; beside a two-thread
    benchmark one is already waiting."""
    one_free = _series(1.0, 0.0, others=1.0, n=21, step=0.05)
    roles = declared_roles(one_free)
    value, evidence = interference_verdict(REPS, one_free, roles, benchmark_threads=1)
    assert value == "quiet", evidence["reasons"]
    assert evidence["reps"][0]["runq_excess"] == 0.0
    two = _series(1.0, 0.0, others=2.0, n=21, step=0.05)
    value, evidence = interference_verdict(REPS, two, roles, benchmark_threads=1)
    assert value == "contended"
    assert "a median of 2 runnable tasks of other processes for 1 CPU the benchmark leaves free" in (
        evidence["reasons"][0]
    )
    assert interference_verdict(REPS, one_free, roles, benchmark_threads=2)[0] == "contended"


def test_a_steady_window_of_short_reps_leaves_out_every_reps_edges() -> None:
    """Reps too short for CPU-time ticks one by one are judged as one window; the readings taken as each of
    them started and ended lie inside that window and catch edgeprof's own hand-over just the same."""
    reps = [Rep(i, 0.1 * i, 0.1 * i + 0.08) for i in range(5)]
    times = sorted({t for r in reps for t in (r.t_start, r.t_end, r.t_start + 0.04)})
    edges = {round(t, 6) for r in reps for t in (r.t_start, r.t_end)}
    series = {
        "host.cpu_total_s": [(t, 2.0 * t) for t in times],
        "host.cpu_steal_s": [(t, 0.0) for t in times],
        "host.cpu_busy_s": [(t, 1.01 * t) for t in times],
        "proc.cpu_s": [(t, 1.0 * t) for t in times],
        "self.cpu_s": [(t, 0.01 * t) for t in times],
        "host.procs_running": [(t, 3.0) for t in times],
        "host.procs_running_others": [(t, 1.0 if round(t, 6) in edges else 0.0) for t in times],
    }
    roles = declared_roles(series)
    value, evidence = interference_verdict(reps, series, roles, benchmark_threads=1)
    assert "steady_window" in evidence, evidence
    assert value == "quiet", evidence
    assert evidence["steady_window"]["runq_median"] == 0.0


def test_two_ticks_of_steal_in_a_short_rep_are_rounding_not_a_hypervisor() -> None:
    # What an idle VM gave in the demo: five reps of 0.13-0.17 s on 2 CPUs, and 0.02 s of steal (two
    # ticks) in one of them read 5.6 %. A steal share is judged only where three ticks could not pass the
    # limit by themselves; shorter reps are judged together over the steady window.
    reps = [Rep(i, 0.2 * i, 0.2 * i + 0.16) for i in range(5)]
    series = _series(1.9, 0.0, n=11, step=0.1)
    series["host.cpu_steal_s"] = [(t, 0.0 if t < 0.65 else 0.02) for t, _ in series["host.cpu_total_s"]]
    value, evidence = interference_verdict(reps, series, ROLES, benchmark_threads=2)
    assert value == "quiet", evidence["reasons"]
    assert all("steal_fraction" not in e and "steal +-" in e["steal_note"] for e in evidence["reps"])
    assert evidence["steady_window"]["steal_fraction"] < 0.05
    assert "steal judged over the steady window" in evidence["reasons"][0]
    # a hypervisor that really takes 10 % of the machine is still seen, over the window
    stolen = _series(1.8, 0.0, steal_frac=0.10, n=11, step=0.1)
    value, evidence = interference_verdict(reps, stolen, ROLES, benchmark_threads=2)
    assert value == "contended" and "steady window" in evidence["reasons"][0], evidence["reasons"]
    assert "hypervisor steal 10.0%" in evidence["reasons"][0]
