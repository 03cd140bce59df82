"""Peak resident memory of a process from procfs, used by the runner (polling its child) and the worker."""

from __future__ import annotations


def vm_hwm_mb(pid: int | str = "self", proc_root: str = "/proc") -> float | None:
    """A process's peak resident set (``VmHWM``) in MiB; None once it is gone or a zombie.

    Not ``wait4``'s ``ru_maxrss``: Linux carries the high-water mark of the memory image a process had
    before ``exec`` into it, so a child (v)forked from a 150 MB agent would report the agent's RSS.
    """
    try:
        with open(f"{proc_root}/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        return None
    return None
