"""Safe writes: files the agent and the CLI create, in folders other people can write to.

The queue folder is group-writable by design (people drop plans there). Anything created in it, or next to a
database, is therefore created exclusively and without following links: a symlink planted at
``failed/<name>.error.txt`` must not make the agent overwrite the file it points to (it once overwrote a
results DB). Folders are opened with O_NOFOLLOW|O_DIRECTORY and files created relative to them, so a folder
swapped for a symlink is refused as well. The queue lock is an flock on the queue folder itself, which
cannot be planted, with a side file that only says who holds it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

# Created files: owner read/write, group read (the service's group reads results); never world-readable.
FILE_MODE = 0o640
DIR_MODE = 0o750
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
OWNER_FILE = ".edgeprof-agent.owner"


class UnsafePath(OSError):
    """A path that is a symlink, or not what it should be; the message names it."""


def open_dir(path: Path, create: bool = False) -> int:
    """An fd of the folder ``path`` itself (never of what a symlink there points to)."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, DIR_MODE)
    try:
        return os.open(path, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePath(exc.errno, f"{path} is a symbolic link or not a folder; not used") from None
        raise


def create_new(dir_fd: int, name: str, data: bytes) -> str:
    """Create ``name`` (or, if taken, ``name`` with a counter before its suffix) in the folder; returns it.

    O_CREAT|O_EXCL never opens an existing file or follows a symlink at that name: a planted link stays as
    it is and the data goes to a new name beside it.
    """
    stem, dot, suffix = name.partition(".")
    for attempt in range(1000):
        candidate = name if attempt == 0 else f"{stem}-{attempt}{dot}{suffix}"
        try:
            fd = os.open(
                candidate,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC,
                FILE_MODE,
                dir_fd=dir_fd,
            )
        except FileExistsError:
            continue
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        return candidate
    raise FileExistsError(errno.EEXIST, f"no free name for {name}")


def write_new(path: Path, data: bytes | str) -> Path:
    """Create a new file at ``path`` (or beside it, if taken) without following links; returns its path."""
    raw = data.encode() if isinstance(data, str) else data
    dir_fd = open_dir(path.parent)
    try:
        return path.parent / create_new(dir_fd, path.name, raw)
    finally:
        os.close(dir_fd)


def read_fd(fd: int, limit: int, chunk_bytes: int = 65536) -> bytes:
    """At most ``limit`` + 1 bytes from ``fd``: one byte more than allowed tells a caller the file is too big,
    and nothing larger is ever held."""
    chunks: list[bytes] = []
    left = limit + 1
    while left > 0:
        chunk = os.read(fd, min(left, chunk_bytes))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_nofollow(path: Path, limit: int) -> bytes:
    """At most ``limit`` + 1 bytes of a regular file that is not a symlink (UnsafePath otherwise)."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(exc.errno, f"{path.name} is a symbolic link; copy the file instead") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePath(errno.EINVAL, f"{path.name} is not a regular file")
        return read_fd(fd, limit)
    finally:
        os.close(fd)


def open_regular(path: Path | str) -> int:
    """An fd of the regular file at ``path`` (a symlink to one is fine), opened without blocking.

    A plan may name any file (a quality text, a model): a FIFO opened for reading blocks until someone
    writes, ``/dev/zero`` never ends, a folder is no text. O_NONBLOCK makes the open itself return at once
    for a FIFO, and fstat then refuses anything that is not a regular file (UnsafePath, in one line).
    """
    fd = os.open(path, os.O_RDONLY | _CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    try:
        import stat

        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device"
            if stat.S_ISSOCK(mode):
                kind = "a socket"
            raise UnsafePath(errno.EINVAL, f"{path} is {kind}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: Path | str, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (UnsafePath for anything else or more)."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise UnsafePath(errno.EFBIG, f"{path} has {size} bytes, more than the {limit} allowed")
        data = read_fd(fd, limit, chunk_bytes=1 << 20)
    finally:
        os.close(fd)
    if len(data) > limit:  # grew while read
        raise UnsafePath(errno.EFBIG, f"{path} has more than the {limit} bytes allowed")
    return data


def archive(queue: Path, folder: str, name: str, data: bytes, error: str | None) -> Path:
    """Store the plan text that ran under ``queue/folder/name`` (+ ``.error.txt``), exclusively, no links."""
    qfd = open_dir(queue)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, DIR_MODE, dir_fd=qfd)
        try:
            dfd = os.open(folder, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=qfd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafePath(exc.errno, f"{queue / folder} is a symbolic link or not a folder") from None
            raise
    finally:
        os.close(qfd)
    try:
        stored = create_new(dfd, name, data)
        if error is not None:
            stem = stored.rsplit(".", 1)[0]
            create_new(dfd, f"{stem}.error.txt", (error + "\n").encode("utf-8", "backslashreplace"))
    finally:
        os.close(dfd)
    return queue / folder / stored


def remove_entry(path: Path) -> None:
    """Remove a queue entry (a symlink is removed itself, never its target); gone already is fine."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


class QueueLocked(RuntimeError):
    def __init__(self, queue: Path, holder: str) -> None:
        self.queue = queue
        self.holder = holder
        super().__init__(f"queue {queue} is already served by another edgeprof agent ({holder})")


class QueueLock:
    """flock(LOCK_EX) on the queue folder's own fd: released by the kernel when the holder dies."""

    def __init__(self, queue: Path, fd: int) -> None:
        self.queue = queue
        self.fd = fd

    def release(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(OWNER_FILE, dir_fd=self.fd)
        with contextlib.suppress(OSError):
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _holder(fd: int) -> str:
    try:
        ofd = os.open(OWNER_FILE, os.O_RDONLY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
    except OSError:
        return "holder unknown"
    try:
        text = os.read(ofd, 200).decode("utf-8", errors="replace").strip()
    finally:
        os.close(ofd)
    return text or "holder unknown"


def lock_queue(
    queue: Path, *, wait: bool = False, poll_s: float = 1.0, on_wait: Callable[[str], None] | None = None
) -> QueueLock:
    fd = open_dir(queue)
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            holder = _holder(fd)
            if not wait:
                os.close(fd)
                raise QueueLocked(queue, holder) from None
            if on_wait is not None and not told:
                on_wait(holder)
                told = True
            time.sleep(poll_s)
    # Who holds it, for the next agent's one-line message; replaced, never written through a link.
    with contextlib.suppress(OSError):
        os.unlink(OWNER_FILE, dir_fd=fd)
    with contextlib.suppress(OSError):
        create_new(fd, OWNER_FILE, f"pid {os.getpid()} on {socket.gethostname()}\n".encode())
    return QueueLock(queue, fd)


@contextlib.contextmanager
def queue_locked(queue: Path, **kwargs: object) -> Iterator[QueueLock]:
    lock = lock_queue(queue, **kwargs)  # type: ignore[arg-type]
    try:
        yield lock
    finally:
        lock.release()


def replace_file(path: Path, data: bytes) -> None:
    """Replace a file edgeprof owns (the demo plan) via temp file + rename: a symlink there is replaced by
    the new file, never written through."""
    dir_fd = open_dir(path.parent)
    tmp = f".{path.name}.{os.getpid()}.tmp"
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        create_new(dir_fd, tmp, data)
        os.rename(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    finally:
        os.close(dir_fd)


# --- files written by name: exports, reports ---------------------------------------------------------------


@dataclass(frozen=True)
class OutputKind:
    """What a writer may replace: an earlier file of its own kind, told by how that file begins."""

    what: str
    markers: tuple[bytes, ...]
    anywhere_in_head: bool = False  # a report's marker sits in its <head>, not at byte 0

    def recognises(self, head: bytes) -> bool:
        if head.startswith(b"\x1f\x8b"):  # gzip: look at what it holds
            try:
                head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 4096)
            except zlib.error:
                return False
        if self.anywhere_in_head:
            return any(marker in head for marker in self.markers)
        return any(head.startswith(marker) for marker in self.markers)


# How an earlier report is recognised: the generator tag, or the title every report so far began with.
REPORT_MARKERS = (b'<meta name="generator" content="edgeprof">', b"<title>edgeprof sweep ")
REPORT = OutputKind("report", REPORT_MARKERS, anywhere_in_head=True)
EXPORT = OutputKind("export", (b'{"edgeprof_export"',))
# node_exporter's textfile: every family edgeprof writes is named edgeprof_*, and the text opens with its HELP
PROM = OutputKind("metrics textfile", (b"# HELP edgeprof_",))
_SQLITE_SIDE_FILES = ("", "-wal", "-shm", "-journal")
_ANOTHER = "(give another file name)"


def _refuse_database(out: Path, st: os.stat_result | None, protect: tuple[Path, ...]) -> None:
    """The open database and its side files, by name (they may not exist yet) and by inode (a hard link)."""
    where = Path(os.path.abspath(out.parent)).resolve() / out.name
    for guarded in protect:
        base = Path(os.path.abspath(guarded.parent)).resolve() / guarded.name
        for side in _SQLITE_SIDE_FILES:
            named = Path(f"{base}{side}")
            same = where == named
            if not same and st is not None:
                with contextlib.suppress(OSError):
                    g = os.stat(named)
                    same = (g.st_dev, g.st_ino) == (st.st_dev, st.st_ino)
            if same:
                what = "the database itself" if not side else f"the database's {side[1:]} file"
                raise UnsafePath(errno.EEXIST, f"{out} is {what}; nothing was written {_ANOTHER}")


def check_output(out: Path, kind: OutputKind, protect: tuple[Path, ...] = ()) -> None:
    """Raise UnsafePath unless ``out`` may be (re)written as ``kind``: not the database (``protect``) nor
    its -wal/-shm/-journal, not a symbolic link (even one to nothing), not a folder or device, and if it
    exists, an earlier file of this kind or empty."""
    try:
        st: os.stat_result | None = os.lstat(out)
    except FileNotFoundError:
        st = None
    _refuse_database(out, st, protect)
    if st is None:
        return
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePath(errno.ELOOP, f"{out} is a symbolic link; nothing was written {_ANOTHER}")
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePath(errno.EINVAL, f"{out} is not a regular file; nothing was written {_ANOTHER}")
    if st.st_size and not kind.recognises(read_nofollow(out, 4096)[:4096]):
        raise UnsafePath(
            errno.EEXIST,
            f"{out} exists and is not an earlier edgeprof {kind.what}; nothing was written (give another "
            "file name, or remove it first)",
        )


@contextlib.contextmanager
def output_file(out: Path, kind: OutputKind, protect: tuple[Path, ...] = ()) -> Iterator[BinaryIO]:
    """A binary file to write ``out`` into: checked first (``check_output``), written as a new temp file in
    the same folder and renamed over ``out`` only when the block ends without an error. A failed or
    interrupted write leaves ``out`` as it was and no temp file behind."""
    check_output(out, kind, protect)
    dir_fd = open_dir(out.parent)
    tmp = ""
    try:
        tmp = create_new(dir_fd, f".{out.name}.{os.getpid()}.tmp", b"")
        fd = os.open(tmp, os.O_WRONLY | _NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
        with contextlib.suppress(FileNotFoundError):  # the earlier file's mode: a chmod 600 stays 600
            os.fchmod(fd, stat.S_IMODE(os.stat(out.name, dir_fd=dir_fd, follow_symlinks=False).st_mode))
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.rename(tmp, out.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        tmp = ""
    finally:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
        os.close(dir_fd)


def replace_report(out: Path, data: bytes, protect: tuple[Path, ...] = ()) -> None:
    """Write ``data`` to ``out`` via a new temp file + rename in the same folder.

    Refused (UnsafePath): ``out`` is one of ``protect`` (or its -wal/-shm), a symlink, or an existing file
    that is not an earlier edgeprof report (``report --html edgeprof.db`` once replaced the DB with HTML).
    """
    with output_file(out, REPORT, protect) as fh:
        fh.write(data)
