"""The answer: which variant to run here, per condition (model group, runner, workload, ctx, depth, every
other parameter held fixed, agent/plan/budget.py). A group's files and the parameters a user tunes for speed
alone (threads, batch, ngl, ...) compete within it; a parameter that decided gets a line ("threads 1: 12×
faster than threads 2 here"). The rivals ran interleaved (agent/sweep/interleave.py).

The rules, each for a reason:
- a variant competes only when it ran (a config predicted not to fit is stored ``skipped_memory`` and never
  started), has steady decode reps, and is within the plan's quality budget (mean KLD and same-top share
  against the group's reference, from a ``kind = "quality"`` workload). Every other one is listed with its
  reason, so a variant missing from the answer is never a mystery;
- a variant without a quality measurement is not within the budget (unknown is not "good enough"); the
  reference is, by definition (KLD 0 against itself). Where no variant of a group has a quality measurement
  at all the line says so and falls back to speed alone, rather than recommending nothing;
- a variant is "faster" only beyond the noise: the interval of the ratio over paired blocks excludes 1 (a
  sequential group's anytime-valid one, agent/sweep/interleave.py). Otherwise they tie, and only a measured
  figure breaks a tie (KLD, memory, energy: ``break_tie``); where none does, nothing is picked;
- rows marked ``contended`` or ``unstable``, or with fewer than ``min_reps`` steady reps, never decide ("no
  decision", named), except where the rivals ran interleaved (``MIN_PAIRED_BLOCKS`` blocks each): the other
  work then fell on each alike, the paired-block interval carries its noise, and the decision stands, noted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from edgeprof.plan import Decide, QualityBudget
from edgeprof.plan.budget import HELD_PARAMS, RIVAL_PARAMS, held_values
from edgeprof.report.accuracy import accuracy_exclusion
from edgeprof.report.cells import RUNNING, no_decode_why
from edgeprof.report.reference import file_notes, is_speed_row, quality_of, same_file_notes, threads_notes
from edgeprof.report.speed_ratio import (
    SpeedRatio,
    block_flags,
    block_states,
    blocked_ratio,
    set_aside,
    tie_breakers,
)  # fmt: skip
from edgeprof.runners.registry import DEFAULT_RUNNER
from edgeprof.stats import PairedDecision, pair_confidence_pct, paired_decision

Ratio = SpeedRatio | PairedDecision  # a fixed-n rank interval, or a sequential decision's

# Named in every recommendation line (ngl and threads where all its rivals share them; where they do not,
# each variant's label names its own); the other held parameters only where the sweep varies them.
NAMED_AXES = ("ctx", "depth")
NAMED_RIVALS = ("ngl", "threads")


@dataclass(frozen=True)
class Condition:
    """What is held fixed while the quants of a group and the competing parameters compete."""

    model_group: str
    workload: str
    runner: str
    params: tuple[tuple[str, Any], ...]  # every held parameter's value, depth None read as 0

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Condition:
        params = held_values(row)
        return cls(
            str(row["model_group"]), str(row["workload"]), str(row.get("runner") or DEFAULT_RUNNER), params
        )

    def describe(
        self, varying: Sequence[str] = (), show_group: bool = True, shared: Sequence[tuple[str, Any]] = ()
    ) -> str:
        """``shared``: the competing parameters every variant of the condition has alike, to name too."""
        values = dict(self.params)
        parts = [f"{k} {values[k]}" for k in NAMED_AXES]
        parts += [f"{k} {_word(v)}" for k, v in shared if k in NAMED_RIVALS]
        parts += [self.workload, self.runner]
        parts += [f"{k} {_word(values[k])}" for k in HELD_PARAMS if k in varying and k not in NAMED_AXES]
        where = ", ".join(parts)
        return f"{self.model_group}: {where}" if show_group else where


def _word(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


@dataclass
class Candidate:
    row: Mapping[str, Any]
    kld_mean: float | None
    same_top_pct: float | None
    is_reference: bool
    rivals_shown: tuple[str, ...] = ()  # the competing parameters that vary in its condition
    kept: dict[int, list[float]] | None = None  # its blocks less the reps set aside (``decide``)

    @property
    def label(self) -> str:
        """The file's label, and the competing parameters where the condition varies them."""
        params = " ".join(f"{k} {_word(self.row.get(k))}" for k in self.rivals_shown)
        return f"{self.row['model_label']} {params}" if params else str(self.row["model_label"])

    @property
    def reps(self) -> list[float]:
        """The steady reps' tg t/s (attached by agent/report/fit.py from the stored measurements)."""
        return [float(v) for v in self.row.get("_tg_tps_reps") or [] if v is not None and v > 0]

    @property
    def blocks(self) -> dict[int, list[float]]:
        """The steady reps by the block they ran in (all in block 0 where no blocks were attached)."""
        blocks = self.row.get("_tg_tps_blocks") or {}
        found = {int(k): [float(v) for v in vs if v is not None and v > 0] for k, vs in blocks.items()}
        return {k: vs for k, vs in found.items() if vs} or {0: self.reps}

    @property
    def compared(self) -> dict[int, list[float]]:
        """The blocks its comparisons use: without the reps set aside for the device's state."""
        return self.kept if self.kept is not None else self.blocks

    @property
    def decision(self) -> dict[str, Any] | None:
        """How its group of rivals was settled in the sweep (agent/sweep/interleave.py), where it was."""
        found = self.row.get("_decision")
        return found if isinstance(found, dict) else None

    @property
    def median(self) -> float:
        return float(self.row["tg_tps_median"])

    def quality_key(self) -> tuple[float, float]:
        """Better measured quality first: lower KLD (the reference of a quality run: 0), then faster."""
        kld = 0.0 if self.is_reference and self.kld_mean is None else self.kld_mean
        return (math.inf if kld is None else kld, -self.median)


@dataclass
class Recommendation:
    condition: Condition
    budget: QualityBudget
    best: Candidate | None
    runner_up: Candidate | None
    quality_known: bool
    # "faster" (beyond noise), "tie" (within noise, or within ±R % where decided sequentially), "open" (a
    # sequential decision its budget left unsettled), "only" (one variant left), "no_decision" (rows too
    # noisy to decide), "none" (no variant left)
    decision: str = "none"
    decide: Decide = field(default_factory=Decide)
    sequential: bool = False  # the rivals were decided sequentially (each row has its group's record)
    breakers: list[str] = field(default_factory=list)  # the measured figures that could break the tie
    tie_leader: Candidate | None = None  # the tie's fastest by median, where nothing measured broke it
    set_aside: dict[int, int] = field(default_factory=dict)  # run id -> reps left out for the device's state
    excluded: list[str] = field(default_factory=list)  # "label: reason", for the lines
    reasons: dict[int, str] = field(default_factory=dict)  # run id -> why it did not compete or decide
    undecided: list[str] = field(default_factory=list)  # "label (why its speed cannot decide)"
    ratios: dict[int, Ratio] = field(default_factory=dict)  # run id -> best (or leader) ÷ that row
    tied: list[Candidate] = field(default_factory=list)  # beyond the runner-up, within noise of the best
    caveat: str | None = None  # the only variant left: why its own figures are not clean
    noisy: bool = False  # an undecided row is contended or unstable
    too_few: bool = False  # an undecided row has fewer than min_reps steady reps
    advice: list[str] = field(default_factory=list)  # what each competing parameter of the best's file did
    shared: tuple[tuple[str, Any], ...] = ()  # the competing parameters all its variants have alike
    notes: list[str] = field(default_factory=list)  # labels that name one file (equal sha256)

    @property
    def model_group(self) -> str:
        return self.condition.model_group

    def lines(self, show_group: bool = True, varying: Sequence[str] = ()) -> list[str]:
        where = self.condition.describe(varying, show_group, self.shared)
        if self.decision == "none":
            why = "; ".join(self.excluded) if self.excluded else "no variant ran"
            return [f"Recommendation ({where}): none — {why}"]
        if self.decision == "no_decision":
            out = [f"Recommendation ({where}): no decision: {'; '.join(self.undecided)}; {self._rerun()}"]
        elif self.best is None:
            out = [f"Recommendation ({where}): none picked — {self._unbroken()}"]
            out += self._runner_up_lines() + [f"  advice: {a}" for a in self.advice]
        else:
            out = [f"Recommendation ({where}): {self.best.label} — {self._rule()}"]
            out.append(f"  evidence: {evidence(self.best)}")
            out += self._runner_up_lines()
            out += [f"  advice: {a}" for a in self.advice]
        out += [f"  note: {n}" for n in self.notes]
        return out + [f"  excluded: {x}" for x in self.excluded]

    def _unbroken(self) -> str:
        """A tie (or an open comparison) that no measured figure breaks: what it is, what would break it."""
        assert self.runner_up is not None and self.leader is not None
        ratio = self.ratios[int(self.runner_up.row["run_id"])]
        return (
            f"{self._tied_words()} between {self.leader.label} and {self.runner_up.label} "
            f"({ratio.describe()}); "
            f"nothing measured breaks it: {'; '.join(self.breakers)}"
        )

    def _tied_words(self) -> str:
        if self.decision == "open":
            return f"not settled ({self.stopped_why()})"
        if self.sequential and self.runner_up is not None:
            found = self.ratios.get(int(self.runner_up.row["run_id"]))
            tie = getattr(found, "tie_pct", None)
            if tie is not None:
                return f"tie within ±{tie:g} %"
        return "tie within noise"

    def stopped_why(self) -> str:
        """Why the sequential group stopped, from the sweep's record."""
        record = (self.leader.decision if self.leader is not None else None) or {}
        return str(record.get("stopped") or "unknown")

    @property
    def leader(self) -> Candidate | None:
        """The tie's fastest member by median (the best, where a figure broke the tie)."""
        return self.best or self.tie_leader

    def _rule(self) -> str:
        assert self.best is not None
        unknown = '; quality NOT measured (add a kind = "quality" workload)' if not self.quality_known else ""

        def scope(fit: str) -> str:
            within = f"within {self.budget.describe()} " if self.quality_known else ""
            return f"{within}that {fit} in memory"

        if self.decision == "faster":
            return f"fastest {scope('fits')}{unknown}"
        if self.decision == "only":
            note = f" (its own speed figures: {self.caveat})" if self.caveat else ""
            return f"the only variant {scope('fits')}{note}{unknown}"
        assert self.runner_up is not None
        ratio = self.ratios[int(self.runner_up.row["run_id"])]
        return (
            f"{self._tied_words()} with {self.runner_up.label} ({ratio.describe()}); chose {self.best.label} "
            f"{'; '.join(self.breakers)}; among the variants {scope('fit')}{unknown}"
        )

    def _runner_up_lines(self) -> list[str]:
        if self.runner_up is None:
            return ["  runner-up: none within the budget"] if self.decision == "only" else []
        out = [f"  {'runner-up' if self.best is not None else 'tied'}: {evidence(self.runner_up)}"]
        ratio = self.ratios.get(int(self.runner_up.row["run_id"]))
        if self.decision == "faster" and ratio is not None and self.best is not None:
            out[0] += f" · {self.best.label} faster beyond noise ({ratio.describe()})"
        out += [
            f"  also within noise: {c.label} ({self.ratios[int(c.row['run_id'])].describe()})"
            for c in self.tied
        ]
        if self.sequential and self.leader is not None:
            record = self.leader.decision or {}
            out.append(
                f"  decided: {record.get('budget', 'sequential')}; stopped: {self.stopped_why()} after "
                f"{record.get('rounds', '?')} rounds (anytime-valid {self.budget.confidence_pct:g} % "
                "confidence sequence over paired blocks)"
            )
        return out

    def _rerun(self) -> str:
        reps = f"with [repeat] steady ≥ {self.budget.min_reps}"
        if self.noisy and self.too_few:
            return f"rerun on a quiet machine {reps}"
        return "rerun on a quiet machine" if self.noisy else f"rerun {reps}"


def break_tie(rec: Recommendation, tied: list[Candidate]) -> None:
    """Pick among tied variants on a measured figure only: quality (KLD against a quality run's reference),
    then memory, then energy (``speed_ratio.tie_breakers``); none that differs: no pick, and the line says
    what was and was not measured."""
    tied.sort(key=Candidate.quality_key)
    a, b = tied[0], tied[1]
    if rec.quality_known and a.quality_key()[0] < b.quality_key()[0]:
        theirs = f"KLD {b.quality_key()[0]:.4f}"
        rec.breakers = [f"for quality (KLD {a.quality_key()[0]:.4f} against {theirs})"]
        rec.best, rec.runner_up, rec.tied = a, b, tied[2:]
        return
    chosen, words = tie_breakers([c.row for c in tied], rec.quality_known)
    rec.tie_leader = max(tied, key=lambda c: c.median)
    if chosen is not None:
        rec.best = next(c for c in tied if c.row is chosen)
        rest = [c for c in tied if c is not rec.best]
        rec.runner_up, rec.tied, rec.breakers = rest[0], rest[1:], words
        return
    rest = [c for c in tied if c is not rec.tie_leader]
    rec.best, rec.runner_up, rec.tied, rec.breakers = None, rest[0], rest[1:], words


def evidence(c: Candidate) -> str:
    r = c.row
    parts = [f"{c.label} ({r.get('quant') or '?'})"]
    if r.get("tg_tps_median") is not None:
        parts.append(
            f"tg {r['tg_tps_median']:.1f} t/s [{r['tg_tps_min']:.1f}–{r['tg_tps_max']:.1f}] n={r['tg_tps_n']}"
        )
    if c.is_reference and c.kld_mean is None:
        parts.append("reference of the quality run (KLD 0)")
    elif c.kld_mean is not None:
        q = f"KLD {c.kld_mean:.4f}"
        if c.same_top_pct is not None:
            q += f", same-top {c.same_top_pct:.1f} %"
        parts.append(q + (" (reference)" if c.is_reference else ""))
    else:
        parts.append("quality not measured")
    mem = []
    if r.get("mem_predicted_mb") is not None:
        mem.append(f"≈ {r['mem_predicted_mb']:.0f} MiB predicted")
    if r.get("peak_rss_mb") is not None:
        mem.append(f"{r['peak_rss_mb']:.0f} MiB peak RSS")
    if mem:
        parts.append(", ".join(mem))
    if r.get("bw_pct") is not None:
        spread = r.get("_bw_pct_range")
        # the probe's own spread: the share of its fastest and of its slowest pass
        within = f" ({spread[0]:.0f}–{spread[1]:.0f} % over the probe's passes)" if spread else ""
        parts.append(f"{r['bw_pct']:.0f} % of measured bandwidth{within}")
    return " · ".join(parts)


def exclusion(c: Candidate, budget: QualityBudget, quality_known: bool) -> str | None:
    """Why ``c`` does not compete in its condition, or None."""
    r = c.row
    detail = f": {r['reason']}" if r.get("reason") else ""
    if r["status"] == "skipped_memory":
        return f"does not fit in memory (skipped_memory{detail})"
    if r["status"] == RUNNING:
        return "still running"
    if r["status"] != "ok":
        return f"failed ({r['status']}{detail})"
    if r.get("tg_tps_median") is None:
        return "no steady decode measured" + no_decode_why(r)
    if c.is_reference:
        return None
    accuracy = accuracy_exclusion(r, budget)
    if accuracy is not None:
        return accuracy
    if not quality_known:
        return None
    if c.kld_mean is None:
        return "quality not measured"
    over = [f"KLD {c.kld_mean:.4f} over {budget.kld_mean:g}"] if c.kld_mean > budget.kld_mean else []
    if c.same_top_pct is not None and c.same_top_pct < budget.same_top_pct:
        over.append(f"same-top {c.same_top_pct:.1f} % under {budget.same_top_pct:g} %")
    return f"outside the quality budget: {', '.join(over)}" if over else None


# Why a row's speed cannot decide: its verdicts say the machine, not the file, may have set its median.
CONTENDED = "contended"
UNSTABLE = "unstable"


def machine_flags(c: Candidate) -> list[str]:
    """What the row's verdicts say of the machine while it ran: contended, unstable."""
    flags = []
    if c.row.get("interference_verdict") == "contended":
        flags.append(CONTENDED)
    if c.row.get("stability_verdict") == "unstable":
        flags.append(UNSTABLE)
    return flags


# Blocks two rivals must share before their ratio stands on pairs rather than on their whole runs.
MIN_PAIRED_BLOCKS = 2


def interleaved(eligible: Sequence[Candidate]) -> bool:
    """Whether every rival's steady reps ran in blocks alternating with every other's (agent/sweep/
    interleave.py): then what the machine did fell on all of them alike, and the paired-block interval
    (agent/report/speed_ratio.py ``blocked_ratio``) already carries its noise."""
    shared = set.intersection(*(set(c.blocks) for c in eligible)) if eligible else set()
    return len(shared) >= MIN_PAIRED_BLOCKS


def noise_flags(c: Candidate, budget: QualityBudget, paired: bool = False) -> list[str]:
    """Why ``c``'s speed cannot decide anything (empty: it can). ``paired``: the rivals ran interleaved, so
    a contended or unstable machine no longer stops a decision (the rivals shared it, block by block)."""
    flags = [] if paired else machine_flags(c)
    n = len(c.reps)
    if n < budget.min_reps and c.decision is None:  # a sequential decision's interval sets its own least n
        flags.append(f"{n} steady reps < {budget.min_reps}")
    return flags


def decide(rec: Recommendation, eligible: list[Candidate]) -> None:
    """Fill ``rec``'s decision, best, runner-up and ratios from the variants left in the competition."""
    budget = rec.budget
    if not eligible:
        rec.decision = "none"
        return
    if len(eligible) == 1:  # nothing to compare: the budget and the memory check decided
        rec.decision, rec.best = "only", eligible[0]
        rec.caveat = ", ".join(noise_flags(eligible[0], budget)) or None
        return
    paired = interleaved(eligible)
    if paired:
        loaded = [f"{c.label} ({', '.join(f)})" for c in eligible if (f := machine_flags(c))]
        if loaded:
            rec.notes.append(
                f"measured under other work: {'; '.join(loaded)}; the variants ran interleaved, so it fell "
                "on each of them alike, and the interval is over their paired blocks: the ratio holds "
                "for this load"
            )
    for c in eligible:
        flags = noise_flags(c, budget, paired)
        if flags:
            rec.reasons[int(c.row["run_id"])] = ", ".join(flags)
            rec.undecided.append(f"{c.label} ({', '.join(flags)})")
            rec.noisy = rec.noisy or CONTENDED in flags or UNSTABLE in flags
            rec.too_few = rec.too_few or len(c.reps) < budget.min_reps
    if rec.undecided:
        rec.decision = "no_decision"
        return
    keep_aside(rec, eligible)
    rec.sequential = all(c.decision is not None for c in eligible)
    by_speed = sorted(eligible, key=lambda c: -c.median)
    fastest = by_speed[0]
    vs_fastest = {id(c): ratio_of(rec, fastest, c, len(eligible)) for c in by_speed[1:]}
    tied = [fastest] + [c for c in by_speed[1:] if not _faster(vs_fastest[id(c)])]
    if len(tied) == 1:
        rec.decision, rec.best, rec.runner_up = "faster", fastest, by_speed[1]
    else:
        still_open = any(getattr(vs_fastest[id(c)], "state", "") == "open" for c in tied[1:])
        rec.decision = "open" if rec.sequential and still_open else "tie"
        break_tie(rec, tied)
    anchor = rec.leader
    assert anchor is not None
    for c in eligible:
        if c is not anchor:
            rec.ratios[int(c.row["run_id"])] = ratio_of(rec, anchor, c, len(eligible))
    rec.advice = parameter_advice(anchor, eligible, rec.ratios)


def keep_aside(rec: Recommendation, eligible: Sequence[Candidate]) -> None:
    """Set aside the reps taken throttled or in another device state than the group's usual one (the plan's
    ``[decide] off_state``: ``mark`` and ``drop`` leave them out of the comparison, ``keep`` keeps them) and
    say how many, per variant."""
    states = {id(c): block_states(c.row) for c in eligible}
    flags = {id(c): block_flags(c.row) for c in eligible}
    labels = {id(c): c.label for c in eligible}
    kept, lines = set_aside({id(c): c.blocks for c in eligible}, states, flags, labels)
    if not lines:
        return
    keep = rec.decide.off_state == "keep"
    for c in eligible:
        c.kept = None if keep else kept[id(c)]
        rec.set_aside[int(c.row["run_id"])] = sum(len(v) for b, v in c.blocks.items() if b not in kept[id(c)])
    tail = "kept in the comparison ([decide] off_state = keep)" if keep else "left out of the comparison"
    rec.notes += [f"{line}; {tail}" for line in lines]


def parameter_advice(
    best: Candidate, eligible: Sequence[Candidate], ratios: Mapping[int, Ratio]
) -> list[str]:
    """For each competing parameter the condition varies: the best's value against each other value of it on
    the same file, every other parameter as the best's ("threads 1: 12× faster than threads 2 here")."""
    out: list[str] = []
    for name in best.rivals_shown:
        others = [k for k in best.rivals_shown if k != name]
        for c in eligible:
            same_file = c.row["model_label"] == best.row["model_label"]
            if c is best or not same_file or any(c.row.get(k) != best.row.get(k) for k in others):
                continue
            ratio = ratios[int(c.row["run_id"])]
            mine, theirs = f"{name} {_word(best.row.get(name))}", f"{name} {_word(c.row.get(name))}"
            if ratio.decided and ratio.ratio is not None and ratio.ratio > 1.0:
                out.append(f"{mine}: {_times(ratio.ratio)} faster than {theirs} here ({ratio.describe()})")
            else:
                out.append(f"{mine} and {theirs}: within noise here ({ratio.describe()})")
    return out


def _times(ratio: float) -> str:
    return f"{ratio:.0f}×" if ratio >= 10 else f"{ratio:.1f}×"


def ratio_of(rec: Recommendation, a: Candidate, b: Candidate, n_rivals: int) -> Ratio:
    """``a``'s speed over ``b``'s over the blocks they ran in side by side: the sequential decision's
    anytime-valid interval where the group was decided so (each pair at its share of the error, Bonferroni),
    the fixed-n rank interval otherwise."""
    level = rec.budget.confidence_pct
    if rec.sequential:
        level = pair_confidence_pct(level, n_rivals)
        return paired_decision(a.compared, b.compared, level, rec.decide.tie_pct)
    return blocked_ratio(a.compared, b.compared, level)


def _faster(r: Ratio) -> bool:
    return r.low is not None and r.low > 1.0


def _conditions(rows: Sequence[Mapping[str, Any]]) -> dict[Condition, list[Mapping[str, Any]]]:
    groups: dict[Condition, list[Mapping[str, Any]]] = {}
    for row in rows:
        if is_speed_row(row):
            groups.setdefault(Condition.of(row), []).append(row)
    return groups


def recommend(
    rows: Sequence[Mapping[str, Any]], budget: QualityBudget | None = None, rule: Decide | None = None
) -> list[Recommendation]:
    """One recommendation per condition of the speed rows, in the rows' order."""
    budget = budget or QualityBudget()
    out: list[Recommendation] = []
    for condition, members in _conditions(rows).items():
        cands: list[Candidate] = []
        shown = tuple(k for k in RIVAL_PARAMS if len({_word(r.get(k)) for r in members}) > 1)
        for row in members:
            kld, top = quality_of(row, rows)
            ref_label = row.get("quality_reference_label") or row.get("reference_label")
            is_ref = ref_label is not None and row["model_label"] == ref_label
            cands.append(Candidate(row, kld, top, is_ref, shown))
        quality_known = any(c.kld_mean is not None for c in cands)
        for c in cands:  # without a quality run no file is a reference: KLD 0 would be a figure not measured
            c.is_reference = c.is_reference and quality_known
        rec = Recommendation(condition, budget, None, None, quality_known, decide=rule or Decide())
        rec.notes = same_file_notes(members) + file_notes(members) + threads_notes(members)
        rec.shared = tuple((k, members[0].get(k)) for k in RIVAL_PARAMS if k not in shown)
        eligible: list[Candidate] = []
        for c in cands:
            reason = exclusion(c, budget, quality_known)
            if reason is None:
                eligible.append(c)
            else:
                rec.excluded.append(f"{c.label}: {reason}")
                rec.reasons[int(c.row["run_id"])] = reason
        decide(rec, eligible)
        out.append(rec)
    return out


def varying_axes(recs: Sequence[Recommendation]) -> list[str]:
    """The parameters whose value differs between the conditions (each line names them)."""
    values: dict[str, set[Any]] = {}
    for rec in recs:
        for k, v in rec.condition.params:
            values.setdefault(k, set()).add(v)
    return [k for k, vs in values.items() if len(vs) > 1]


def mark_rows(rows: Sequence[dict[str, Any]], recs: Sequence[Recommendation]) -> None:
    """Set each row's recommendation fields: its role ("best", "runner_up" or None), its condition's
    decision, why it did not compete or decide, and its speed against the recommended variant."""
    marks: dict[int, dict[str, Any]] = {}
    for rec in recs:
        for row_id in (int(r["run_id"]) for r in _members(rec, rows)):
            ratio = rec.ratios.get(row_id)
            record = next((r.get("_decision") for r in rows if int(r["run_id"]) == row_id), None) or {}
            marks[row_id] = {
                "recommendation_decision": rec.decision,
                "decision_block_pairs": getattr(ratio, "n_pairs", None),
                "decision_state": getattr(ratio, "state", None),
                "decision_stopped": record.get("stopped") if rec.sequential else None,
                "decision_tie_pct": getattr(ratio, "tie_pct", None),
                "reps_set_aside": rec.set_aside.get(row_id),
                "recommendation_excluded": rec.reasons.get(row_id),
                "tg_ratio_vs_best": round(1 / ratio.ratio, 4) if ratio and ratio.ratio else None,
                "tg_ratio_vs_best_ci_low": round(1 / ratio.high, 4) if ratio and ratio.high else None,
                "tg_ratio_vs_best_ci_high": round(1 / ratio.low, 4) if ratio and ratio.low else None,
            }
        if rec.best is not None:
            marks[int(rec.best.row["run_id"])].update(recommendation="best", tg_ratio_vs_best=1.0)
        if rec.runner_up is not None and rec.best is not None:  # no pick: no runner-up either
            marks[int(rec.runner_up.row["run_id"])]["recommendation"] = "runner_up"
    for row in rows:
        mark = marks.get(int(row["run_id"]), {})
        row["recommendation"] = mark.get("recommendation")
        for key in ("recommendation_decision", "recommendation_excluded", "tg_ratio_vs_best",
                    "tg_ratio_vs_best_ci_low", "tg_ratio_vs_best_ci_high", *DECISION_FIELDS):  # fmt: skip
            row[key] = mark.get(key)


DECISION_FIELDS = (
    "decision_block_pairs", "decision_state", "decision_stopped", "decision_tie_pct", "reps_set_aside",
)  # fmt: skip


def _members(rec: Recommendation, rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in rows if is_speed_row(r) and Condition.of(r) == rec.condition]


def render_recommendations(
    recs: Sequence[Recommendation], warnings: Mapping[str, Sequence[str]] | None = None
) -> list[str]:
    """The lines of every recommendation, then the reference check's warnings (``reference_warnings``)."""
    warnings = warnings or {}
    show_group = len({r.model_group for r in recs} | set(warnings)) > 1
    varying = varying_axes(recs)
    lines: list[str] = []
    for rec in recs:
        lines += rec.lines(show_group=show_group, varying=varying)
    for group, found in warnings.items():
        lines += [f"Reference check{f' ({group})' if show_group else ''}: {w}" for w in found]
    return lines
