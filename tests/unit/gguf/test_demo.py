"""The demo models' F16 file, written with the ``gguf`` package alone: deterministic for a size and seed.
Their llama.cpp quantizations are tested in tests/integration/test_demo_quantized.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgeprof.gguf import build_demo_models, read_gguf_info, read_model_shape, sha256_file, write_f16_gguf


def test_f16_is_byte_for_byte_deterministic(tmp_path: Path) -> None:
    a = write_f16_gguf(tmp_path / "a.gguf", "tiny")
    b = write_f16_gguf(tmp_path / "b.gguf", "tiny")
    assert a.stat().st_size == b.stat().st_size > 0
    assert sha256_file(a) == sha256_file(b)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.gguf", "b.gguf"]  # no .tmp left behind


def test_other_seed_gives_other_bytes(tmp_path: Path) -> None:
    a = write_f16_gguf(tmp_path / "a.gguf", "tiny")
    b = write_f16_gguf(tmp_path / "b.gguf", "tiny", seed=1)
    assert sha256_file(a) != sha256_file(b)


def test_unknown_size_raises(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown demo size 'huge'"):
        write_f16_gguf(tmp_path / "x.gguf", "huge")
    with pytest.raises(ValueError, match="unknown demo size"):
        build_demo_models(tmp_path / "out", "huge")
    assert not (tmp_path / "x.gguf").exists()
    assert not (tmp_path / "x.gguf.tmp").exists()


def test_vocabulary_size_option_writes_that_many_tokens(tmp_path: Path) -> None:
    # Real vocabularies (32 k to 262 k tokens) are where quality-run memory shows; the demo's 1 k hides it.
    path = write_f16_gguf(tmp_path / "v.gguf", "tiny", n_vocab=2048)
    shape = read_model_shape(path)
    assert shape.n_vocab == 2048
    embd = next(t for t in shape.tensors if t.name == "token_embd.weight")
    assert embd.n_elements == 2048 * shape.n_embd
    assert read_gguf_info(path).name == "edgeprof-demo-tiny-v2048-synthetic"  # says it is not the demo
    default = write_f16_gguf(tmp_path / "d.gguf", "tiny")
    assert read_model_shape(default).n_vocab == 1024 and read_gguf_info(default).name == "edgeprof-demo-tiny"
    with pytest.raises(ValueError, match="n_vocab 100 is too small"):
        write_f16_gguf(tmp_path / "x.gguf", "tiny", n_vocab=100)
