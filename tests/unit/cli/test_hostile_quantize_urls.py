"""Hostile and careless input to the surfaces added lately: ``models quantize`` (planted links, someone's file
under an output's name, control characters in names), PostgreSQL URLs (a silent server, a percent-encoded
password key), an sqlite URL with a query, a damaged database's message, ``bench -m`` of a GGUF whose counts
llama.cpp cannot hold, ``agent --poll-s 1e-300`` and the agent's state after it exited. Each a one-line
refusal (exit 2) or the job done, with every file that was there before unchanged (sha256).

Seen failing with the code before these fixes: the quant written through a planted ``.tmp`` link and over
someone's notes (exit 0), a FIFO at the ``.tmp`` name hanging it, a path with a newline forging an output
line; ``sweeps`` hanging on a silent server; ``%70assword=`` printed; a file named ``x.db?mode=ro``
created; quick_check's newline in the message; ``bench`` ending ``load_failed``; ``--poll-s 1e-300``
accepted; ``status`` saying the agent's last state after it exited."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sqlite3
import struct
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.hostile_cases import case
from support.hostile_run import TEGRASTATS_LOG, edgeprof_db, foreign_sqlite, invoke, refused, sha
from typer.testing import CliRunner

from edgeprof.cli import app

pytestmark = pytest.mark.timeout(180)


def _finishes(argv: list[str], seconds: float) -> tuple[Any, float]:
    """The command's result and its time, failing where it has not finished within ``seconds``."""
    box: dict[str, Any] = {}
    start = time.monotonic()
    worker = threading.Thread(target=lambda: box.update(r=CliRunner().invoke(app, argv)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert "r" in box, f"{argv} still running after {seconds} s"
    return box["r"], time.monotonic() - start


# -- models quantize --
@pytest.fixture(scope="module")
def f16_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("llama_cpp")
    from edgeprof.gguf import write_f16_gguf

    return write_f16_gguf(tmp_path_factory.mktemp("src") / "m-f16.gguf", "tiny")


def _quantize(src: Path, out: Path, *extra: str, types: str = "Q8_0") -> Any:
    result, _ = _finishes(["models", "quantize", str(src), "--types", types, "--out", str(out), *extra], 120)
    return result


@pytest.mark.llama
@pytest.mark.parametrize("hostile", [case("quantize-planted-link")], ids=lambda c: c.id)
def test_a_link_planted_at_the_temporary_name_is_never_written_through(
    tmp_path: Path, f16_model: Path, hostile: object
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("someone's notes\n")
    before = sha(victim)
    (out / "m-f16-q8_0.gguf.tmp").symlink_to(victim)
    done = _quantize(f16_model, out)
    assert done.exit_code == 0, done.output
    assert sha(victim) == before and (out / "m-f16-q8_0.gguf.tmp").is_symlink()
    assert (out / "m-f16-q8_0.gguf").read_bytes()[:4] == b"GGUF"
    requant = tmp_path / "requant"
    requant.mkdir()
    (requant / "m-f16-q8_0-q4_k_m.gguf.meta.tmp").symlink_to(victim)
    (requant / "m-f16-q8_0-q4_k_m.gguf.tmp").symlink_to(victim)
    again = _quantize(out / "m-f16-q8_0.gguf", requant, "--allow-requantize", types="Q4_K_M")
    assert again.exit_code == 0, again.output
    assert sha(victim) == before
    assert sorted(p.name for p in requant.iterdir() if not p.is_symlink()) == ["m-f16-q8_0-q4_k_m.gguf"]


@pytest.mark.llama
def test_a_fifo_at_the_temporary_name_does_not_hang(tmp_path: Path, f16_model: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "m-f16-q8_0.gguf.tmp")
    done = _quantize(f16_model, out)
    assert done.exit_code == 0, done.output


@pytest.mark.llama
@pytest.mark.parametrize("hostile", [case("quantize-onto-foreign-file")], ids=lambda c: c.id)
@pytest.mark.parametrize("kind", ["notes", "sqlite", "symlink", "fifo"])
def test_someones_file_under_an_outputs_name_is_refused(
    tmp_path: Path, f16_model: Path, kind: str, hostile: object
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    dst = out / "m-f16-q4_k_m.gguf"
    victim = tmp_path / "victim.txt"
    victim.write_text("someone's notes\n")
    if kind == "notes":
        dst.write_text("my notes\n")
    elif kind == "sqlite":
        foreign_sqlite(dst)
    elif kind == "symlink":
        dst.symlink_to(victim)
    else:
        os.mkfifo(dst)
    before = sha(dst) if kind in ("notes", "sqlite") else sha(victim)
    line = refused(_quantize(f16_model, out, types="Q8_0,Q4_K_M"), str(dst))
    assert "nothing was written" in line
    assert (sha(dst) if kind in ("notes", "sqlite") else sha(victim)) == before
    assert not (out / "m-f16-q8_0.gguf").exists()  # every output checked before the first is made
    assert [p.name for p in out.iterdir()] == [dst.name]


@pytest.mark.llama
@pytest.mark.parametrize("hostile", [case("quantize-controls-in-names")], ids=lambda c: c.id)
def test_control_characters_in_paths_and_types_are_shown_escaped(
    tmp_path: Path, f16_model: Path, hostile: object
) -> None:
    out = tmp_path / "a\nQ4_K_M  /forged\x1b[2J"
    done = _quantize(f16_model, out)
    assert done.exit_code == 0, done.output
    assert len(done.stdout.splitlines()) == 1 and "\x1b" not in done.stdout, done.stdout
    assert "\\n" in done.stdout and "\\x1b" in done.stdout
    bad = _quantize(f16_model, tmp_path / "o", types="Q8_0\x1b]52;c;aGk=\x07,Q9\rX")
    line = refused(bad, "unknown quantization type")
    assert "\x1b" not in line and "\r" not in line and "\\x1b" in line


def test_the_writer_writes_the_file_edgeprof_created_even_if_its_name_is_swapped(tmp_path: Path) -> None:
    """What llama.cpp does with the name it is given (open it and write), without llama.cpp: the name is
    /proc/self/fd/N of the exclusive temp file, so a link planted at its name meanwhile is never written
    through, and the swap is found before anything is renamed into place."""
    from edgeprof.gguf.quantizer import QuantizeError, _new_output

    dst = tmp_path / "m-q8_0.gguf"
    victim = tmp_path / "victim.txt"
    victim.write_text("someone's notes\n")
    before = sha(victim)
    with _new_output(dst, "tmp") as name:
        Path(name).write_bytes(b"GGUF" + bytes(60))
    assert dst.read_bytes()[:4] == b"GGUF" and sorted(p.name for p in tmp_path.iterdir()) == [
        dst.name,
        victim.name,
    ]
    with pytest.raises(QuantizeError, match="replaced while it was written"), _new_output(dst, "tmp") as name:
        real = next(p for p in tmp_path.iterdir() if p.name.endswith(".tmp"))
        real.rename(tmp_path / "moved")
        real.symlink_to(victim)  # the temp name swapped for a link to someone's file
        Path(name).write_bytes(b"GGUF" + bytes(60))
    assert sha(victim) == before and dst.read_bytes() == b"GGUF" + bytes(60)


def test_the_requantized_mark_is_never_written_through_a_planted_link(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plan"))
    from test_check_what_run_uses import synthetic_gguf

    from edgeprof.gguf.quantizer import QuantizeError, copy_with_metadata

    src = synthetic_gguf(tmp_path / "synthetic.gguf")
    dst = tmp_path / "marked.gguf"
    victim = tmp_path / "victim.txt"
    victim.write_text("someone's notes\n")
    before = sha(victim)
    (tmp_path / "marked.gguf.meta.tmp").symlink_to(victim)
    copy_with_metadata(src, dst, {"edgeprof.requantized_from": "Q8_0 (sha256 x)"})
    assert sha(victim) == before and dst.read_bytes()[:4] == b"GGUF"
    notes = tmp_path / "notes.gguf"
    notes.write_text("my notes\n")
    with pytest.raises(QuantizeError, match="not an earlier edgeprof GGUF model"):
        copy_with_metadata(src, notes, {"x": "y"})
    assert notes.read_text() == "my notes\n"


# -- PostgreSQL and URLs --
@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that accepts every connection and never sends a byte."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(listener.accept()[0])

    worker = threading.Thread(target=accept, daemon=True)
    worker.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        worker.join(5)
        for conn in held:
            conn.close()
        listener.close()


@pytest.mark.parametrize("hostile", [case("pg-silent-server")], ids=lambda c: c.id)
@pytest.mark.parametrize("command", ["sweeps", "report", "push"])
def test_a_server_that_never_answers_is_an_error_within_15_s(
    tmp_path: Path, command: str, hostile: object
) -> None:
    pytest.importorskip("psycopg")
    with silent_server() as port:
        url = f"postgresql://u:hunter2@127.0.0.1:{port}/db"
        argv = {"sweeps": ["sweeps", "--db", url], "report": ["report", "--db", url]}.get(command)
        if argv is None:
            argv = ["push", "--to", url, "--db", str(edgeprof_db(tmp_path / "e.db")), "--all"]
        result, took = _finishes(argv, 30)
    line = refused(result, "127.0.0.1")
    assert took < 15, f"{took:.1f} s"
    assert "hunter2" not in result.output, line


def test_the_deadlines_are_set_unless_the_url_sets_its_own() -> None:
    from sqlalchemy.engine import make_url

    from edgeprof.storage.db import PG_CONNECT_TIMEOUT_S, PG_STATEMENT_TIMEOUT_MS, pg_connect_args

    args = pg_connect_args(make_url("postgresql+psycopg://u@h/db"))
    assert args["connect_timeout"] == PG_CONNECT_TIMEOUT_S <= 7
    assert args["options"] == f"-c statement_timeout={PG_STATEMENT_TIMEOUT_MS}" and args["keepalives"] == 1
    own = pg_connect_args(
        make_url("postgresql+psycopg://u@h/db?connect_timeout=30&options=-c%20work_mem=64MB")
    )
    assert "connect_timeout" not in own and own["options"].startswith(
        "-c work_mem=64MB -c statement_timeout="
    )


@pytest.mark.parametrize("hostile", [case("url-password-key-encoded")], ids=lambda c: c.id)
def test_a_percent_encoded_password_key_is_masked(hostile: Any) -> None:
    from edgeprof.storage.db import mask_url, scrub

    result = invoke(hostile)
    assert result.exit_code == 2 and "hunter2" not in result.output, result.output
    url = "postgresql://u@h/db?%70assword=pw1&%73sl%50assword=pw2&x=1"
    assert mask_url(url) == "postgresql://u@h/db?%70assword=***&%73sl%50assword=***&x=1"
    assert "pw1" not in scrub("failed for pw1", url)


@pytest.mark.parametrize("hostile", [case("sqlite-url-with-query")], ids=lambda c: c.id)
@pytest.mark.parametrize("command", ["push", "sweeps"])
def test_an_sqlite_url_with_a_query_creates_no_file(tmp_path: Path, command: str, hostile: object) -> None:
    src = edgeprof_db(tmp_path / "e.db")
    before = sha(src)
    target = tmp_path / "t"
    target.mkdir()
    url = f"sqlite:///{target}/x.db?mode=ro&uri=true"
    argv = ["push", "--to", url, "--db", str(src), "--all"] if command == "push" else ["sweeps", "--db", url]
    refused(CliRunner().invoke(app, argv), "query")
    assert list(target.iterdir()) == [] and sha(src) == before


# -- databases, bench, the agent --
def _damaged(path: Path) -> Path:
    """An edgeprof database with a page no table uses: quick_check says so in two lines of its own."""
    edgeprof_db(path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
        page_size, pages = (
            conn.execute("PRAGMA page_size").fetchone()[0],
            conn.execute("PRAGMA page_count").fetchone()[0],
        )
    data = bytearray(path.read_bytes()) + bytes(page_size)
    data[28:32] = struct.pack(">I", pages + 1)  # the header's page count: one more page, never used
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("hostile", [case("db-damaged-one-line")], ids=lambda c: c.id)
@pytest.mark.parametrize(
    "argv", [["db", "upgrade"], ["import-tegrastats", str(TEGRASTATS_LOG)]], ids=["upgrade", "import"]
)
def test_a_damaged_database_is_one_line(tmp_path: Path, argv: list[str], hostile: object) -> None:
    db = _damaged(tmp_path / "bad.db")
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        assert "\n" in conn.execute("PRAGMA quick_check(5)").fetchone()[0]
    before = sha(db)
    refused(CliRunner().invoke(app, [*argv, "--db", str(db)]), "is damaged", ".recover")
    assert sha(db) == before


@pytest.mark.parametrize("hostile", [case("bench-gguf-counts")], ids=lambda c: c.id)
def test_bench_refuses_a_gguf_whose_counts_llama_cpp_cannot_hold(tmp_path: Path, hostile: object) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plan"))
    from test_check_what_run_uses import synthetic_gguf

    model = synthetic_gguf(tmp_path / "synthetic.gguf", **{"attention.head_count_kv": ["a", "b"]})
    db = tmp_path / "x.db"
    result = CliRunner().invoke(app, ["bench", "-m", str(model), "-p", "8", "-n", "4", "--db", str(db)])
    refused(result, "head_count_kv")
    assert not db.exists()


@pytest.mark.parametrize("hostile", [case("poll-tiny")], ids=lambda c: c.id)
def test_agent_poll_below_a_tenth_of_a_second_is_refused(tmp_path: Path, hostile: Any) -> None:
    db = edgeprof_db(tmp_path / "e.db")
    (tmp_path / "q").mkdir()
    before = sha(db)
    argv = [*hostile.args(db=db), "--queue", str(tmp_path / "q"), "--once"]
    refused(CliRunner().invoke(app, argv), "--poll-s", "at least 0.1")
    assert sha(db) == before


@pytest.mark.parametrize("hostile", [case("agent-state-after-exit")], ids=lambda c: c.id)
def test_the_agent_records_its_state_for_a_plan_named_in_bytes_that_are_not_utf8(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, hostile: object
) -> None:
    from edgeprof.daemon import Agent, AgentConfig
    from edgeprof.daemon.status import gather_status, render_status
    from edgeprof.storage.db import new_session, open_engine

    queue = tmp_path / "q"
    queue.mkdir()
    bad = os.path.join(os.fsencode(queue), b"\xff\xfe-bad-utf8.toml")
    with open(bad, "wb") as fh:
        fh.write(b'name = "bad"\n[matrix]\nmodels = ["/no/such/model.gguf"]\n')
    os.utime(bad, (1, 1))  # settled long ago
    engine = open_engine(tmp_path / "a.db")
    config = AgentConfig(queue=queue, plan=None, once=True, telemetry=False, poll_s=0.05)
    with caplog.at_level(logging.WARNING):
        assert Agent(engine, None, config).run() == 0
    assert "could not record agent state" not in caplog.text
    with new_session(engine) as s:
        status = gather_status(s)
    engine.dispose()
    assert status["agent"]["state"] == "stopped" and not status["agent"]["alive"]
    assert status["agent"]["plan"] is None or "__-bad-utf8" in status["agent"]["plan"]
    assert render_status(status).startswith("agent: stopped (pid ")


def test_status_never_shows_the_state_an_agent_had_before_it_exited(tmp_path: Path) -> None:
    from edgeprof.daemon.status import gather_status, render_status
    from edgeprof.run_states import utcnow
    from edgeprof.storage.db import new_session, open_engine
    from edgeprof.storage.models import AgentState

    engine = open_engine(tmp_path / "a.db")
    with new_session(engine) as s:
        now = utcnow()
        s.add(AgentState(pid=os.getpid(), hostname=socket.gethostname(), started_at=now, heartbeat_at=now,
                         stopped_at=now, state="idle", message="queue empty"))  # fmt: skip
        s.commit()
        status = gather_status(s)
    engine.dispose()
    assert render_status(status).startswith("agent: stopped (pid "), render_status(status)
