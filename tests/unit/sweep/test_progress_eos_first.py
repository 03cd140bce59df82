"""A config whose cold run ends at its first token (the model emits end-of-sequence first: nothing to
decode) says so at once on the progress line, with the way to measure decode anyway, and its finish line
says it too; a config that decodes, or ignores EOS, says nothing of the kind."""

from __future__ import annotations

import io

import pytest

from edgeprof.sweep import Progress, outcome_style
from edgeprof.sweep.progress import EOS_FIRST, EOS_FIRST_OUTCOME

pytestmark = pytest.mark.timeout(60)

COLD_EOS = {"event": "measurement", "kind": "cold", "rep": 0, "tg_tps": None, "tokens_out": 1,
            "finish_reason": "eos"}  # fmt: skip


def _lines(*events: dict) -> list[str]:
    out = io.StringIO()
    p = Progress(2, out)
    p.start(1, "q4 ctx=512")
    for event in events:
        p.event(event)
    p.finish(1, "run 1 q4", "ok", 2.0, 1)
    return out.getvalue().splitlines()


def test_a_cold_run_ending_at_its_first_token_says_so_at_once_and_at_the_end() -> None:
    steady = {**COLD_EOS, "kind": "steady", "rep": 1}
    lines = _lines(COLD_EOS, steady)
    assert lines[1] == "[1/2]   cold rep 0"
    assert lines[2] == f"[1/2] q4 ctx=512: {EOS_FIRST}"  # before any steady rep
    assert "ignore_eos = true" in lines[2]
    assert lines[-1] == f"[1/2] run 1 q4  ok ({EOS_FIRST_OUTCOME})  (2.0 s, ETA 0:02)"
    assert outcome_style(f"ok ({EOS_FIRST_OUTCOME})") == "yellow"
    assert sum(EOS_FIRST in line for line in lines) == 1  # said once, not per rep


def test_a_config_that_decodes_or_stops_later_says_nothing_of_it() -> None:
    decoded = {**COLD_EOS, "tokens_out": 2}
    for lines in (_lines(decoded), _lines({**COLD_EOS, "finish_reason": "length"}), _lines()):
        assert not any("end-of-sequence" in line for line in lines), lines
    # the next config starts clean
    out = io.StringIO()
    p = Progress(2, out)
    p.start(1, "a")
    p.event(COLD_EOS)
    p.finish(1, "a", "ok", 1.0, 1)
    p.start(2, "b")
    p.finish(2, "b", "ok", 1.0, 0)
    assert out.getvalue().splitlines()[-1] == "[2/2] b  ok  (1.0 s, ETA 0:00)"
