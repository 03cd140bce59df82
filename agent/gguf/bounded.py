"""A GGUF header and tensor table read with bounds: untrusted files cost O(header) time and no memory growth.

``gguf.GGUFReader`` materialises every metadata array (an object per vocabulary entry: ~8 s of CPU and
780 MB RSS on a 262k-vocabulary model) and believes every count it reads: a 1 KB file whose array claims
2^40 items grows memory without end. Here every count and length is checked against the bytes left in the
file *before* anything is read, arrays are skipped (only their length is kept), and implausible counts are
refused outright, so a hostile file is one line of error and a good file a few milliseconds.

Counts checked against the file's size are not enough on their own: a 2 GB sparse file of nested empty
arrays holds every count it declares, and walking it item by item took minutes and 1.6 GB of mapped pages.
So the walk's cost is bounded by what a header really is: the header must end within MAX_HEADER_BYTES of
the start (the largest real ones are a few tens of MB: the vocabulary and merges), string-array items are
counted against MAX_WALK_ITEMS for the whole file, and arrays of arrays (which llama.cpp refuses) against
MAX_NESTED_ITEMS.

Format (GGUF v2/v3, little-endian): magic, u32 version, u64 n_tensors, u64 n_kv; each KV: string key, u32
type, value; each tensor: string name, u32 n_dims, u64 dims[n_dims], u32 ggml type, u64 offset; tensor data
starts at the next multiple of ``general.alignment`` (default 32). A string is u64 length + bytes.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.safefs import UnsafePath, open_regular

_SCALAR = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"
}
_STRING, _ARRAY = 8, 9
_MIN_SIZE = {**{t: struct.calcsize(f) for t, f in _SCALAR.items()}, _STRING: 8, _ARRAY: 12}

# Far above any real model (vocabularies ~262k, merges ~500k, tensors ~30k in the largest MoE models), far
# below what a hostile count would make us do.
MAX_ARRAY_ITEMS = 1 << 24
MAX_KV = 1 << 16
MAX_TENSORS = 1 << 20
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_KEPT_STRING = 4096  # strings longer than this are skipped, not kept
# a chat template is kept whole up to this (real ones are 1-20 KB; tool-calling templates reach ~100 KB)
MAX_TEMPLATE_BYTES = 1 << 20
# The walk's own budget (see the module docstring): ~30 MB and ~1 M string items in the largest real models.
MAX_HEADER_BYTES = 256 << 20
MAX_WALK_ITEMS = 1 << 22
MAX_NESTED_ITEMS = 1 << 16


class BoundedGGUFError(ValueError):
    """Why the file is not a readable GGUF, in a few words (the caller adds the path)."""


@dataclass
class GGUFHeader:
    version: int
    fields: dict[str, Any] = field(default_factory=dict)  # scalars and short strings
    array_len: dict[str, int] = field(default_factory=dict)  # arrays: their item count only
    # string arrays: where their first item starts, to fetch single items (a token's text) by index
    string_array_at: dict[str, int] = field(default_factory=dict)
    # long strings asked for (the chat template) that were longer than their limit: their length
    too_long: dict[str, int] = field(default_factory=dict)
    # name, dims, ggml type, offset from data_start
    tensors: list[tuple[str, tuple[int, ...], int, int]] = field(default_factory=list)
    data_start: int = 0


class _Cursor:
    def __init__(self, data: mmap.mmap | bytes) -> None:
        self.data = data
        self.pos = 0
        # Everything the header says must fit in its first MAX_HEADER_BYTES; the tensor data after it is
        # never walked, so a larger file costs no more than a header of that size.
        self.file_size = len(data)
        self.size = min(self.file_size, MAX_HEADER_BYTES)
        self.items = 0  # string-array items walked so far
        self.nested = 0  # items of arrays of arrays walked so far

    def spend(self, n: int, what: str, nested: bool = False) -> None:
        if nested:
            self.nested += n
            if self.nested > MAX_NESTED_ITEMS:
                raise BoundedGGUFError(f"{what}: more than {MAX_NESTED_ITEMS} items in arrays of arrays")
        else:
            self.items += n
            if self.items > MAX_WALK_ITEMS:
                raise BoundedGGUFError(f"{what}: more than {MAX_WALK_ITEMS} string items in the header")

    def left(self) -> int:
        return self.size - self.pos

    def need(self, n: int, what: str) -> None:
        if n < 0 or n > self.left():
            if self.size < self.file_size and self.pos + n > self.size:
                raise BoundedGGUFError(f"{what}: the header would be larger than {MAX_HEADER_BYTES} bytes")
            raise BoundedGGUFError(f"{what} needs {n} bytes but only {self.left()} are left in the file")

    def scalar(self, fmt: str, what: str) -> Any:
        n = struct.calcsize(fmt)
        self.need(n, what)
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += n
        return value

    def string(self, what: str, keep: bool = True, limit: int = MAX_KEPT_STRING) -> str | None:
        n = self.scalar("<Q", what)
        self.need(n, what)
        start = self.pos
        self.pos += n
        if not keep or n > limit:
            return None
        return bytes(self.data[start : start + n]).decode("utf-8", errors="replace")

    def skip_value(self, vtype: int, what: str, depth: int = 0) -> None:
        if vtype in _SCALAR:
            self.need(_MIN_SIZE[vtype], what)
            self.pos += _MIN_SIZE[vtype]
        elif vtype == _STRING:
            self.string(what, keep=False)
        elif vtype == _ARRAY:
            self.array(what, depth + 1)
        else:
            raise BoundedGGUFError(f"{what}: unknown value type {vtype}")

    def array(self, what: str, depth: int = 0) -> int:
        """Skip an array (checked against the bytes left before each step); returns its item count."""
        if depth > 4:
            raise BoundedGGUFError(f"{what}: arrays nested deeper than 4")
        etype = self.scalar("<I", what)
        count = self.scalar("<Q", what)
        if etype not in _MIN_SIZE:
            raise BoundedGGUFError(f"{what}: unknown array item type {etype}")
        if count > MAX_ARRAY_ITEMS:
            raise BoundedGGUFError(f"{what}: array claims {count} items (more than {MAX_ARRAY_ITEMS})")
        # Every item takes at least its minimum size: a count the file cannot hold is refused unread.
        self.need(count * _MIN_SIZE[etype], f"{what} ({count} items)")
        if etype in _SCALAR:
            self.pos += count * _MIN_SIZE[etype]
        elif etype == _STRING:
            self.spend(count, what)
            data, pos, size = self.data, self.pos, self.size
            unpack = struct.unpack_from
            for _ in range(count):
                if pos + 8 > size:
                    raise BoundedGGUFError(f"{what}: string array runs past the end of the file")
                (n,) = unpack("<Q", data, pos)
                pos += 8 + n
                if pos > size:
                    raise BoundedGGUFError(f"{what}: string array runs past the end of the file")
            self.pos = pos
        else:
            self.spend(count, what, nested=True)
            for _ in range(count):
                self.skip_value(etype, what, depth)
        return int(count)


@contextmanager
def _mapped(path: str | Path) -> Iterator[_Cursor]:
    # A regular file only: a FIFO named as a model would block the open, a device never ends.
    try:
        fd = open_regular(path)
    except UnsafePath as exc:
        raise BoundedGGUFError((exc.strerror or str(exc)).removeprefix(f"{path} is ")) from None
    with os.fdopen(fd, "rb") as fh:
        size = fh.seek(0, 2)
        if size == 0:
            raise BoundedGGUFError("empty file")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            yield _Cursor(mm)


def read_header(path: str | Path) -> GGUFHeader:
    """Header, metadata (scalars and short strings; arrays as lengths) and tensor table of a GGUF file."""
    with _mapped(path) as cur:
        return _parse(cur)


@dataclass(frozen=True)
class ChatFields:
    chat_template: str | None
    bos_text: str | None  # the text of the BOS / EOS token (tokenizer.ggml.tokens[id]); None if absent
    eos_text: str | None
    add_bos: bool | None


def read_chat_fields(path: str | Path) -> ChatFields:
    """The chat template (whole, up to MAX_TEMPLATE_BYTES) and the BOS/EOS token texts of a GGUF, read with
    the same bounds as ``read_header``: the vocabulary is walked, not materialised."""
    with _mapped(path) as cur:
        header = _parse(cur, long_keys=frozenset({"tokenizer.chat_template"}))

        def token_text(id_key: str) -> str | None:
            tid = header.fields.get(id_key)
            at = header.string_array_at.get("tokenizer.ggml.tokens")
            count = header.array_len.get("tokenizer.ggml.tokens", 0)
            if not isinstance(tid, int) or isinstance(tid, bool) or at is None or not 0 <= tid < count:
                return None
            return _string_item(cur, at, tid)

        template = header.fields.get("tokenizer.chat_template")
        if "tokenizer.chat_template" in header.too_long:  # there is one: it is too long, not missing
            raise BoundedGGUFError(
                f"tokenizer.chat_template is {header.too_long['tokenizer.chat_template']} bytes, more than "
                f"the {MAX_TEMPLATE_BYTES} read"
            )
        add_bos = header.fields.get("tokenizer.ggml.add_bos_token")
        return ChatFields(
            chat_template=template if isinstance(template, str) else None,
            bos_text=token_text("tokenizer.ggml.bos_token_id"),
            eos_text=token_text("tokenizer.ggml.eos_token_id"),
            add_bos=add_bos if isinstance(add_bos, bool) else None,
        )


def _string_item(cur: _Cursor, at: int, index: int) -> str:
    """Item ``index`` of a string array whose first item starts at ``at`` (already bounds-checked whole by
    ``_Cursor.array``, so every length on the way is known to stay inside the file)."""
    pos = at
    for _ in range(index):
        (n,) = struct.unpack_from("<Q", cur.data, pos)
        pos += 8 + n
    (n,) = struct.unpack_from("<Q", cur.data, pos)
    if n > MAX_KEPT_STRING:
        raise BoundedGGUFError(f"token {index} is {n} bytes long")
    return bytes(cur.data[pos + 8 : pos + 8 + n]).decode("utf-8", errors="replace")


def _parse(cur: _Cursor, long_keys: frozenset[str] = frozenset()) -> GGUFHeader:
    cur.need(4, "magic")
    if bytes(cur.data[0:4]) != b"GGUF":
        raise BoundedGGUFError("not a GGUF file (bad magic)")
    cur.pos = 4
    version = cur.scalar("<I", "version")
    if version not in (2, 3):
        raise BoundedGGUFError(f"unsupported GGUF version {version}")
    n_tensors = cur.scalar("<Q", "tensor count")
    n_kv = cur.scalar("<Q", "metadata count")
    if n_kv > MAX_KV or n_kv * 13 > cur.left():  # key length 8 + type 4 + at least 1 byte of value
        raise BoundedGGUFError(f"metadata count {n_kv} is impossible for a file of {cur.file_size} bytes")
    if n_tensors > MAX_TENSORS or n_tensors * 24 > cur.left():
        raise BoundedGGUFError(f"tensor count {n_tensors} is impossible for a file of {cur.file_size} bytes")
    header = GGUFHeader(version=version)
    for i in range(n_kv):
        key = cur.string(f"metadata key {i}") or f"#{i}"
        vtype = cur.scalar("<I", f"metadata {key!r} type")
        what = f"metadata {key!r}"
        if vtype in _SCALAR:
            header.fields[key] = cur.scalar(_SCALAR[vtype], what)
        elif vtype == _STRING:
            start = cur.pos
            value = cur.string(what, limit=MAX_TEMPLATE_BYTES if key in long_keys else MAX_KEPT_STRING)
            if value is not None:
                header.fields[key] = value
            elif key in long_keys:
                header.too_long[key] = cur.pos - start - 8
        elif vtype == _ARRAY:
            if cur.left() >= 12 and struct.unpack_from("<I", cur.data, cur.pos)[0] == _STRING:
                header.string_array_at[key] = cur.pos + 12  # after the item type (u32) and count (u64)
            header.array_len[key] = cur.array(what)
        else:
            raise BoundedGGUFError(f"{what}: unknown value type {vtype}")
    for i in range(n_tensors):
        name = cur.string(f"tensor {i} name") or f"#{i}"
        n_dims = cur.scalar("<I", f"tensor {name!r} dims")
        if not 1 <= n_dims <= MAX_DIMS:
            raise BoundedGGUFError(f"tensor {name!r} has {n_dims} dimensions")
        dims = tuple(int(cur.scalar("<Q", f"tensor {name!r} shape")) for _ in range(n_dims))
        ggml_type = cur.scalar("<I", f"tensor {name!r} type")
        offset = cur.scalar("<Q", f"tensor {name!r} offset")
        header.tensors.append((name, dims, int(ggml_type), int(offset)))
    align = header.fields.get("general.alignment", 32)
    if not isinstance(align, int) or align <= 0 or align & (align - 1):
        raise BoundedGGUFError(f"general.alignment {align!r} is not a power of two")
    header.data_start = (cur.pos + align - 1) // align * align
    return header
