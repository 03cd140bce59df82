"""Untrusted GGUF files are read with bounds (agent/gguf/info.py): a header that claims a million entries
is refused without materialising them. Synthetic files only."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from support.gguf_bytes import gguf_key, synthetic_gguf

from edgeprof.gguf import GGUFError, read_gguf_info


def test_a_gguf_of_a_million_empty_strings_is_refused_without_materialising_them(tmp_path: Path) -> None:
    n = 1_000_000
    kv = gguf_key("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, n) + b"\0" * (8 * n)
    path = tmp_path / "synthetic-empty-strings.gguf"
    path.write_bytes(synthetic_gguf(kv, 1))
    with pytest.raises(GGUFError, match="without tensors"):
        read_gguf_info(path)
