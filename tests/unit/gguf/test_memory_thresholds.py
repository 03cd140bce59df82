"""The memory model's sliding-window cache pinned: a sliding-window layer holds the window per sequence
plus one ubatch, padded up to a multiple of 256 cells and never more than the context, as llama.cpp sizes
its SWA cache (llama-kv-cache-iswa: GGML_PAD(n_swa * n_seq_max + n_ubatch, n_pad)). A synthetic shape,
not a model file. Values and reasons: docs/thresholds.md."""

from __future__ import annotations

import pytest

from edgeprof.gguf.memory import kv_bytes, kv_bytes_per_cell, kv_cells
from edgeprof.gguf.shape import ModelShape

pytestmark = pytest.mark.timeout(60)


def _shape(n_swa: int) -> ModelShape:
    """Synthetic: 2 layers, the first with the sliding window; 2 KV heads of 64."""
    return ModelShape(
        arch="synthetic", n_layer=2, n_embd=128, n_head=4, n_head_kv=(2, 2), head_dim_k=64, head_dim_v=64,
        n_vocab=1000, n_ff=512, n_swa=n_swa, swa_layers=(True, False), n_expert=0, n_expert_used=0,
        tensors=(),
    )


@pytest.mark.parametrize(
    ("n_swa", "n_ubatch", "cells"),
    [
        (255, 1, 256),  # 256 needed: exactly one pad
        (256, 1, 512),  # one cell more: the next multiple of 256
        (4096, 1, 4352),  # 4097 -> 4352 (17 · 256), not 4097
        (4096, 512, 4608),  # a whole ubatch on top of the window
    ],
)
def test_swa_cells_are_window_plus_ubatch_padded_to_256(n_swa: int, n_ubatch: int, cells: int) -> None:
    assert kv_cells(_shape(n_swa), 0, 32_768, n_ubatch) == cells
    assert kv_cells(_shape(n_swa), 1, 32_768, n_ubatch) == 32_768  # the full-attention layer: the context


def test_swa_cells_are_per_sequence_and_never_more_than_the_context() -> None:
    assert kv_cells(_shape(4096), 0, 32_768, 1, n_seq_max=2) == 8448  # 2 · 4096 + 1 -> 33 · 256
    assert kv_cells(_shape(4096), 0, 4300, 1) == 4300  # the padded window is longer than the context
    assert kv_cells(_shape(4096), 0, 32_768, 1, swa_full=True) == 32_768  # --swa-full: the whole context


def test_swa_padding_reaches_the_kv_bytes() -> None:
    shape = _shape(4096)
    per_cell = kv_bytes_per_cell(shape, "f16", "f16", range(0, 1))
    assert kv_bytes(shape, 32_768, 1, "f16", "f16", range(0, 1)) == per_cell * 4352
