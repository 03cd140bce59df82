"""What a llama-bench record must be before anything of it is stored: every field of llama-bench's list with
its type and within the range edgeprof stores, ``samples_ns`` bounded in count and size, nothing nested.

A record is input from anywhere (a file someone sends): ``"build_number": "abc"``, ``"flash_attn": "on"``,
``n_threads 1e400``, ``n_prompt 10**30``, a million samples or samples of 10^30 ns once gave tracebacks or
were stored as measured. Each problem is one line naming the field; the importer adds the record's place.
"""

from __future__ import annotations

import math
from typing import Any

from edgeprof.report.llamabench.fields import FIELD_TYPES

MAX_SAMPLES_PER_RECORD = 10_000  # llama-bench's -r: 5 by default
MAX_SAMPLES_PER_FILE = 200_000
MAX_SAMPLE_NS = 10**15  # 11.6 days for one repetition
MAX_TEXT = 4096
INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
# fields stored in 32-bit-sized columns or used as token counts: llama.cpp's own int
_INT32_FIELDS = frozenset(
    {"n_batch", "n_ubatch", "n_threads", "n_gpu_layers", "n_cpu_moe", "main_gpu", "poll", "n_prompt", "n_gen",
     "n_depth", "fit_min_ctx"}
)  # fmt: skip
_INT_MIN = {"n_gpu_layers": -1, "main_gpu": -1, "flash_attn": -1}
_INT_MAX = {"flash_attn": 1}


def _int_problem(key: str, value: Any) -> str | None:
    if isinstance(value, bool):
        value = int(value)  # llama-bench wrote some of these as booleans once (flash_attn)
    if not isinstance(value, int):
        return f"{key} is {_shown(value)}, not a whole number"
    lo = _INT_MIN.get(key, 0)
    hi = _INT_MAX.get(key, INT32_MAX if key in _INT32_FIELDS else INT64_MAX)
    if not lo <= value <= hi:
        return f"{key} = {_shown(value)} is outside {lo}..{hi}"
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def field_problem(key: str, value: Any) -> str | None:
    """Why ``value`` cannot be llama-bench's ``key``; None when it can."""
    kind = FIELD_TYPES.get(key)
    if kind == "string":
        ok = isinstance(value, str) and len(value) <= MAX_TEXT
        return None if ok else f"{key} is not a text of at most {MAX_TEXT} characters"
    if kind == "bool":
        ok = isinstance(value, bool) or (isinstance(value, int) and value in (0, 1))
        return None if ok else f"{key} is {_shown(value)}, not true/false"
    if kind == "int":
        return _int_problem(key, value)
    if kind == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))
        return None if ok else f"{key} is {_shown(value)}, not a finite number"
    if key in ("samples_ns", "samples_ts"):
        return None  # checked by samples_problem
    # a field this edgeprof does not know (a newer llama-bench): kept only when it is flat and small
    if value is None or isinstance(value, (bool, int)) or (isinstance(value, str) and len(value) <= MAX_TEXT):
        return None
    if isinstance(value, float) and math.isfinite(value):
        return None
    return f"{key} is not a plain value"


def samples_problem(rec: dict[str, Any]) -> str | None:
    samples = rec.get("samples_ns")
    if not isinstance(samples, list) or not samples:
        return "samples_ns is not a list of times"
    if len(samples) > MAX_SAMPLES_PER_RECORD:
        return f"samples_ns has {len(samples)} times, more than {MAX_SAMPLES_PER_RECORD}"
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_SAMPLE_NS for v in samples):
        return f"samples_ns holds something other than positive integers (ns, at most {MAX_SAMPLE_NS})"
    rates = rec.get("samples_ts")
    if rates is not None and not (
        isinstance(rates, list)
        and len(rates) <= MAX_SAMPLES_PER_RECORD
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in rates)
    ):
        return "samples_ts is not a list of finite numbers"
    return None


def record_problem(rec: Any) -> str | None:
    """The first reason ``rec`` is not a llama-bench record edgeprof can store; None when it is."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    for key in ("model_filename", "n_prompt", "n_gen", "samples_ns"):
        if key not in rec:
            return f"no {key!r}; not llama-bench -o json/jsonl output"
    if len(rec) > 4 * len(FIELD_TYPES):
        return f"{len(rec)} fields; not llama-bench output"
    for key, value in rec.items():
        problem = field_problem(str(key), value)
        if problem is not None:
            return problem
    problem = samples_problem(rec)
    if problem is not None:
        return problem
    if rec["n_prompt"] + rec["n_gen"] == 0:
        return "a test of 0 tokens"
    return None
