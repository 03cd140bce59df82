"""Numbers of a plan that would wrap or overflow below it (a C int in llama.cpp, ctypes, SQLite's int64)
are validation lines naming the field and its range: the cases of ``support.hostile_cases`` about plans.
No model is read: the missing model file is one problem more, the bound is the one asserted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.hostile_cases import case
from support.plan_problems import problems
from support.plans import DEFAULT_WORKLOAD, plan_toml

MODEL = Path("/nonexistent/m.gguf")


def _problems(**kw: Any) -> list[str]:
    return [p for p in problems(plan_toml([MODEL], **kw)) if "no such file" not in p]


def test_n_seq_max_above_llama_cpps_sequence_limit_is_refused() -> None:
    case("plan-n-seq-max-huge")
    found = _problems(matrix={"n_seq_max": [1, 4294967297], "kv_unified": [True]})
    assert found == ["matrix.n_seq_max[1]: 4294967297 is above the limit 256 (llama.cpp's LLAMA_MAX_SEQ)"]


def test_top_k_that_would_wrap_in_a_c_int_is_refused() -> None:
    case("plan-top-k-huge")
    found = _problems(workloads=[{**DEFAULT_WORKLOAD, "top_k": 2**63 - 1}])
    assert len(found) == 1
    assert found[0].startswith("workload[0].top_k: 9223372036854775807 is above the limit")


@pytest.mark.parametrize("value", [1e308, float("inf"), float("nan")])
def test_a_temperature_past_any_sampler_is_refused(value: float) -> None:
    case("plan-temperature-huge")
    found = _problems(workloads=[{**DEFAULT_WORKLOAD, "temperature": value}])
    assert len(found) == 1 and found[0].startswith("workload[0].temperature: "), found


@pytest.mark.parametrize(
    ("field", "value"),
    [("n_predict", 2**63), ("prompt_tokens", 2**64), ("seed", -(2**63) - 1)],
)
def test_no_plan_integer_outside_int64_passes(field: str, value: int) -> None:
    """TOML itself stops at int64; a plan given as data (the agent's queue, the API) must stop there too."""
    from edgeprof.plan.checker import Checker

    chk = Checker()
    assert chk.integer(value, f"workload[0].{field}", minimum=0) is None
    assert chk.problems and "64-bit" in chk.problems[0]


def test_values_at_the_limits_still_validate() -> None:
    found = _problems(
        matrix={"n_seq_max": [256], "kv_unified": [True]},
        workloads=[{**DEFAULT_WORKLOAD, "top_k": 1_000_000, "temperature": 100.0}],
    )
    assert found == []


def test_serving_levels_and_the_serving_table_have_ceilings() -> None:
    case("plan-serving-huge")
    found = _problems(
        matrix={"runner": ["llama-server"], "concurrency": [1, 100_000], "request_rate": [1e9]},
        tables={"serving": {"requests": 10**12, "request_timeout_s": 1e300, "slo": {"ttft_ms": 1e300}}},
    )
    assert [p.split(":")[0] for p in found] == [
        "matrix.concurrency[1]",
        "matrix.request_rate[0]",
        "serving.requests",
        "serving.request_timeout_s",
        "serving.slo.ttft_ms",
    ], found
