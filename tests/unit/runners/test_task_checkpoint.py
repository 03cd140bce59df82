"""The per-task checkpoint: what a killed run wrote is read back up to its last complete line, and a file
made under another key (another model, task set or parameters) is never resumed from."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgeprof.runners.tasks import checkpoint

pytestmark = pytest.mark.timeout(10)
KEY = {"model_sha256": "ab", "task": {"task": "hellaswag", "seed": 1}}


def test_written_tasks_are_read_back_and_a_cut_line_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    w = checkpoint.Writer(path, KEY, [])
    w.add([{"i": 0, "correct": True}, {"i": 1, "correct": False}])
    w.close()
    assert [it["i"] for it in checkpoint.read(path, KEY)] == [0, 1]
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"i": 2, "corr')  # the kill came mid-write
    done = checkpoint.read(path, KEY)
    assert [it["i"] for it in done] == [0, 1]
    w = checkpoint.Writer(path, KEY, done)  # resumed: the cut line is gone, new tasks follow
    w.add([{"i": 2, "correct": True}])
    w.close()
    assert [it["i"] for it in checkpoint.read(path, KEY)] == [0, 1, 2]


def test_another_key_or_no_file_resumes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    assert checkpoint.read(path, KEY) == []
    w = checkpoint.Writer(path, KEY, [])
    w.add([{"i": 0, "correct": True}])
    w.close()
    assert checkpoint.read(path, {**KEY, "model_sha256": "cd"}) == []
    path.write_text('{"key": 1}\n{"i": 5}\n')
    assert checkpoint.read(path, KEY) == []
