"""GGUF files as edgeprof meets them on a device (agent/gguf/info.py): a hostile header is one line through
the CLI, the bounded reader agrees with the ``gguf`` package on real files, and dropping a model's pages
from the cache really evicts them (a cold start must be cold). Real tiny models, real processes."""

from __future__ import annotations

import ctypes
import mmap
import os
import shutil
import struct
from pathlib import Path

import pytest
from support.gguf_bytes import gguf_key, synthetic_gguf
from support.runs import edgeprof, one_line_error

from edgeprof.gguf import GGUFError, drop_page_cache, read_gguf_info


def test_a_gguf_array_claiming_2_40_items_is_one_line_and_bounded(tmp_path: Path) -> None:
    path = tmp_path / "synthetic-huge-array.gguf"
    # tokenizer.ggml.tokens: array of u32 (type 4) claiming 2^40 items, in a 1 KB file
    kv = gguf_key("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 4, 1 << 40)
    path.write_bytes(synthetic_gguf(kv, 1).ljust(1024, b"\0"))
    with pytest.raises(GGUFError, match=r"claims|left in the file"):
        read_gguf_info(path)
    # and through the CLI: one line, exit 2
    plan = tmp_path / "p.toml"
    plan.write_text(
        f'[matrix]\nmodels = ["{path}"]\n[[workload]]\nname = "w"\nprompt_tokens = 8\nn_predict = 8\n'
    )
    assert "synthetic-huge-array.gguf" in one_line_error(edgeprof("run", str(plan), "--check"))


def test_bounded_reader_agrees_with_the_gguf_package_on_real_files(tiny_models: dict[str, Path]) -> None:
    import gguf

    for path in tiny_models.values():
        info = read_gguf_info(path)
        reader = gguf.GGUFReader(str(path), "r")
        assert info.n_params == sum(int(t.n_elements) for t in reader.tensors)
        assert info.tensor_bytes == sum(int(t.n_bytes) for t in reader.tensors)
        assert info.vocab_size == len(reader.fields["tokenizer.ggml.tokens"].data)
        assert info.context_length == int(reader.fields["llama.context_length"].contents())


def resident_share(path: Path) -> float:
    """Share of the file's pages in the page cache (mincore on a fresh mapping faults nothing in)."""
    size = path.stat().st_size
    page = mmap.PAGESIZE
    n = (size + page - 1) // page
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long
    ]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value)
        try:
            vec = (ctypes.c_ubyte * n)()
            assert libc.mincore(ctypes.c_void_p(addr), size, vec) == 0
            return sum(v & 1 for v in vec) / n
        finally:
            libc.munmap(ctypes.c_void_p(addr), size)
    finally:
        os.close(fd)


def test_drop_page_cache_really_evicts_the_file(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    """Mutant: posix_fadvise removed while drop_page_cache still returns True (the run says "dropped")."""
    copy = tmp_path / "m.gguf"
    shutil.copyfile(tiny_models["Q4_K_M"], copy)
    with copy.open("rb+") as fh:
        os.fsync(fh.fileno())  # clean pages: only clean pages can be dropped
        fh.read()
    if resident_share(copy) < 0.9:
        pytest.skip("this filesystem does not keep the file in the page cache (tmpfs/overlay?)")
    assert drop_page_cache(copy)
    assert resident_share(copy) < 0.5
