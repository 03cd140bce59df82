"""classify_child_end (runners/child_end.py): every way a worker can end, from simulated ``waitpid`` statuses
(Linux encoding: exit code << 8, or the signal number; tests/integration/test_child_wait_status.py pins that
encoding on a real child)."""

from __future__ import annotations

import signal

import pytest

from edgeprof.runners import EXIT_LOAD_FAILED
from edgeprof.runners.child_end import ChildEnd, classify_child_end, decode_wait_status, last_error_line

pytestmark = pytest.mark.timeout(60)


def exited(code: int) -> int:
    return code << 8


def killed(sig: signal.Signals) -> int:
    return int(sig)


def end(**kw: object) -> ChildEnd:
    base: dict[str, object] = {"wait_status": exited(0), "timed_out": False, "interrupted": False}
    base["timeout_s"] = 600
    return classify_child_end(**(base | kw))


def test_decoding_an_exit_code_and_a_child_never_reaped() -> None:
    assert decode_wait_status(exited(3)) == (3, None) and decode_wait_status(None) == (None, None)


def test_clean_exit_after_done_is_ok() -> None:
    assert end(done=True) == ChildEnd("ok", None, 0, None)


def test_a_clean_exit_without_done_is_an_error() -> None:
    result = end(done=False)
    assert result.status == "error" and result.reason == "worker exited with code 0 before finishing"


@pytest.mark.parametrize(
    ("sig", "words"),
    [
        (signal.SIGILL, "CPU instructions this machine lacks"),
        (signal.SIGKILL, "OOM killer"),
        (signal.SIGSEGV, "invalid memory access"),
        (signal.SIGBUS, "model file changed"),
        (signal.SIGUSR1, "killed by SIGUSR1"),
    ],
)
def test_death_by_a_signal_is_crashed_with_the_likely_cause(sig: signal.Signals, words: str) -> None:
    result = end(wait_status=killed(sig), done=True)
    assert result.status == "crashed" and result.signal_name == sig.name
    assert result.reason is not None and words in result.reason


def test_timeout_and_interruption_win_over_how_the_killed_child_died() -> None:
    timed = end(wait_status=killed(signal.SIGKILL), timed_out=True, timeout_s=30)
    assert timed.status == "timeout"
    assert timed.reason == "no result within the 30 s timeout; the child was killed"
    stopped = end(wait_status=killed(signal.SIGTERM), timed_out=True, interrupted=True)
    assert stopped.status == "interrupted"


def test_the_childs_error_event_names_the_stage_and_the_log_hint() -> None:
    tail = "llama_model_load: error loading model: tensor 'blk.0' data is not within the file bounds\n"
    event = {"stage": "load", "message": "bad model"}
    result = end(wait_status=exited(EXIT_LOAD_FAILED), error_event=event, log_tail=tail)
    assert result.status == "load_failed"
    assert result.reason == f"load: bad model — {tail.strip()}"
    request = end(wait_status=exited(4), error_event={"stage": "request", "message": "decode failed"})
    assert (request.status, request.reason) == ("error", "request: decode failed")


def test_documented_exit_codes_and_injected_faults() -> None:
    assert end(wait_status=exited(5)).reason == "worker bad job before finishing"
    assert end(wait_status=exited(17)).reason == "worker exited with code 17 before finishing"
    fault = end(wait_status=killed(signal.SIGKILL), injected_fault="oom@decode")
    assert fault.reason is not None and fault.reason.startswith("injected by the test suite (oom@decode): ")
    assert end(done=True, injected_fault="x").reason is None  # an ok run says nothing of a fault


def test_last_error_line() -> None:
    assert last_error_line("a\nGGML_ASSERT failed here\nok\n") == "GGML_ASSERT failed here"
    assert last_error_line("all fine\n") is None
