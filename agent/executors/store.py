"""Storing what a worker child reported: its measurements, its phases, the llama.cpp build it ran on and what
llama.cpp made of the config. Shared by the in-process executor and the quality one (whose children speak
the same event protocol, ``edgeprof.runners.protocol``)."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof.device import backend_of
from edgeprof.run_states import utcnow
from edgeprof.runners import ChildResult
from edgeprof.storage.identity import add_unique
from edgeprof.storage.models import Build, Measurement, ModelFile, Phase, Run

# Event fields stored under the same name on a Measurement row.
_SAME_NAME = (
    "n_prompt", "prefill_ms", "pp_tps", "ttft_ms", "n_gen", "decode_ms", "tg_tps", "e2e_ms", "tpot_ms",
    "tokens_out", "output_hash", "output_text", "finish_reason", "first_eos_index", "depth", "depth_fill_ms",
    "kv_used_cells", "prompt_sha256", "prompt_n_tokens", "parse_special",
)  # fmt: skip


def build_flags() -> str | None:
    """The CMake flags scripts/setup.sh built llama-cpp-python with (it leaves them in the venv)."""
    path = Path(sys.prefix) / "share" / "edgeprof" / "llama-build.json"
    try:
        return path.read_text().strip()
    except OSError:
        return None


def get_or_create_build(session: Session, hello: dict[str, Any]) -> Build:
    """The build row of the llama-cpp-python a child announced in its ``hello``, one per fingerprint."""
    version = str(hello.get("llama_cpp_python", "unknown"))
    system_info = str(hello.get("system_info", ""))
    gpu_offload = bool(hello.get("gpu_offload", False))
    flags = build_flags()
    fp = hashlib.sha256(json.dumps([version, system_info, gpu_offload, flags]).encode()).hexdigest()
    build = session.scalar(select(Build).where(Build.fingerprint == fp))
    if build is None:
        build = Build(
            fingerprint=fp,
            llama_cpp_python_version=version,
            backend=backend_of(system_info, gpu_offload),
            gpu_offload=gpu_offload,
            system_info=system_info,
            build_flags=flags,
            first_seen=utcnow(),
            runtime_version=ggml_text(hello),
        )
        build = add_unique(session, build, fingerprint=fp)
    return build


def ggml_text(hello: dict[str, Any]) -> str | None:
    """"ggml 0.25.3 (commit 0c1e570)": the llama.cpp build the child loaded, as ``--version`` says it."""
    if not hello.get("ggml_version") and not hello.get("ggml_commit"):
        return None
    return f"ggml {hello.get('ggml_version') or '?'} (commit {hello.get('ggml_commit') or '?'})"


def measurement_row(run: Run, child: ChildResult, event: dict[str, Any]) -> Measurement:
    """One rep as the child reported it; a cold rep also carries the load time and the cold start."""
    kind = str(event["kind"])
    m = Measurement(
        run_id=run.id,
        kind=kind,
        rep=int(event["rep"]),
        output_tokens_json=json.dumps(event.get("output_tokens")),
        t_start_mono=event.get("t_request"),
        t_end_mono=event.get("t_end"),
        **{name: event.get(name) for name in _SAME_NAME},
    )
    if kind == "cold":
        m.load_ms = child.loaded.get("load_ms") if child.loaded else None
        t_first = event.get("t_first_token")
        m.cold_start_ms = (t_first - child.t_spawn) * 1000.0 if t_first is not None else None
    return m


def add_phases(session: Session, run: Run, phases: Iterable[dict[str, Any]], prefix: str = "") -> None:
    """The child's phases as rows of ``run`` (``prefix``: another run's phases spent on this one)."""
    for ph in phases:
        session.add(
            Phase(
                run_id=run.id,
                name=prefix + str(ph["name"]),
                kind=ph.get("kind"),
                rep=ph.get("rep"),
                t_start_mono=float(ph["t_start"]),
                t_end_mono=float(ph["t_end"]),
            )
        )


def store_child(session: Session, run: Run, child: ChildResult, *, is_main: bool) -> None:
    """Everything one child reported, on ``run`` (``is_main``: the child that ran the config's first cold
    start, whose load says what llama.cpp made of the config)."""
    for event in child.measurements:
        session.add(measurement_row(run, child, event))
    add_phases(session, run, child.phases)
    if child.hello is not None and run.build_id is None:
        run.build_id = get_or_create_build(session, child.hello).id
    if is_main and child.loaded is not None:
        run.effective_json = json.dumps(child.loaded.get("effective"), sort_keys=True)
        effective = child.loaded.get("effective") or {}
        # llama.cpp's own figure from its log (a sliding-window model's two caches summed), not a prediction
        run.kv_cache_mib = effective.get("kv_cache_mib")
    if child.peak_rss_mb is not None:
        run.peak_rss_mb = max(run.peak_rss_mb or 0.0, child.peak_rss_mb)


def model_identity(session: Session, run: Run) -> dict[str, Any] | None:
    """The hashed file's identity for the child to check at load (size, mtime, tensor bytes): the model
    loaded must be the model whose sha256 the run is stored under."""
    # no autoflush: a flush here would open a write transaction that stays open while the child runs, and
    # the sweep lease's heartbeat (its own connection) would wait behind it
    with session.no_autoflush:
        mf = session.get(ModelFile, run.model_file_id) if run.model_file_id is not None else None
    return file_identity(mf)


def file_identity(mf: ModelFile | None) -> dict[str, Any] | None:
    """What a child checks the file it loads against (runners.protocol.check_model_file and friends)."""
    if mf is None:
        return None
    return {"size_bytes": mf.size_bytes, "mtime_ns": mf.mtime_ns, "tensor_bytes": mf.tensor_bytes}
