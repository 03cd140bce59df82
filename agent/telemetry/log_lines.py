"""Reading a log file a line at a time, whatever it is and however it ends: the layer under every log
importer (``tegrastats_import``, ``log_formats``).

Only a regular, non-empty file is read (opened without blocking: a FIFO, a device, a folder or a kernel file
such as ``/proc/kmsg`` is refused at once, never waited on), only the bytes it held when opened, in blocks
of ``READ_BLOCK_BYTES``. A line ends at LF, CR LF or a lone CR; a UTF-8 byte-order mark before the first
line is dropped; a line longer than ``MAX_LINE_CHARS`` is cut and flagged, never held whole.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

# A real line is under 2 kB; a longer one is not tegrastats output and is skipped without parsing.
MAX_LINE_CHARS = 64 * 1024
# Files are read in blocks of this size, never by whole lines (a line may have no end).
READ_BLOCK_BYTES = 64 * 1024
UTF8_BOM = b"\xef\xbb\xbf"
_EOL = re.compile(rb"\r\n?|\n")


class TegrastatsImportError(Exception):
    """Bad input for an import; ``str()`` is one line, fit for ``edgeprof: error: <msg>``."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def open_log(path: Path) -> tuple[int, int]:
    """An fd of the regular file at ``path`` and its size when opened. Opened without blocking, so a FIFO's
    open returns at once and fstat refuses it (and a device, a socket, a folder) from its type; a regular
    file of size 0 is refused too: it is empty, or a kernel file (``/proc/kmsg``) whose read waits for
    data that may never come. Only the bytes the file held when opened are ever read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise TegrastatsImportError(f"{path}: no such file") from None
    except OSError as exc:
        raise TegrastatsImportError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TegrastatsImportError(f"{path} is {_kind_of(st.st_mode)}, not a regular file (not a log)")
        if st.st_size == 0:
            raise TegrastatsImportError(
                f"{path} is empty (size 0: an empty file or a kernel file such as /proc/kmsg), not a log"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def check_path(path: Path) -> None:
    """Raise ``TegrastatsImportError`` unless ``path`` is a non-empty regular file that can be opened."""
    fd, _size = open_log(path)
    os.close(fd)


def _read_block(fd: int, size: int) -> bytes:
    return os.read(fd, size)


def raw_lines(fd: int, size: int, limit: int) -> Iterator[tuple[bytes, bool]]:
    """(line without its end, longer than ``limit``) of the first ``size`` bytes of ``fd``: a line ends at
    LF, CR LF or a lone CR (a log written on another system, or by a tool that ends lines with CR). Read in
    blocks of ``READ_BLOCK_BYTES``; a line longer than ``limit`` is kept only as its first ``limit + 1``
    bytes, so memory stays bounded whatever the file holds."""
    head = bytearray()
    length = 0
    left = size
    skip_lf = False  # the block before ended with CR: an LF opening this one belongs to it
    while left > 0:
        block = _read_block(fd, min(READ_BLOCK_BYTES, left))
        if not block:
            break
        left -= len(block)
        start = 0
        if skip_lf and block[:1] == b"\n":
            start = 1
        skip_lf = False
        for end in _EOL.finditer(block, start):
            piece = block[start : end.start()]
            if len(head) <= limit:
                head += piece[: limit + 1 - len(head)]
            length += len(piece)
            yield bytes(head), length > limit
            head.clear()
            length = 0
            start = end.end()
            skip_lf = end.group() == b"\r" and start == len(block)
        piece = block[start:]
        if len(head) <= limit:
            head += piece[: limit + 1 - len(head)]
        length += len(piece)
    if length:
        yield bytes(head), length > limit


def text_lines(path: Path) -> Iterator[tuple[int, str, bool]]:
    """(1-based line number, text without its line end, too long) of every line; raises on binary data or a
    read error. A UTF-8 byte-order mark before the first line is dropped. A line longer than MAX_LINE_CHARS
    bytes comes cut (tegrastats writes ASCII: bytes are characters), flagged; the caller skips it."""
    fd, size = open_log(path)
    try:
        for number, (raw, too_long) in enumerate(raw_lines(fd, size, MAX_LINE_CHARS), start=1):
            if number == 1 and raw.startswith(UTF8_BOM):
                raw = raw[len(UTF8_BOM) :]
            if b"\x00" in raw:
                raise TegrastatsImportError(f"{path} is binary (NUL byte on line {number}), not a log")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                if not too_long:
                    raise TegrastatsImportError(
                        f"{path} is not text (invalid UTF-8 on line {number}), not a log"
                    ) from None
                text = raw.decode("utf-8", errors="replace")  # cut inside a character: skipped anyway
            yield number, text, too_long
    except OSError as exc:
        raise TegrastatsImportError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def content_lines(path: Path) -> Iterator[str]:
    """The lines of a log that hold something: stripped, not blank, no ``#`` comment, not too long."""
    for _number, text, too_long in text_lines(path):
        stripped = text.strip()
        if stripped and not stripped.startswith("#") and not too_long:
            yield stripped


@contextlib.contextmanager
def quiet_parser() -> Iterator[None]:
    """The tegrastats parser's log muted: it names each unknown token with an excerpt of its line, and a
    file that is no log (a password file behind a link) must never be echoed. What was not understood is
    counted and said by the import instead."""
    parser_log = logging.getLogger("edgeprof.collectors.tegrastats_parse")
    was = parser_log.disabled
    parser_log.disabled = True
    try:
        yield
    finally:
        parser_log.disabled = was
