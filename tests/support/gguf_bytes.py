"""Synthetic GGUF files with hostile headers, byte by byte (no real tool writes them): what the bounded
reader must refuse without reading or allocating what the header claims."""

from __future__ import annotations

import struct


def synthetic_gguf(kvs: bytes, n_kv: int, n_tensors: int = 0, tail: bytes = b"") -> bytes:
    """A GGUF v3 header claiming ``n_tensors`` tensors and ``n_kv`` key-value pairs, then ``kvs`` and
    ``tail`` as they are."""
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + kvs + tail


def gguf_key(name: str) -> bytes:
    """A GGUF string (u64 length, then the bytes): how every key begins."""
    return struct.pack("<Q", len(name)) + name.encode()
