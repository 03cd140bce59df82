"""The per-task results of a task run as they are scored: a JSON-lines file, one task a line, fsynced after
each batch, so that a run killed half-way resumes where it stopped instead of scoring every task again.

Line 1 is the key (what the scores depend on: the model file, the task file, the subset, the llama.cpp
parameters); a file made for another key is started afresh. A last line cut short by the kill is dropped.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any


def _lines(path: Path) -> list[str]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    return lines[:-1]  # a complete line ends with a newline; what follows the last one is a cut-off write


def read(path: Path, key: dict[str, Any]) -> list[dict[str, Any]]:
    """The finished tasks of ``path`` made under ``key``, in scoring order ([] when none or another key)."""
    lines = _lines(path)
    if not lines:
        return []
    try:
        head = json.loads(lines[0])
    except ValueError:
        return []
    if not isinstance(head, dict) or head.get("key") != key:
        return []
    out: list[dict[str, Any]] = []
    for line in lines[1:]:
        try:
            item = json.loads(line)
        except ValueError:
            break
        if not isinstance(item, dict) or item.get("i") != len(out):
            break
        out.append(item)
    return out


class Writer:
    """Appends scored tasks after the ``done`` ones already kept (the file rewritten to exactly those)."""

    def __init__(self, path: Path, key: dict[str, Any], done: list[dict[str, Any]]) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps({"key": key}, sort_keys=True) + "\n")
            for item in done:
                fh.write(json.dumps(item, sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        self.fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the run

    def add(self, items: list[dict[str, Any]]) -> None:
        for item in items:
            self.fh.write(json.dumps(item, sort_keys=True) + "\n")
        self.fh.flush()
        os.fsync(self.fh.fileno())

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.fh.close()
