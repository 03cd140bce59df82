"""The scoring of hand-checked tasks (fake tokenizer, logits chosen so each log-prob is known), the batch
layout llama-perplexity builds, and the packing of tasks into batches. The end-to-end agreement with
llama-perplexity on a real model is benchmarks/fidelity/tasks_vs_llama_perplexity.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgeprof.runners.tasks.data import Task
from edgeprof.runners.tasks.score import (
    batch_groups,
    build_batch,
    prepare,
    score_group,
)

pytestmark = pytest.mark.timeout(30)
BOS = 0
WORDS = ["<s>", "a", "man", "runs", "fast", "slow", "sits", "eats", "the", "cat", "dog", "hid", "."]
V = len(WORDS)


def tokenize(text: str) -> list[int]:
    return [BOS] + [WORDS.index(w) for w in text.replace(".", " .").split()]


def row(probs: dict[int, float]) -> np.ndarray:
    """Logits whose softmax gives ``probs`` (the rest of the mass spread evenly): log-probs known exactly."""
    rest = (1.0 - sum(probs.values())) / (V - len(probs))
    p = np.array([probs.get(i, rest) for i in range(V)])
    return np.log(p).astype(np.float32) + 3.0  # any shift: the softmax is the same


def test_hellaswag_task_hand_checked() -> None:
    task = Task(index=0, prefix="a man", endings=("runs fast", "runs slow", "sits", "eats"), gold=(1,))
    p = prepare("hellaswag", task, tokenize)
    assert p.seqs[0] == [0, 1, 2, 3, 4] and p.seqs[2] == [0, 1, 2, 6]
    assert p.common_prefix == 3  # <s> a man
    assert p.required_tokens == 3 + 2 + 2 + 1 + 1
    entries, starts = build_batch([p])
    # the prefix once for the 4 sequences, logits only at its last token; each ending's tokens in its own
    # sequence, logits for all but the last
    assert [(e.token, e.pos, e.seq_ids, e.output) for e in entries] == [
        (0, 0, (0, 1, 2, 3), False),
        (1, 1, (0, 1, 2, 3), False),
        (2, 2, (0, 1, 2, 3), True),
        (3, 3, (0,), True),
        (4, 4, (0,), False),
        (3, 3, (1,), True),
        (5, 4, (1,), False),
        (6, 3, (2,), False),
        (7, 3, (3,), False),
    ]
    assert starts == [0]
    # output rows: 0 = after "man", 1 = after "runs" (seq 0), 2 = after "runs" (seq 1)
    rows = {
        0: row({3: 0.5, 6: 0.2, 7: 0.1}),  # P(runs) .5, P(sits) .2, P(eats) .1
        1: row({4: 0.4, 5: 0.1}),  # seq 0: P(fast | runs) .4
        2: row({4: 0.1, 5: 0.8}),  # seq 1: P(slow | runs) .8
    }
    (s,) = score_group([p], lambda k: rows[k], starts)
    want = [
        (math.log(0.5) + math.log(0.4)) / 2,
        (math.log(0.5) + math.log(0.8)) / 2,
        math.log(0.2),
        math.log(0.1),
    ]
    assert s.scores == pytest.approx(want, abs=1e-6)
    assert s.pred == 1 and s.correct
    assert s.margin == pytest.approx(want[1] - want[0], abs=1e-6)


def winogrande_task() -> Task:
    # "the cat hid . the" / "the dog hid . the": the choice at token 2, 3 tokens after it
    return Task(index=0, prefix="the ", endings=("cat", "dog"), gold=(1,), joiner="", suffix=" hid . the")


def test_winogrande_scores_only_the_tokens_after_the_choice() -> None:
    p = prepare("winogrande", winogrande_task(), tokenize)
    assert p.seqs == [[0, 8, 9, 11, 12, 8], [0, 8, 10, 11, 12, 8]]
    assert p.common_prefix == 2 and p.n_base == [3, 3]
    entries, starts = build_batch([p])
    assert [e.output for e in entries] == [False, True] + [True] * 8  # every ending token has logits
    # rows: 0 after "the"(prefix), 1..4 seq 0 after cat,hid,.,the; 5..8 seq 1 after dog,hid,.,the
    # more than 3 tokens past the prefix on both sides: the choice is skipped, the last token left out:
    # seq 0 scores P(hid|cat) (row 1) and P(.|hid) (row 2); seq 1 P(hid|dog) (row 5) and P(.|hid) (row 6)
    rows = {k: row({}) for k in range(9)}
    rows[1], rows[2] = row({11: 0.3}), row({12: 0.9})
    rows[5], rows[6] = row({11: 0.6}), row({12: 0.9})
    (s,) = score_group([p], lambda k: rows[k], starts)
    assert s.scores == pytest.approx(
        [(math.log(0.3) + math.log(0.9)) / 2, (math.log(0.6) + math.log(0.9)) / 2]
    )
    assert s.pred == 1 and s.correct


def test_winogrande_without_skipping_reads_llama_perplexitys_row_for_the_second_choice() -> None:
    # 2 tokens after the choice: not skipped, every token past the prefix scored (the last one left out)
    task = Task(index=0, prefix="the ", endings=("cat", "dog"), gold=(0,), joiner="", suffix=" hid")
    p = prepare("winogrande", task, tokenize)
    assert p.seqs == [[0, 8, 9, 11], [0, 8, 10, 11]]
    _, starts = build_batch([p])
    rows = {k: row({}) for k in range(5)}  # 0 prefix; 1,2 seq 0 (cat, hid); 3,4 seq 1 (dog, hid)
    rows[0] = row({9: 0.7, 10: 0.05})  # P(cat|the), P(dog|the) from the prefix's row
    rows[2] = row({10: 0.25})  # seq 0's last row: llama-perplexity reads P(dog) here (its FIXME)
    (s,) = score_group([p], lambda k: rows[k], starts)
    assert s.scores == pytest.approx([math.log(0.7), math.log(0.25)])


def test_ties_and_multiple_right_answers() -> None:
    task = Task(index=4, prefix="a man", endings=("sits", "eats"), gold=(0, 1))
    p = prepare("multiple-choice", task, tokenize)
    (s,) = score_group([p], lambda k: row({6: 0.3, 7: 0.3}), build_batch([p])[1])
    assert s.pred == 0 and s.correct and s.margin == pytest.approx(0.0, abs=1e-6)  # a tie: the first


def test_tasks_are_packed_as_llama_perplexity_packs_them() -> None:
    hs = prepare("hellaswag", Task(0, "a man", ("runs fast", "runs slow", "sits", "eats"), (1,)), tokenize)
    wg = prepare("winogrande", winogrande_task(), tokenize)
    # 4 sequence ids a context: one HellaSwag task a batch, two Winogrande tasks
    assert list(batch_groups([hs, hs, hs], 2048)) == [(0, 1), (1, 2), (2, 3)]
    assert list(batch_groups([wg, wg, wg], 2048)) == [(0, 2), (2, 3)]
    assert list(batch_groups([wg, wg, wg], wg.required_tokens)) == [(0, 1), (1, 2), (2, 3)]  # the context
    with pytest.raises(ValueError, match="needs 9 tokens, more than the context's 8"):
        list(batch_groups([hs], 8))
    five = prepare(
        "multiple-choice", Task(0, "a man", ("runs", "sits", "eats", "hid", "cat"), (0,)), tokenize
    )
    with pytest.raises(ValueError, match="5 endings, more than 4"):
        list(batch_groups([five], 2048))
