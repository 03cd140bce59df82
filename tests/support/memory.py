"""The memory prediction of one CPU config, for tests: ``predict_memory`` with what the cases share filled
in (ctx 512, no offload, batch and ubatch 512, f16 KV, flash attention off, mmap on, a 16-token prompt and
16 generated) and any of it overridden by keyword, so each case says only what it is about."""

from __future__ import annotations

from typing import Any

from edgeprof.gguf.memory import MemoryPrediction, predict_memory
from edgeprof.gguf.shape import ModelShape

CPU_CONFIG: dict[str, Any] = dict(
    n_ctx=512,
    n_gpu_layers=0,
    n_batch=512,
    n_ubatch=512,
    type_k="f16",
    type_v="f16",
    flash_attn="off",
    use_mmap=True,
    prompt_tokens=16,
    n_predict=16,
)


def predict_cpu(shape: ModelShape, **overrides: Any) -> MemoryPrediction:
    return predict_memory(shape, **{**CPU_CONFIG, **overrides})
