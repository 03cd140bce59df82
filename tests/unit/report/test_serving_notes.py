"""The lines below the serving levels: a failed level with its failures counted by reason, failures an ok
level tolerated within the plan's ``max_error_rate``, and a level the server's prompt cache served unasked;
none for a level still running."""

from __future__ import annotations

from typing import Any

import pytest

from edgeprof.report.render.serving import UNASKED_TITLE, level_notes

pytestmark = pytest.mark.timeout(30)

REASON = "7 × stream ended without a finish_reason"
DROPPED = f"7 of 8 measured requests failed (error rate 0.875 > max_error_rate 0): {REASON}"


def level(**over: Any) -> dict[str, Any]:
    row = {"model_label": "m @ host:1", "ctx": None, "concurrency": 2, "status": "ok", "reason": None,
           "serving_errors_by_reason": None, "serving_prompt_cache": "off",
           "serving_cached_prompt_tokens": 0, "serving_cached_prompt_tokens_of": 1024}  # fmt: skip
    return {**row, **over}


def test_each_kind_of_level_gets_its_note() -> None:
    failed = level(status="error", reason=DROPPED, serving_errors_by_reason=REASON)
    assert level_notes([failed])[1:] == [
        "1 failed serving level(s):",
        f"  m @ host:1 ctx=— c=2: error: {DROPPED}",
    ]
    tolerated = level(serving_errors_by_reason="1 × timeout")
    assert level_notes([tolerated])[1:] == ["failed requests within the plan's max_error_rate:",
                                           "  m @ host:1 ctx=— c=2: 1 × timeout"]  # fmt: skip
    unasked = level(serving_prompt_cache="unasked", serving_cached_prompt_tokens=944)
    assert level_notes([unasked])[1:] == [UNASKED_TITLE, "  m @ host:1 ctx=— c=2: 944 of 1024 prompt tokens"]
    assert level_notes([level(), level(status="running")]) == []
