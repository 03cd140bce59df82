"""Numbers, URLs and input files from the command line, hostile or mistyped: every case of
``support.hostile_cases`` about them is one ``edgeprof: error:`` line (exit 2, no traceback), prints no part
of a password, and leaves the database and the input file as they were (sha256 before and after)."""

from __future__ import annotations

import gzip
import io
import os
from pathlib import Path
from typing import Any

import pytest
from support.hostile_cases import case
from support.hostile_run import TEGRASTATS_LOG, edgeprof_db, invoke, refused, sha
from typer.testing import CliRunner

from edgeprof.cli import app
from edgeprof.telemetry import log_lines, tegrastats_import
from edgeprof.telemetry.tegrastats_import import MAX_LINE_CHARS, TegrastatsImportError, import_log


@pytest.mark.parametrize("case_id", ["report-sweep-huge", "analyse-sweep-huge"])
def test_a_sweep_id_beyond_int64_is_one_line(tmp_path: Path, case_id: str) -> None:
    db = edgeprof_db(tmp_path / "e.db")
    before = sha(db)
    refused(invoke(case(case_id), db=db), "--sweep", "between 1 and")
    assert sha(db) == before


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "--sweep", "99999999999999999999"],
        ["compare", "1", "99999999999999999999"],
        ["sweeps", "--limit", "99999999999999999999"],
        ["report", "--sweep", "-3"],
    ],
)
def test_every_sweep_id_and_count_is_range_checked(tmp_path: Path, argv: list[str]) -> None:
    db = edgeprof_db(tmp_path / "e.db")
    before = sha(db)
    refused(CliRunner().invoke(app, [*argv, "--db", str(db)]), "between")
    assert sha(db) == before


def test_a_keep_raw_beyond_any_date_is_one_line(tmp_path: Path) -> None:
    db = edgeprof_db(tmp_path / "e.db")
    before = sha(db)
    refused(invoke(case("compact-keep-raw-huge"), db=db), "--keep-raw")
    assert sha(db) == before


@pytest.mark.parametrize("value", ["-5", "0", "nan", "inf", "1e308"])
def test_agent_poll_interval_must_be_a_finite_positive_number(tmp_path: Path, value: str) -> None:
    db = edgeprof_db(tmp_path / "e.db")
    queue = tmp_path / "queue"
    queue.mkdir()
    before = sha(db)
    argv = [a.replace("-5", value) for a in case("poll-negative").args(db=db)]
    refused(CliRunner().invoke(app, [*argv, "--queue", str(queue), "--once"]), "--poll-s")
    assert sha(db) == before


def test_an_unparseable_url_is_one_line_without_the_password() -> None:
    line = refused(invoke(case("url-unparseable")), "not a database path or URL")
    assert "pw" not in line


def test_an_unencoded_at_in_a_password_prints_no_part_of_it() -> None:
    result = invoke(case("url-password-with-at"))
    line = refused(result, "%40")
    assert "Pass" not in result.output and "my@" not in result.output
    assert "u:***@127.0.0.1" in line


def test_mask_url_never_shows_a_password_of_a_malformed_url() -> None:
    from edgeprof.storage.db import mask_url, scrub

    for url, password in (
        ("postgresql://u:pw@[::1/db", "pw"),
        ("postgresql://u:my@Pass@127.0.0.1/db", "my@Pass"),
        ("postgresql://u:se:cret@h:abc/db", "se:cret"),
        ("postgresql+psycopg://u:p%40ss@h/db", "p%40ss"),
    ):
        masked = mask_url(url)
        assert password not in masked and "***" in masked, masked
        assert password not in scrub(f"driver said: {password} rejected", url)
    assert mask_url("/var/lib/edgeprof/edgeprof.db") == "/var/lib/edgeprof/edgeprof.db"
    assert mask_url("postgresql://edgeprof@central/fleet") == "postgresql://edgeprof@central/fleet"


def test_import_of_a_corrupt_gzip_is_one_line_and_the_database_unchanged(tmp_path: Path) -> None:
    db = edgeprof_db(tmp_path / "e.db")
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(gzip.compress(b'\xff\xfe{"edgeprof_export": 1}\n\x80\x81\n'))
    truncated = tmp_path / "cut.jsonl.gz"
    truncated.write_bytes(gzip.compress(b'{"edgeprof_export": 1, "schema_version": 1}\n' * 50)[:40])
    for foreign in (broken, truncated):
        before, db_before = sha(foreign), sha(db)
        refused(invoke(case("import-corrupt-gz"), db=db, foreign=foreign), str(foreign))
        assert sha(foreign) == before and sha(db) == db_before


def test_tegrastats_import_reads_a_huge_line_in_bounded_pieces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 4 MiB line without a newline among good lines: skipped, no read ever asks for more than one block,
    and no line is held longer than the line limit (the limit is enforced by how the file is read, not by
    measuring time or memory)."""
    good = TEGRASTATS_LOG.read_bytes()
    log = tmp_path / "huge.log"
    log.write_bytes(good + b"RAM " + b"9" * (4 << 20) + b"\n" + good)
    before = sha(log)
    asked: list[int] = []
    real_read = log_lines._read_block

    def recording_read(fd: int, size: int) -> bytes:
        asked.append(size)
        return real_read(fd, size)

    held: list[int] = []
    real_lines = log_lines.raw_lines

    def recording_lines(*args: Any) -> Any:
        for raw, too_long in real_lines(*args):
            held.append(len(raw))
            yield raw, too_long

    monkeypatch.setattr(log_lines, "_read_block", recording_read)
    monkeypatch.setattr(log_lines, "raw_lines", recording_lines)
    out = io.StringIO()
    n = import_log(log, False, None, out, err=io.StringIO())
    monkeypatch.undo()
    assert n == 2 * len([ln for ln in good.splitlines() if ln.strip() and not ln.startswith(b"#")])
    assert asked and max(asked) <= log_lines.READ_BLOCK_BYTES
    assert held and max(held) <= MAX_LINE_CHARS + 1
    assert sha(log) == before
    only_huge = tmp_path / "only.log"
    only_huge.write_bytes(b"RAM " + b"9" * (4 << 20))
    with pytest.raises(TegrastatsImportError, match="no tegrastats lines"):
        import_log(only_huge, False, None, io.StringIO(), err=io.StringIO())
    assert tegrastats_import.MAX_LINE_CHARS == MAX_LINE_CHARS


def test_tegrastats_huge_line_case_from_the_command_line(tmp_path: Path) -> None:
    log = tmp_path / "huge.log"
    log.write_bytes(b"RAM " + b"9" * (3 << 20))
    refused(invoke(case("tegrastats-huge-line"), log=log), "no tegrastats lines")


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_import_of_a_fifo_or_folder_is_one_line_without_waiting(tmp_path: Path, kind: str) -> None:
    """case import-fifo: refused from its file type (opened non-blocking), not after a read that never
    returns."""
    case("import-fifo")
    db = edgeprof_db(tmp_path / "e.db")
    where = tmp_path / "in.jsonl"
    if kind == "fifo":
        os.mkfifo(where)
    else:
        where.mkdir()
    before = sha(db)
    refused(CliRunner().invoke(app, ["import", str(where), "--db", str(db)]), "not a regular file")
    assert sha(db) == before


def test_agent_push_target_is_parsed_at_start(tmp_path: Path) -> None:
    db = edgeprof_db(tmp_path / "e.db")
    queue = tmp_path / "queue"
    queue.mkdir()
    url = case("url-password-with-at").argv[-1]
    argv = ["agent", "--queue", str(queue), "--once", "--db", str(db), "--push-to", url]
    result = CliRunner().invoke(app, argv)
    refused(result, "--push-to", "%40")
    # the password's text, looked for outside the paths the output names (a temporary directory may hold it)
    assert "Pass" not in result.output.replace(str(tmp_path), "<tmp>")
