"""Untrusted GGUF files are read with bounds (agent/gguf/info.py): a header that claims a million entries
is refused without materialising them. Synthetic files only."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from support.gguf_bytes import gguf_key, synthetic_gguf
from support.hostile_cases import case

from edgeprof.gguf import GGUFError, read_gguf_info


def test_a_gguf_of_a_million_empty_strings_is_refused_without_materialising_them(tmp_path: Path) -> None:
    n = 1_000_000
    kv = gguf_key("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, n) + b"\0" * (8 * n)
    path = tmp_path / "synthetic-empty-strings.gguf"
    path.write_bytes(synthetic_gguf(kv, 1))
    with pytest.raises(GGUFError, match="without tensors"):
        read_gguf_info(path)


def _sparse(path: Path, head: bytes, size: int) -> Path:
    with path.open("wb") as fh:
        fh.write(head)
        fh.truncate(size)  # the rest reads as zeros without taking disk
    return path


def test_a_2_gb_sparse_gguf_of_nested_empty_arrays_is_refused_without_walking_it(tmp_path: Path) -> None:
    from edgeprof.gguf import read_chat_fields

    hostile = case("gguf-nested-arrays")
    n = 1 << 24  # as many items as an array may have; every item an empty array (12 zero bytes)
    kv = gguf_key("x") + struct.pack("<IIQ", 9, 9, n)
    path = _sparse(tmp_path / "nested.gguf", synthetic_gguf(kv, 1), 2 << 30)
    with pytest.raises(GGUFError, match="arrays of arrays"):
        read_gguf_info(path)
    with pytest.raises(ValueError, match="arrays of arrays"):
        read_chat_fields(path)
    assert hostile.area == "plan inputs"


def test_string_items_past_the_walk_budget_are_refused(tmp_path: Path) -> None:
    n = (1 << 22) + 1  # one more empty string than the whole header may hold
    kv = gguf_key("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, n)
    path = _sparse(tmp_path / "strings.gguf", synthetic_gguf(kv, 1), 64 << 20)
    with pytest.raises(GGUFError, match="string items"):
        read_gguf_info(path)


def test_a_model_path_that_is_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    from edgeprof.gguf import read_chat_fields, read_header

    hostile = case("gguf-fifo")
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    for read in (read_header, read_chat_fields):
        with pytest.raises(ValueError, match="FIFO"):
            read(fifo)  # opening a FIFO for reading blocked until a writer came: for ever
    with pytest.raises(GGUFError, match="not a regular file"):
        read_gguf_info(fifo)
    assert hostile.id == "gguf-fifo"
