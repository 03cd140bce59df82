"""Verdicts on a serving level: were its requests alike (stability), and did other work compete for the CPU
while it ran (interference)?

A serving level has no steady reps; what plays their part:

- stability: the level's measured successful requests in the order they were sent, cut into consecutive
  groups of ``max(3, c)`` requests; each group's median E2EL per output token is one "rep", judged by the
  same pyperf-style test as the in-process runs' steady tg t/s. E2EL per token and not the decode-only
  TPOT, because in a closed loop at c > 1 the first request of each wave decodes while the others prefill
  (its TPOT is ~1.3x theirs on a quiet machine), while all of a wave end together; groups and not single
  requests, because one scheduler hiccup moves a 100-ms request by a quarter, and a level of 32 requests
  nearly always holds one (a group's median shrugs it off; a hog for part of the level moves whole
  groups). TPOT's and TTFT's per-request spread is kept as evidence;
- interference: the ``proc_stat`` CPU-time counters over the level's own time window (first send to last
  end), the server process counted as the benchmark (the sampler follows its pid as it follows the
  in-process child's) and edgeprof, whose load generator runs in the agent's process, as itself.

Pure apart from ``level_inputs``, which reads the stored level and its requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.collectors import MetricRole
from edgeprof.stats import median
from edgeprof.storage.models import Run, ServingLevel, ServingRequest
from edgeprof.telemetry import SeriesLike
from edgeprof.verdicts.interference import InterferenceThresholds, Rep, judge_rep
from edgeprof.verdicts.result import VerdictResult, rounded
from edgeprof.verdicts.stability import StabilityThresholds, stability


@dataclass(frozen=True)
class LevelInputs:
    """What the serving verdicts read of one stored level; per-request lists in the order they were sent,
    over the measured requests that succeeded."""

    t_start: float | None  # the measured level's window (None: it never started)
    t_end: float | None
    concurrency: int  # clients (closed loop) or the cap on requests in flight (open loop)
    e2el_per_token_ms: list[float]
    tpot_ms: list[float]  # decode only; a request with one output token has none
    ttft_ms: list[float]
    server_threads: int | None  # the server's compute threads (-t)


def level_inputs(session: Session, run: Run) -> LevelInputs | None:
    """The stored serving level of ``run`` and its measured requests; None when the run has no level (an
    in-process run)."""
    level = session.scalar(select(ServingLevel).where(ServingLevel.run_id == run.id))
    if level is None:
        return None
    r = ServingRequest
    query = (
        select(r.e2el_ms, r.output_tokens, r.tpot_ms, r.ttft_ms)
        .where(
            r.run_id == run.id,
            r.kind == "measured",
            r.status == "ok",
        )
        .order_by(r.t_send_mono, r.idx)
    )
    requests = list(session.execute(query))
    return LevelInputs(
        t_start=level.t_start_mono,
        t_end=level.t_end_mono,
        concurrency=int(level.concurrency or 1),
        e2el_per_token_ms=[float(e2el) / n for e2el, n, _, _ in requests if e2el is not None and n],
        tpot_ms=[float(tpot) for _, _, tpot, _ in requests if tpot is not None],
        ttft_ms=[float(ttft) for _, _, _, ttft in requests if ttft is not None],
        server_threads=run.n_threads,
    )


def request_groups(values: Sequence[float], concurrency: int) -> tuple[int, list[float]]:
    """(group size, each group's median): consecutive groups of ``max(3, concurrency)`` values, the rest
    of a last incomplete group joining the one before it (a lone leftover would be a group of one)."""
    size = max(3, concurrency)
    n_groups = len(values) // size
    if n_groups == 0:
        return size, []
    groups = [list(values[i * size : (i + 1) * size]) for i in range(n_groups)]
    groups[-1] += values[n_groups * size :]
    return size, [m for g in groups if (m := median(g)) is not None]


def _spread(values: Sequence[float], thresholds: StabilityThresholds | None) -> dict[str, object]:
    """Per-request spread of one figure, as evidence beside the verdict."""
    verdict = stability(values, thresholds)
    keys = ("n", "median", "cv", "max_over_median", "min_over_median")
    return {"value": verdict.value} | {k: verdict.evidence.get(k) for k in keys}


def level_stability(level: LevelInputs, thresholds: StabilityThresholds | None = None) -> VerdictResult:
    """``stable``/``unstable``/``inconclusive`` over the medians of consecutive request groups' E2EL per
    output token; the requests' own spread (E2EL/token, TPOT, TTFT) beside it."""
    th = thresholds or StabilityThresholds()
    size, medians = request_groups(level.e2el_per_token_ms, level.concurrency)
    verdict = stability(medians, th)
    evidence = verdict.evidence
    evidence.update(metric="e2el_per_token_ms", per=f"median of {size} consecutive requests", group_size=size)
    if verdict.value == "inconclusive" and len(medians) < th.min_n:
        evidence["reasons"] = [
            f"{len(level.e2el_per_token_ms)} successful request(s) in groups of {size}: {len(medians)} "
            f"group(s); need {th.min_n} ({th.min_n * size} requests) to judge the spread"
        ]
    evidence["requests"] = {
        "e2el_per_token_ms": _spread(level.e2el_per_token_ms, th),
        "tpot_ms": _spread(level.tpot_ms, th),
        "ttft_ms": _spread(level.ttft_ms, th),
    }
    return verdict


def level_interference(
    level: LevelInputs,
    series: Mapping[str, SeriesLike],
    roles: Mapping[str, MetricRole],
    thresholds: InterferenceThresholds | None = None,
) -> VerdictResult:
    """``contended``/``quiet``/``inconclusive`` over the measured level's time window."""
    th = thresholds or InterferenceThresholds()
    # The load generator's event loop is runnable whenever a chunk arrives: one task beside the server's
    # compute threads (the sampler reading the run queue is counted by the judge itself).
    own = level.server_threads + 1 if level.server_threads is not None else None
    evidence: dict[str, object] = {"thresholds": asdict(th), "benchmark_threads": own, "reasons": []}
    reasons: list[str] = []
    evidence["reasons"] = reasons
    if level.t_start is None or level.t_end is None or level.t_end <= level.t_start:
        reasons.append("the measured level never ran: nothing to judge")
        return VerdictResult("inconclusive", evidence)
    window = judge_rep(Rep(0, level.t_start, level.t_end), series, roles, own, th)
    evidence["level"] = window
    evidence["other_cores"] = window.get("other_cores")
    span = f"the measured level ({rounded(level.t_end - level.t_start, 2)} s)"
    if window["status"] == "contended":
        reasons.append(f"{span} was contended: {'; '.join(window['reasons'])}")
        return VerdictResult("contended", evidence)
    if window["status"] == "quiet":
        reasons.append(f"no competing CPU work during {span}")
        return VerdictResult("quiet", evidence)
    note = window.get("note")
    reasons.append(
        f"{span} too short to judge: {note}"
        if note
        else f"no CPU-time counters during {span} (proc_stat collector off?)"
    )
    return VerdictResult("inconclusive", evidence)
