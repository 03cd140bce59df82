"""The demo models quantized by llama.cpp read back as what they claim, and a second build keeps them.
The F16 writer itself is tested without llama.cpp in tests/unit/gguf/test_demo.py."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

from edgeprof.gguf import DEMO_QUANTS, build_demo_models, read_gguf_info

QUANTS = ("F16", "Q8_0", "Q5_K_M", "Q4_K_M")


def test_built_models_read_back(tiny_models: dict[str, Path]) -> None:
    assert tuple(tiny_models) == QUANTS
    assert set(DEMO_QUANTS) == set(QUANTS[1:])
    infos = {q: read_gguf_info(tiny_models[q]) for q in QUANTS}
    assert {q: i.quant_type for q, i in infos.items()} == {q: q for q in QUANTS}
    assert {i.arch for i in infos.values()} == {"llama"}
    n_params = {i.n_params for i in infos.values()}
    assert len(n_params) == 1 and n_params.pop() > 0
    bpw = [infos[q].bits_per_weight or 0.0 for q in QUANTS]
    assert all(hi > lo > 0 for hi, lo in itertools.pairwise(bpw)), bpw  # strictly decreasing
    assert {i.n_layers for i in infos.values()} == {2}
    assert {i.vocab_size for i in infos.values()} == {1024}


def test_build_keeps_existing_files(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    # Building into a folder that already has the files leaves them untouched (no re-quantization).
    for path in tiny_models.values():
        shutil.copy(path, tmp_path / path.name)
    before = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    again = build_demo_models(tmp_path, "tiny")
    assert {q: p.name for q, p in again.items()} == {q: p.name for q, p in tiny_models.items()}
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == before
