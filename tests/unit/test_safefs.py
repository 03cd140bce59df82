"""Safe writes (agent/safefs.py): in the group-writable queue folder and beside a database, nothing is
written through a planted symbolic link, read through one, or made world-readable."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgeprof.safefs import archive, read_nofollow, replace_file, replace_report


def test_replace_file_replaces_a_planted_symlink_instead_of_writing_through_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    plan = tmp_path / "demo.toml"
    plan.symlink_to(victim)
    replace_file(plan, b"name = 'demo'\n")
    assert victim.read_text() == "keep" and not plan.is_symlink() and plan.read_bytes() == b"name = 'demo'\n"


def test_archive_never_writes_through_a_planted_symlink(tmp_path: Path) -> None:
    queue = tmp_path / "queue"
    (queue / "failed").mkdir(parents=True)
    victim = tmp_path / "results.db"
    victim.write_bytes(b"precious")
    (queue / "failed" / "p-1.error.txt").symlink_to(victim)
    (queue / "failed" / "p-1.toml").symlink_to(victim)
    stored = archive(queue, "failed", "p-1.toml", b"name = 'p'\n", "problem")
    assert victim.read_bytes() == b"precious"
    assert stored.name != "p-1.toml" and stored.read_bytes() == b"name = 'p'\n"
    errors = [p for p in (queue / "failed").iterdir() if p.name.endswith(".error.txt") and not p.is_symlink()]
    assert len(errors) == 1 and errors[0].read_text() == "problem\n"
    assert oct(errors[0].stat().st_mode & 0o777) == oct(0o640)  # never world-readable
    # A folder swapped for a link is refused.
    (queue / "done").symlink_to(tmp_path)
    with pytest.raises(OSError, match="symbolic link"):
        archive(queue, "done", "p.toml", b"x", None)


def test_a_symlinked_plan_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("root:$6$hash")
    link = tmp_path / "plan.toml"
    link.symlink_to(secret)
    with pytest.raises(OSError, match="symbolic link"):
        read_nofollow(link, 1000)


def test_replace_report_does_not_follow_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "t.txt"
    target.write_text("keep")
    link = tmp_path / "r.html"
    link.symlink_to(target)
    with pytest.raises(OSError, match="symbolic link"):
        replace_report(link, b"<html>", ())
    assert target.read_text() == "keep"
