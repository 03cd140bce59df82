"""How llama-perplexity scores a task (tools/perplexity/perplexity.cpp), restated without llama.cpp.

For every kind, each ending is tokenized with the context in front (with BOS), the tokens all endings share
(the common prefix) are evaluated once for all of them (one sequence id per ending), and an ending's score
is the mean log-probability of its own tokens:

- HellaSwag and multiple choice: sequence ``context + " " + ending``; the first ending token's log-prob
  comes from the logits of the common prefix's last token, every later one from the token before it (the
  last token of each sequence is evaluated without logits). Mean over all ending tokens.
- Winogrande: sequence ``first + choice + second``. Where both sequences go on for more than 3 tokens past
  the common prefix, only the tokens after the choice are scored (``first + choice`` tokenized alone gives
  where they start); otherwise every token past the common prefix. The last token is left out when more
  than one would be scored. Every position is evaluated with logits, and the first log-prob of the second
  choice is read at llama-perplexity's index, which (its source says so, "FIXME") is the last token of the
  first sequence when the choice is not skipped: edgeprof reads the same row, so the two agree.

The predicted ending is the first with the highest mean (ties: the first; Winogrande: choice 2 unless
choice 1 is strictly higher). Tasks are packed into one batch while their tokens fit the context and their
sequences fit the context's ``n_seq_max`` (4, as llama-perplexity sets for these modes), in the same order
and with the same positions and sequence ids, so that llama.cpp computes the same logits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from edgeprof.runners.tasks.data import Task

MIN_TRAILING = 3  # llama-perplexity's k_min_trailing_ctx (Winogrande)
SEQ_MAX = 4  # llama-perplexity: n_parallel = max(4, -np), hence n_seq_max 4
Tokenize = Callable[[str], list[int]]


@dataclass
class Prepared:
    """A task tokenized: one token list per ending, the shared prefix, and what the batch needs."""

    task: Task
    kind: str
    seqs: list[list[int]]
    common_prefix: int
    n_base: list[int] = field(default_factory=list)  # Winogrande: tokens of first + choice

    @property
    def required_tokens(self) -> int:
        return self.common_prefix + sum(len(s) - self.common_prefix for s in self.seqs)


def prepare(kind: str, task: Task, tokenize: Tokenize) -> Prepared:
    seqs = [tokenize(task.sequence(i)) for i in range(len(task.endings))]
    n_min = min(len(s) for s in seqs)
    cp = 0
    while cp < n_min and all(s[cp] == seqs[0][cp] for s in seqs[1:]):
        cp += 1
    if cp == 0:
        raise ValueError(f"task {task.index}: the endings share no first token (no BOS?): cannot be scored")
    if any(len(s) == cp for s in seqs):
        raise ValueError(f"task {task.index}: an ending adds no token past the shared prefix")
    out = Prepared(task=task, kind=kind, seqs=seqs, common_prefix=cp)
    if kind == "winogrande":
        out.n_base = [len(tokenize(task.prefix + c)) for c in task.endings]
    return out


@dataclass
class BatchEntry:
    token: int
    pos: int
    seq_ids: tuple[int, ...]
    output: bool


def batch_groups(tasks: list[Prepared], n_ctx: int, seq_max: int = SEQ_MAX) -> Iterator[tuple[int, int]]:
    """[i0, i1) of each batch, packed as llama-perplexity packs them."""
    i0 = 0
    while i0 < len(tasks):
        n_cur, i1, s0 = 0, i0, 0
        while n_cur + tasks[i1].required_tokens <= n_ctx:
            n_seq = len(tasks[i1].seqs)
            if s0 + n_seq > seq_max:
                if s0 == 0:
                    raise ValueError(f"task {tasks[i1].task.index} has {n_seq} endings, more than {seq_max}")
                break
            s0 += n_seq
            n_cur += tasks[i1].required_tokens
            i1 += 1
            if i1 == len(tasks):
                break
        if i1 == i0:
            raise ValueError(
                f"task {tasks[i0].task.index} needs {tasks[i0].required_tokens} tokens, more than the "
                f"context's {n_ctx}"
            )
        yield i0, i1
        i0 = i1


def build_batch(tasks: list[Prepared]) -> tuple[list[BatchEntry], list[int]]:
    """The batch of one group, and each task's first output row (its ``i_logits``)."""
    entries: list[BatchEntry] = []
    starts: list[int] = []
    n_out, s0 = 0, 0
    for p in tasks:
        starts.append(n_out)
        ids = tuple(range(s0, s0 + len(p.seqs)))
        cp = p.common_prefix
        for i in range(cp):
            entries.append(BatchEntry(p.seqs[0][i], i, ids, i == cp - 1))
        n_out += 1
        every = (
            p.kind == "winogrande"
        )  # Winogrande asks logits of every ending token, the others not the last
        for s, seq in enumerate(p.seqs):
            for i in range(cp, len(seq)):
                out = every or i < len(seq) - 1
                entries.append(BatchEntry(seq[i], i, (s0 + s,), out))
                n_out += out
        s0 += len(p.seqs)
    return entries, starts


def log_softmax_at(row: np.ndarray, token: int) -> float:
    """log p(token) as llama-perplexity's compute_logprobs computes it: in float32, the exponentials summed
    one after the other in float32 (over a 262 k vocabulary that sum rounds away ~1e-4 of the mass, which
    shows in the 4th decimal it prints; a float64 sum would not agree with it)."""
    x = np.asarray(row, dtype=np.float32)
    mx = x.max()
    total = np.cumsum(np.exp(x - mx), dtype=np.float32)[-1]  # cumsum: sequential, as the C++ loop
    return float(np.float32(x[token] - mx) - np.float32(np.log(total)))


def first_log_prob(row: np.ndarray, token: int) -> float:
    """log p(token) as llama-perplexity's softmax() gives it for the first ending token: float32
    exponentials summed in double, the probability stored as float32, its log in float32."""
    x = np.asarray(row, dtype=np.float32)
    e = np.exp(x - x.max())
    p = np.float32(float(e[token]) / float(e.astype(np.float64).sum()))
    return float(np.log(p))


@dataclass
class Scored:
    index: int
    pred: int
    correct: bool
    scores: list[float]
    margin: float  # best mean log-prob minus the next best (how near the decision was)


def _decide(p: Prepared, scores: list[float]) -> Scored:
    if p.kind == "winogrande":
        pred = 0 if scores[0] > scores[1] else 1
    else:
        pred = max(range(len(scores)), key=lambda s: (scores[s], -s))
    ordered = sorted((s for s in scores if not math.isnan(s)), reverse=True)
    margin = ordered[0] - ordered[1] if len(ordered) > 1 else math.inf
    return Scored(p.task.index, pred, pred in p.task.gold, scores, margin)


def _ending_scores(p: Prepared, rows: Callable[[int], np.ndarray], start: int) -> list[float]:
    """HellaSwag / multiple choice: mean log-prob of each ending's tokens."""
    cp, li, out = p.common_prefix, 1, []
    first = rows(start)
    # HellaSwag sums in double, multiple choice in float (llama-perplexity's types)
    acc: type = float if p.kind == "hellaswag" else np.float32
    for seq in p.seqs:
        total, count = acc(first_log_prob(first, seq[cp])), 1
        for j in range(cp, len(seq) - 1):
            total += acc(log_softmax_at(rows(start + li), seq[j + 1]))
            li += 1
            count += 1
        out.append(float(total / acc(count)))
    return out


def _winogrande_scores(p: Prepared, rows: Callable[[int], np.ndarray], start: int) -> list[float]:
    cp = p.common_prefix
    len0, len1 = len(p.seqs[0]), len(p.seqs[1])
    skip = len0 - cp > MIN_TRAILING and len1 - cp > MIN_TRAILING
    out = []
    for s, seq in enumerate(p.seqs):
        base = p.n_base[s] if skip else cp
        rest = len(seq) - base
        last = 1 if (rest > 1 or rest < 0) else 0  # size_t arithmetic: a negative difference is huge
        # the row of position base-1: for the second choice offset by the first sequence's rows, exactly as
        # llama-perplexity indexes it (right when the choice is skipped, see the module docstring)
        li = base - cp if s == 0 else (len0 - cp) + (base - cp)
        total = np.float32(0.0)  # a float in llama-perplexity
        for j in range(base - 1, len(seq) - 1 - last):
            total += np.float32(log_softmax_at(rows(start + li), seq[j + 1]))
            li += 1
        count = len(seq) - base - last
        out.append(float(total / np.float32(count)) if count > 0 else math.nan)
    return out


def score_group(tasks: list[Prepared], rows: Callable[[int], np.ndarray], starts: list[int]) -> list[Scored]:
    """The decisions for one batch's tasks; ``rows(k)`` is the k-th output row's logits."""
    out = []
    for p, start in zip(tasks, starts, strict=True):
        fn = _winogrande_scores if p.kind == "winogrande" else _ending_scores
        out.append(_decide(p, fn(p, rows, start)))
    return out
