"""``bits_per_weight``: from the GGUF tensor sizes the sweep records with the model file (so a large
vocabulary or metadata block cannot reorder two variants), from the file size for files recorded before."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgeprof.gguf import read_gguf_info, write_f16_gguf
from edgeprof.report.run_row import bits_per_weight
from edgeprof.storage.db import new_session, open_engine
from edgeprof.storage.models import ModelFile
from edgeprof.sweep import get_or_create_model_file


def test_the_sweep_records_the_tensor_sizes_and_the_report_reads_them(tmp_path: Path) -> None:
    model = write_f16_gguf(tmp_path / "tiny-f16.gguf", "tiny")
    info = read_gguf_info(model)
    assert 0 < info.tensor_bytes < info.size_bytes  # the file has metadata and a tokenizer on top
    with new_session(open_engine(tmp_path / "b.db")) as s:
        mf = get_or_create_model_file(s, info)
        assert mf.tensor_bytes == info.tensor_bytes
        assert bits_per_weight(mf) == pytest.approx(info.tensor_bytes * 8 / info.n_params)
        assert bits_per_weight(mf) == pytest.approx(16.0, abs=0.5)  # F16 matrices, F32 norms
        mf.tensor_bytes = None  # as a row recorded before the tensor sizes were stored
        s.flush()
        again = get_or_create_model_file(s, info)  # unchanged file: not hashed again, but filled in
        assert again.id == mf.id and again.tensor_bytes == info.tensor_bytes


def test_a_file_recorded_without_tensor_sizes_falls_back_to_the_file_size() -> None:
    old = ModelFile(path="/m.gguf", sha256="a" * 64, size_bytes=1_250_000, mtime_ns=1, n_params=2_000_000)
    assert bits_per_weight(old) == 5.0
    assert bits_per_weight(ModelFile(path="/m.gguf", sha256="a" * 64, size_bytes=1, mtime_ns=1)) is None
    assert bits_per_weight(None) is None
