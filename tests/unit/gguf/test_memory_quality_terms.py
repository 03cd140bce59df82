"""A quality run's memory terms, hand-computed: which logits llama.cpp keeps and computes per ubatch, the
quality worker's own arrays (computed here from the worker's helpers, so a change there shows), and the
graph's logits sharing the attention's region. The measured peaks are in
tests/integration/test_memory_quality.py."""

from __future__ import annotations

import pytest
from support.memory import predict_cpu

from edgeprof.gguf import (
    MIB,
    QUALITY_ROWS_PER_BLOCK,
    ModelShape,
    TensorInfo,
    quality_outputs,
    quality_scoring_bytes,
)
from edgeprof.runners.quality_math import RECORD, ROWS_PER_BLOCK, n_scored, padded_vocab

BIG_VOCAB = 262_144


def _shape(n_vocab: int = BIG_VOCAB) -> ModelShape:
    """Synthetic: 2 layers, 4 heads of 32 (n_embd 128), a vocabulary of ``n_vocab``."""
    tensors = [TensorInfo("token_embd.weight", n_vocab * 128, n_vocab * 256, "F16", None)]
    tensors += [TensorInfo(f"blk.{i}.ffn_up.weight", 65_536, 131_072, "F16", i) for i in range(2)]
    return ModelShape(
        arch="synthetic",
        n_layer=2,
        n_embd=128,
        n_head=4,
        n_head_kv=(4, 4),
        head_dim_k=32,
        head_dim_v=32,
        n_vocab=n_vocab,
        n_ff=512,
        n_swa=0,
        swa_layers=(False, False),
        n_expert=0,
        n_expert_used=0,
        tensors=tuple(tensors),
    )


def test_logits_kept_and_computed_per_ubatch() -> None:
    # The worker asks for logits from ctx/2 on; llama.cpp cuts the ctx-token batch into ubatches.
    assert quality_outputs(512, 512) == (256, 256)  # one ubatch, its second half
    assert quality_outputs(2048, 512) == (1024, 512)  # ubatches 0 and 1 compute none, 2 and 3 all
    assert quality_outputs(768, 512) == (384, 256)  # 384..511 in the first ubatch, 512..767 in the second
    assert quality_outputs(64, 512) == (32, 32)


def test_the_worker_holds_what_its_code_allocates() -> None:
    assert QUALITY_ROWS_PER_BLOCK == ROWS_PER_BLOCK  # the block arrays below follow the worker's constant
    v = BIG_VOCAB
    for ctx in (512, 2048):
        rows = n_scored(ctx)
        logits = rows * v * 4  # float32 logits of the scored positions
        ref_rows = rows * (2 * padded_vocab(v) + RECORD.itemsize)  # the reference's 16-bit rows
        block = ROWS_PER_BLOCK * v
        # The reference pass: the next chunk's logits beside the last, or a second set of rows beside the
        # block being encoded (5 float64 arrays); a scoring pass: the next logits, or 50 B per block entry.
        reference = logits + ref_rows + max(logits, ref_rows + 40 * block)
        scoring = logits + ref_rows + max(logits, 50 * block)
        assert quality_scoring_bytes(v, ctx, 2) == max(reference, scoring)
        assert quality_scoring_bytes(v, ctx, None) == max(reference, scoring)  # "all chunks" is several
    # ctx 512: 255 rows of 1 MiB logits; the reference pass's second rows + block arrays are the larger
    assert quality_scoring_bytes(v, 512, 2) / MIB == pytest.approx(670.01, abs=0.01)
    # ctx 2048: two logits arrays of 1023 MiB and one set of rows
    assert quality_scoring_bytes(v, 2048, 2) / MIB == pytest.approx(2 * 1023 + 511.5, abs=0.1)


def test_one_chunk_holds_no_second_array() -> None:
    v, rows = BIG_VOCAB, n_scored(512)
    logits, ref_rows = rows * v * 4, rows * (2 * v + RECORD.itemsize)
    # the scoring pass's block arrays (50 B per entry of 16 rows) beat the reference's (40 B) and its
    # rows' bytes copy written to the cache
    assert quality_scoring_bytes(v, 512, 1) == logits + ref_rows + 50 * 16 * v
    assert quality_scoring_bytes(v, 512, 1) < quality_scoring_bytes(v, 512, 2)


def test_a_small_vocabulary_is_led_by_the_summary_imports() -> None:
    # The demo's 1024 tokens at ctx 512: every array is under a MiB; numpy.ma's 9 MiB at the summary lead.
    rows = n_scored(512)
    logits, ref_rows = rows * 1024 * 4, rows * (2 * 1024 + RECORD.itemsize)
    assert quality_scoring_bytes(1024, 512, 2) == logits + ref_rows + 9 * MIB


def test_logits_share_the_attention_region_and_the_output_buffer_keeps_every_row() -> None:
    shape = _shape()
    common = dict(prompt_tokens=512, n_predict=0)
    pred = predict_cpu(shape, n_outputs=256, ubatch_outputs=256, **common)
    logits = 256 * BIG_VOCAB * 4.0
    attn = 512 * 512 * 4.0 * (4 + 1)  # KQ and the mask: smaller than the logits, reused by them
    act = 512 * 7.0 * 128 * 4.0
    work = 512 * 512 * 4 * 2.0  # softmax(KQ) converted to the f16 V cache for KQV
    out_buffer = 256 * BIG_VOCAB * 4.0
    assert attn < logits
    assert pred.compute_cpu_mb * MIB == pytest.approx(logits + act + work + out_buffer)
    assert pred.vocab_mb == pytest.approx(BIG_VOCAB * 150 / MIB)  # llama.cpp's vocabulary, host side
    # flash attention: no KQ and no conversion
    with_fa = {**common, "flash_attn": "on"}
    fa = predict_cpu(shape, n_outputs=256, ubatch_outputs=256, **with_fa)
    assert fa.compute_cpu_mb * MIB == pytest.approx(logits + act + out_buffer)
    # generation keeps one position, in the output buffer and as the graph's last node
    gen = predict_cpu(shape, **{**common, "prompt_tokens": 16, "n_predict": 16})
    row = BIG_VOCAB * 4.0
    attn_gen = 256 * 16 * 4.0 * 5  # 32 cells touched, padded to 256
    graph = max(attn_gen, row) + 16 * 7.0 * 128 * 4
    assert gen.compute_cpu_mb * MIB == pytest.approx(graph + 256 * 16 * 4 * 2.0 + row)
