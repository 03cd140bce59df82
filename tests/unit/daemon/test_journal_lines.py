"""The agent's log format (agent/daemon/agent.py): one line per event, a traceback folded into its line, and
the libraries that log every request kept at WARNING unless verbose."""

from __future__ import annotations

import logging

import pytest

from edgeprof.daemon.agent import QUIET_LOGGERS, configure_logging

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def restore_logging():
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    yield
    root.handlers[:], level = saved
    root.setLevel(level)
    for name in (*QUIET_LOGGERS, "edgeprof"):
        logging.getLogger(name).setLevel(logging.NOTSET)


def test_one_line_per_event_and_libraries_quiet(capsys, restore_logging) -> None:
    configure_logging()
    log = logging.getLogger("edgeprof.agent")
    try:
        raise ValueError("boom\nsecond line")
    except ValueError:
        log.exception("db compact after the sweep failed")
    logging.getLogger("httpx").info("HTTP Request: GET http://127.0.0.1:8080/metrics")
    logging.getLogger("httpx").warning("a library's warning still shows")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("edgeprof-agent ERROR db compact after the sweep failed | Traceback")
    assert "ValueError: boom | second line" in lines[0]
    assert lines[1] == "edgeprof-agent WARNING a library's warning still shows"


def test_verbose_lets_them_through(capsys, restore_logging) -> None:
    configure_logging(verbose=True)
    logging.getLogger("httpx").info("HTTP Request: GET http://127.0.0.1:8080/metrics")
    logging.getLogger("edgeprof.agent").debug("a debug line")
    assert capsys.readouterr().err.splitlines() == [
        "edgeprof-agent INFO HTTP Request: GET http://127.0.0.1:8080/metrics",
        "edgeprof-agent DEBUG a debug line",
    ]
