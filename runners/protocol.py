"""What the parent sends a worker and what comes back: plain JSON, so a worker can be any executable; the
check each child that loads a model (a worker, llama-server) makes against the job's ``model_identity``; and
a process's peak resident memory from procfs, read by the runner (polling its child) and the worker."""

from __future__ import annotations

import json
import os
from typing import Any

# Environment variable that makes the worker fail on purpose: "<action>@<stage>[:<model-path-substring>]",
# action in kill|segv|abort|hang|exit|raise, stage in start|load|prefill|decode|soak (after a soak's
# window). Used by the fault-injection tests to prove that every kind of child death leaves a stored row;
# never set it in production.
FAULT_ENV = "EDGEPROF_TEST_FAULT"
# ... and only when this second variable holds this value, which only tests/conftest.py sets: a stray
# EDGEPROF_TEST_FAULT in a user's shell or a unit file has no effect, so no real run is ever stored as a
# crash the test suite faked.
FAULT_ARM_ENV = "EDGEPROF_TEST_FAULT_ARMED_BY"
FAULT_ARM_VALUE = "edgeprof-test-suite"
# A soak's simulated throttling, armed the same way: the path of a file the soak loop reads between decode
# steps; while it says "slow F" each step is stretched so the decode speed falls by the fraction F, as a
# lowered clock cap would slow it (the simulated-device tests' fake cap writes it).
SLOW_FILE_ENV = "EDGEPROF_TEST_SLOW_FILE"
# A folder where a worker writes, per rep, every decode step's time: in llama_decode, in sampling, between
# steps, and llama.cpp's own counter for it (benchmarks/fidelity/pinned.py). Unset: nothing is timed per step.
TOKEN_TRACE_ENV = "EDGEPROF_TOKEN_TRACE"

# Exit codes a worker uses to say why it stopped without a signal.
EXIT_OK = 0
EXIT_LOAD_FAILED = 3
EXIT_REQUEST_FAILED = 4
EXIT_BAD_SPEC = 5

KV_CACHE_TYPES: dict[str, int] = {
    # ggml_type values (ggml.h); the names llama-bench's -ctk/-ctv accept.
    "f32": 0,
    "f16": 1,
    "q4_0": 2,
    "q4_1": 3,
    "q5_0": 6,
    "q5_1": 7,
    "q8_0": 8,
    "iq4_nl": 20,
    "bf16": 30,
}


def kv_cells(depth: int, prompt_tokens: int, n_predict: int, *, serving: bool = False) -> int:
    """The context cells one generation request needs: the depth, the prompt, and every generated token but
    the last, which is sampled and never decoded (llama-bench sizes its context to exactly this: p + n + d).
    llama-server ends a request once only one cell is left (``n_tokens + 1 >= n_ctx``), so a served request
    needs that cell too."""
    return depth + prompt_tokens + max(n_predict - 1, 0) + (1 if serving else 0)


def encode_event(event: dict[str, Any]) -> bytes:
    return (json.dumps(event, separators=(",", ":"), allow_nan=False) + "\n").encode()


def check_model_file(path: str, identity: dict[str, Any] | None) -> None:
    """RuntimeError unless the file at ``path`` is still the one the agent hashed (its size and mtime, as
    stored with its sha256): a model replaced after it was hashed is never measured under the old one's
    sha256, quant and bits per weight."""
    if not identity:
        return
    try:
        st = os.stat(path)
    except OSError as exc:
        raise RuntimeError(f"the model file {path} cannot be read now ({exc.strerror})") from None
    now, hashed = (st.st_size, st.st_mtime_ns), (identity.get("size_bytes"), identity.get("mtime_ns"))
    if now != hashed:
        raise RuntimeError(
            f"the model file {path} changed after it was hashed (size, mtime_ns {hashed[0]}, {hashed[1]} "
            f"-> {now[0]}, {now[1]}); not measured under the hashed file's identity (run the plan again)"
        )


def check_loaded_size(model_size_bytes: int, identity: dict[str, Any] | None) -> None:
    """RuntimeError when llama.cpp's size of the model it loaded is not the hashed file's tensor bytes."""
    expected = (identity or {}).get("tensor_bytes")
    if expected and model_size_bytes != expected:
        raise RuntimeError(
            f"llama.cpp loaded {model_size_bytes} bytes of tensors, the hashed file has {expected}: the "
            "model loaded is not the model hashed (replaced while the sweep ran?)"
        )


def check_served_model(path: str, identity: dict[str, Any] | None, models: Any) -> None:
    """RuntimeError unless the file at ``path`` is still the one hashed and the size llama-server reports
    for what it loaded (``/v1/models`` ``data[0].meta.size``, its llama_model_size) is the hashed file's
    tensor bytes; a server that does not report the size is checked on the file alone."""
    check_model_file(path, identity)
    data = models.get("data") if isinstance(models, dict) else None
    meta = data[0].get("meta") if isinstance(data, list) and data and isinstance(data[0], dict) else None
    size = meta.get("size") if isinstance(meta, dict) else None
    if isinstance(size, int) and not isinstance(size, bool):
        check_loaded_size(size, identity)


def vm_hwm_mb(pid: int | str = "self", proc_root: str = "/proc") -> float | None:
    """A process's peak resident set (``VmHWM``) in MiB; None once it is gone or a zombie.

    Not ``wait4``'s ``ru_maxrss``: Linux carries the high-water mark of the memory image a process had
    before ``exec`` into it, so a child (v)forked from a 150 MB agent would report the agent's RSS.
    """
    try:
        with open(f"{proc_root}/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        return None
    return None
