"""The agent's plan queue: which dropped plan is complete, and where a plan goes once it ran or was refused.

People drop plans into a group-writable folder, by hand and at any time, so nothing about an entry is
trusted:

* a plan is taken only once it is complete: renamed into the queue (``mv``: its mtime is older than the
  settle time), or unchanged in size and mtime for ``settle_s`` seconds (a ``cp`` still writing was once read
  half-written, refused and deleted);
* a plan is never deleted: a refused one is moved, whole, into ``failed/`` (the entry itself, not what was
  read of it), a finished one is archived in ``done/`` as it ran, and the queue entry is removed only if it
  is still the file that was read (a plan replaced while it ran stays queued and runs next);
* a plan that cannot be archived (a name too long for the archive, ``failed/`` replaced by a symlink, a
  read-only folder) is set aside as ``<name>.held`` and archiving is retried with a growing delay; the
  agent goes on with the next plan instead of spinning on that one (it once logged 8 207 refusals in 15 s).
  Where it was going (``done/`` or ``failed/``, and why it was refused) is written beside it as
  ``<name>.held.why``, so an agent started later takes up the retries of the plans an earlier one set aside.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from edgeprof.safefs import UnsafePath, archive, create_new, open_dir, read_fd, read_nofollow, remove_entry

log = logging.getLogger("edgeprof.agent")

DEFAULT_SETTLE_S = 3.0
HELD_SUFFIX = ".held"
WHY_SUFFIX = ".why"  # beside a held plan: its archive folder on the first line, the refusal's reason after
MAX_WHY_BYTES = 64 << 10
# A held plan found without its note (an agent that stopped between the two writes): refused, said so.
UNKNOWN_REFUSAL = "set aside by an earlier run of the agent, which could not archive it (see that run's log)"
# The first retry of a plan that could not be archived, doubled each time up to the last.
RETRY_FIRST_S = 30.0
RETRY_MAX_S = 3600.0
# The archive name is the plan's stem, a time stamp, a counter and ".error.txt": within NAME_MAX (255).
MAX_STEM_BYTES = 200
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class Identity:
    """What says a queue entry is still the file that was read: a replaced or rewritten one differs."""

    dev: int
    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> Identity:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass
class _Held:
    """A plan that could not be archived, kept aside until a retry succeeds."""

    path: Path  # the .held file in the queue, or the entry itself when even setting aside failed
    folder: str
    error: str | None
    data: bytes  # what ran (done/) or b"" (failed/: the held file itself is archived)
    retry_at: float
    delay: float
    identity: Identity | None = None


@dataclass
class PlanQueue:
    folder: Path
    settle_s: float = DEFAULT_SETTLE_S
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    _seen: dict[str, tuple[Identity, float]] = field(default_factory=dict)
    _held: list[_Held] = field(default_factory=list)
    _adopted: bool = False

    # -- which plan is next -----------------------------------------------------------------------------
    def scan(self) -> tuple[Path | None, bool]:
        """(the oldest complete plan or None, whether an incomplete one is still settling)."""
        try:
            names = [p for p in self.folder.glob("*.toml")]
        except OSError:
            return None, False
        if not self._adopted:
            self._adopt_held()
        ready: list[tuple[int, str, Path]] = []
        settling = False
        skipped = {h.path for h in self._held}
        now = self.clock()
        seen: dict[str, tuple[Identity, float]] = {}
        for p in names:
            if p in skipped:
                continue
            try:
                st = p.lstat()
            except OSError:
                continue
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                continue  # a folder, a FIFO: never read (a FIFO would block the reader)
            ident = Identity.of(st)
            first = self._seen.get(p.name)
            since = first[1] if first is not None and first[0] == ident else now
            seen[p.name] = (ident, since)
            if self._complete(st, now - since):
                ready.append((st.st_mtime_ns, p.name, p))
            else:
                settling = True
        self._seen = seen
        ready.sort()
        return (ready[0][2] if ready else None), settling

    def _complete(self, st: os.stat_result, unchanged_s: float) -> bool:
        # Last written settle_s ago (a plan renamed in, an agent restarted), or seen unchanged that long by
        # this agent (a clock that jumped back would leave a fresh mtime "in the future" for ever).
        return self.wall() - st.st_mtime >= self.settle_s or unchanged_s >= self.settle_s

    # -- reading ----------------------------------------------------------------------------------------
    def read(self, path: Path, limit: int) -> tuple[bytes, Identity]:
        """At most ``limit`` + 1 bytes of the entry, never through a symlink, never blocking.

        Raises UnsafePath (symlink, not a regular file), FileNotFoundError, or ChangedWhileRead when the
        file changed while it was read (still being written: it is read again once it settles).
        """
        try:
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                why = f"{path.name} is a symbolic link; copy the file instead"
                raise UnsafePath(exc.errno, why) from None
            raise
        try:
            before = os.fstat(fd)
            if not stat.S_ISREG(before.st_mode):
                raise UnsafePath(errno.EINVAL, f"{path.name} is not a regular file")
            data = read_fd(fd, limit)
            after = os.fstat(fd)
        finally:
            os.close(fd)
        ident = Identity.of(after)
        if ident != Identity.of(before) or (len(data) <= limit and len(data) != after.st_size):
            self._seen.pop(path.name, None)
            raise ChangedWhileRead(path.name)
        return data, ident

    def still(self, path: Path, ident: Identity | None) -> bool:
        """True when the entry is still the file that was read."""
        try:
            return ident is not None and Identity.of(path.lstat()) == ident
        except OSError:
            return False

    # -- after the plan ---------------------------------------------------------------------------------
    def refuse(self, path: Path, ident: Identity | None, error: str, stamp: str) -> None:
        """Move the refused entry itself into ``failed/`` with its ``.error.txt``: nothing of it is lost.

        An entry that changed since it was read (a writer still at it) is left to settle and be read again.
        """
        if ident is not None and not self.still(path, ident):
            log.warning("plan %s changed while it was checked; it is read again once it settles", path.name)
            return
        try:
            target = self._move_into(path, "failed", stamp, error)
        except OSError as exc:
            self._set_aside(path, "failed", error, b"", ident, exc)
            return
        log.info("plan %s moved to %s", path.name, target)

    def finish(self, path: Path, ident: Identity | None, data: bytes, stamp: str) -> None:
        """Archive the text that ran in ``done/``; the entry goes with it only if it is still that text."""
        if self.still(path, ident):
            try:
                target = self._move_into(path, "done", stamp, None)
            except OSError as exc:
                self._set_aside(path, "done", None, data, ident, exc)
                return
            log.info("plan %s moved to %s", path.name, target)
            return
        # Removed or replaced while it ran: the text that ran is archived, a new plan there stays queued.
        try:
            target = archive(self.folder, "done", archive_name(path.name, stamp), data, None)
        except OSError as exc:
            log.error("cannot archive plan %s into done/: %s (its text is kept in its sweep)", path.name, exc)
            return
        log.info("plan %s (as it ran) archived as %s", path.name, target)

    def drop_link(self, path: Path, error: str, stamp: str) -> None:
        """A symlinked plan is refused unread: its error goes to ``failed/`` and the link (never its
        target, which may be anyone's file) is removed; a link that cannot be archived is set aside."""
        try:
            target = archive(self.folder, "failed", archive_name(path.name, stamp), b"", error)
        except OSError as exc:
            self._set_aside(path, "failed", error, b"", None, exc)
            return
        remove_entry(path)
        log.info("plan %s moved to %s", path.name, target)

    def _move_into(self, path: Path, folder: str, stamp: str, error: str | None) -> Path:
        """Rename the entry (a symlink is moved itself) into ``folder``, under a name that fits."""
        qfd = open_dir(self.folder)
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, 0o750, dir_fd=qfd)
            try:
                dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=qfd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    where = self.folder / folder
                    raise UnsafePath(exc.errno, f"{where} is a symbolic link or not a folder") from None
                raise
            try:
                name = _rename_new(qfd, path.name, dfd, archive_name(_queued_name(path.name), stamp))
                if error is not None:
                    note = (error + "\n").encode("utf-8", "backslashreplace")
                    create_new(dfd, f"{name.rsplit('.', 1)[0]}.error.txt", note)
            finally:
                os.close(dfd)
        finally:
            os.close(qfd)
        return self.folder / folder / name

    # -- plans that could not be archived ---------------------------------------------------------------
    def _set_aside(
        self, path: Path, folder: str, error: str | None, data: bytes, ident: Identity | None, why: OSError
    ) -> None:
        held = path
        aside = _held_name(path.name)
        try:
            qfd = open_dir(self.folder)
            try:
                aside = _rename_new(qfd, path.name, qfd, aside)
                _write_why(qfd, aside + WHY_SUFFIX, folder, error)
            finally:
                os.close(qfd)
            held = self.folder / aside
        except OSError as exc:  # not even that: skipped by name, in memory, until the retry
            log.error("cannot set plan %s aside either: %s", path.name, exc)
        log.error(
            "cannot archive plan %s into %s/: %s; %s, archiving retried in %.0f s",
            path.name,
            folder,
            why,
            f"set aside as {held.name}" if held != path else "skipped",
            RETRY_FIRST_S,
        )
        entry = _Held(held, folder, error, data, self.clock() + RETRY_FIRST_S, RETRY_FIRST_S, ident)
        self._held.append(entry)

    def retry_held(self, stamp: str) -> None:
        """Try again to archive every set-aside plan whose retry is due; the delay doubles on failure."""
        now = self.clock()
        for entry in list(self._held):
            if entry.retry_at > now:
                continue
            try:
                self._move_into(entry.path, entry.folder, stamp, entry.error)
            except FileNotFoundError:
                self._held.remove(entry)  # removed by someone meanwhile
                continue
            except OSError as exc:
                entry.delay = min(entry.delay * 2, RETRY_MAX_S)
                entry.retry_at = now + entry.delay
                log.warning(
                    "plan %s still cannot be archived (%s); next try in %.0f s",
                    entry.path.name,
                    exc,
                    entry.delay,
                )
                continue
            self._held.remove(entry)
            with contextlib.suppress(OSError):
                remove_entry(entry.path.with_name(entry.path.name + WHY_SUFFIX))
            log.info("plan %s archived into %s/ at last", entry.path.name, entry.folder)

    def _adopt_held(self) -> None:
        """Take up the plans an earlier agent set aside (``*.held``): their archiving is retried at once,
        into the folder their note names."""
        self._adopted = True
        try:
            found = sorted(self.folder.glob("*" + HELD_SUFFIX))
        except OSError:
            return
        mine = {h.path for h in self._held}
        for path in found:
            if path in mine or not path.is_file() or path.is_symlink():
                continue
            folder, error = _read_why(path.with_name(path.name + WHY_SUFFIX))
            self._held.append(_Held(path, folder, error, b"", self.clock(), RETRY_FIRST_S))
            log.info("plan %s was set aside by an earlier run; archiving it into %s/", path.name, folder)

    @property
    def held(self) -> list[Path]:
        return [h.path for h in self._held]


class ChangedWhileRead(OSError):
    """The plan changed while it was read: someone is still writing it."""

    def __init__(self, name: str) -> None:
        super().__init__(errno.EAGAIN, f"{name} changed while it was read")


def archive_name(name: str, stamp: str) -> str:
    """``<stem>-<stamp><suffix>``, the stem cut (at a character) so the name and its ``.error.txt`` fit."""
    path = Path(encodable_name(name))
    stem, suffix = path.stem, path.suffix
    raw = stem.encode("utf-8")
    if len(raw) > MAX_STEM_BYTES:
        stem = raw[:MAX_STEM_BYTES].decode("utf-8", errors="ignore")
    return f"{stem}-{stamp}{suffix}"


def encodable_name(name: str) -> str:
    """``name`` as valid UTF-8: a byte that is not (``os.listdir`` keeps it as a lone surrogate, which no
    encoder takes) becomes ``_``. The plan is archived, and reported, by this name; its own stays readable
    in the log as the escapes of ``safe_text``."""
    raw = name.encode("utf-8", "surrogateescape")
    return raw.decode("utf-8", "replace").replace("\ufffd", "_")


def _queued_name(name: str) -> str:
    """The plan's own name, without the suffix it was set aside with."""
    return name.removesuffix(HELD_SUFFIX)


def _held_name(name: str) -> str:
    name = encodable_name(name)
    raw = name.encode("utf-8")
    if len(raw) + len(HELD_SUFFIX) + 4 > 255:
        name = raw[: 255 - len(HELD_SUFFIX) - 4].decode("utf-8", errors="ignore")
    return name + HELD_SUFFIX


def _write_why(qfd: int, name: str, folder: str, error: str | None) -> None:
    """The note beside a held plan; a plan set aside without it is refused by a later agent, said so."""
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o640, dir_fd=qfd)
    except OSError as exc:
        log.warning("cannot note where held plan %s goes: %s", name, exc)
        return
    try:
        os.write(fd, f"{folder}\n{error or ''}".encode("utf-8", "backslashreplace"))
    finally:
        os.close(fd)


def _read_why(path: Path) -> tuple[str, str | None]:
    """(archive folder, refusal reason) from a held plan's note; ``failed/`` with UNKNOWN_REFUSAL without."""
    try:
        text = read_nofollow(path, MAX_WHY_BYTES)[:MAX_WHY_BYTES].decode("utf-8", errors="replace")
    except OSError:
        return "failed", UNKNOWN_REFUSAL
    folder, _, error = text.partition("\n")
    if folder == "done":
        return "done", None
    return "failed", error.strip() or UNKNOWN_REFUSAL


def _rename_new(src_fd: int, src: str, dst_fd: int, dst: str) -> str:
    """Rename ``src`` to ``dst`` (or ``dst`` with a counter) without replacing anything there; returns
    the name used. A hard link is exclusive (EEXIST), so a file planted at the name is never replaced;
    where links are not supported, a name found free is renamed onto."""
    stem, dot, suffix = dst.partition(".")
    for attempt in range(1000):
        candidate = dst if attempt == 0 else f"{stem}-{attempt}{dot}{suffix}"
        try:
            os.link(src, candidate, src_dir_fd=src_fd, dst_dir_fd=dst_fd, follow_symlinks=False)
        except FileExistsError:
            continue
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK):
                raise
            if _exists(dst_fd, candidate):
                continue
            os.rename(src, candidate, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
            return candidate
        os.unlink(src, dir_fd=src_fd)
        return candidate
    raise FileExistsError(errno.EEXIST, f"no free name for {dst}")


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True
