"""What makes a llama-bench test the same test wherever it was measured: ``edgeprof bench``, a plan, or
llama-bench's own output imported. One rule for each field, so that ``compare`` pairs an import with a bench
of the same command line, and llama.cpp's compare script pairs edgeprof's records with llama-bench's.

- the build: llama-bench's ``build_commit`` / ``build_number`` of the llama.cpp build that ran;
- the context: each test's own, p + n + d, as llama-bench sizes it (``ctx_of_test``), the same for an import;
- the GPU layers: llama.cpp offloads every layer for any negative ``-ngl`` and for any value above the
  model's layer count, so -1, 99 and 999 are one setting ("all") for a model of fewer than 99 layers.
"""

from __future__ import annotations

import json
import re
from typing import Any

from edgeprof.plan.matrix import NGL_ALL

# The key of a run's effective_json under which an imported record keeps what edgeprof cannot measure
IMPORTED_KEY = "llama_bench"
# llama-bench writes "all layers" as -1 (edgeprof stores plan.NGL_ALL)
NGL_ALL_BENCH = -1
NGL_ALL_WORD = "all"
# ggml's commit as the in-process build reported it (store.ggml_text), llama-server's --version
_GGML = re.compile(r"ggml \S+ \(commit ([^)\s]+)\)")
_SERVER = re.compile(r"version: (\d+) \(([0-9a-zA-Z]+)\)")
DIRTY = "-dirty"
UNKNOWN_COMMIT = "unknown"


def ctx_of_test(n_prompt: int, n_gen: int, n_depth: int) -> int:
    """The context of one test at one depth as llama-bench sizes it: p + n + d (llama.cpp pads it to a
    multiple of 256). With flash attention off decode reads V with a stride of the context, so one context
    for every test of a command line would slow its short tests. edgeprof's request for the test fills
    exactly these cells (``runners.protocol.kv_cells``)."""
    return n_prompt + n_gen + n_depth


def ngl_key(ngl: int | None, n_layers: int | None = None) -> int | str | None:
    """The GPU-layers setting as llama.cpp applies it: "all" for a negative value, edgeprof's 999, or a value
    above the model's layer count (its output layer counts too); else the number."""
    if ngl is None:
        return None
    if ngl < 0 or ngl >= NGL_ALL or (n_layers is not None and ngl > n_layers):
        return NGL_ALL_WORD
    return ngl


def bench_ngl(ngl: int) -> int:
    """llama-bench's n_gpu_layers field: -1 for "all"."""
    return NGL_ALL_BENCH if ngl < 0 or ngl >= NGL_ALL else ngl


def build_identity(build_flags: str | None, runtime_version: str | None) -> tuple[str, int]:
    """(build_commit, build_number) of a stored build: an import keeps what llama-bench printed; an
    in-process build reported ggml's commit (the llama.cpp tree it was built from, without git's "-dirty",
    as llama.cpp's own build-info writes it); llama-server says both in --version. llama.cpp's own default
    when it cannot tell: "unknown" and 0."""
    flags = _json(build_flags)
    if "commit" in flags:
        return str(flags.get("commit") or UNKNOWN_COMMIT), int(flags.get("build_number") or 0)
    text = runtime_version or ""
    server = _SERVER.search(text)
    if server is not None:
        return server.group(2), int(server.group(1))
    ggml = _GGML.search(text)
    if ggml is not None and ggml.group(1) not in ("?", UNKNOWN_COMMIT):
        return ggml.group(1).removesuffix(DIRTY), 0
    return UNKNOWN_COMMIT, 0


def imported_quant(effective_json: str | None) -> str | None:
    """The quant of a run without a model file, as llama.cpp named its file type: an imported llama-bench
    record's model_type ("llama ?B Q4_K - Medium" -> Q4_K_M), or the ftype a server edgeprof did not start
    reported (llama-server's /v1/models meta). No GGUF was read; without it the run would show no quant and
    meet no run of the same file."""
    from edgeprof.report.llamabench.model_desc import quant_of_desc

    effective = _json(effective_json)
    imported = effective.get(IMPORTED_KEY)
    if isinstance(imported, dict) and isinstance(imported.get("model_type"), str):
        return quant_of_desc(imported["model_type"])
    server = effective.get("server")
    meta = server.get("model_meta") if isinstance(server, dict) else None
    ftype = meta.get("ftype") if isinstance(meta, dict) else None
    return quant_of_desc(f"? {ftype}") if isinstance(ftype, str) else None


def _json(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
