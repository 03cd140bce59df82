"""``edgeprof import-llama-bench FILE``: llama-bench's own ``-o json`` or ``-o jsonl`` output stored as a
sweep, so that results measured before edgeprof (or on a machine without it) sit beside edgeprof's and are
read by the same reports and by ``report --format llama-bench-*``.

The sweep is marked imported (status ``imported``, the device named "imported" with the CPU and GPU the
records name, a build row of runtime ``llama-bench``): nothing about the machine was observed, so there is no
telemetry, and every energy, temperature and power figure is NULL, never 0. Each record is one config; each
of its ``samples_ns`` one steady repetition. What edgeprof has no column for (cpu_mask, split_mode, the
model's type) is kept with the config, so the record is written back as it came.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeprof import __version__
from edgeprof.device import get_or_create_device
from edgeprof.report.llamabench.fields import FIELD_NAMES, FLASH_ATTN_CODES
from edgeprof.report.llamabench.identity import IMPORTED_KEY, NGL_ALL, ctx_of_test
from edgeprof.report.llamabench.plan import name_of_test, workload_of_test
from edgeprof.report.llamabench.validate import MAX_SAMPLES_PER_FILE, record_problem
from edgeprof.run_states import utcnow
from edgeprof.storage.identity import add_unique
from edgeprof.storage.models import Build, Measurement, Run, Sweep

SWEEP_STATUS = "imported"
IMPORTED_HOSTNAME = "imported"
IMPORT_MARK = "# edgeprof import-llama-bench"
MAX_FILE_BYTES = 64 << 20
MAX_RECORDS = 100_000
# the per-test and timing fields: measured again from the stored samples, never kept as given
_PER_TEST = {"n_prompt", "n_gen", "n_depth", "test_time", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts"}
_FA_NAMES = {code: name for name, code in FLASH_ATTN_CODES.items()}


class LlamaBenchImportError(ValueError):
    """The file is not llama-bench json/jsonl output; one line for the user."""


@dataclass(frozen=True)
class ImportResult:
    sweep_id: int
    n_records: int
    n_samples: int


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of a llama-bench json (a list) or jsonl (an object per line) file, each checked. Read only
    from a regular file (a FIFO or /dev/zero is refused from its type, never waited on) of at most
    MAX_FILE_BYTES."""
    from edgeprof.safefs import read_regular

    try:
        text = read_regular(path, MAX_FILE_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LlamaBenchImportError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        stripped = text.lstrip()
        if stripped.startswith("["):
            raw = json.loads(text)
        else:
            raw = [json.loads(line) for line in text.splitlines() if line.strip()]
    except RecursionError:
        raise LlamaBenchImportError(f"{path}: JSON nested too deep; not llama-bench output") from None
    except ValueError as exc:
        raise LlamaBenchImportError(f"{path}: not llama-bench json or jsonl output ({exc})") from None
    if not isinstance(raw, list) or not raw:
        raise LlamaBenchImportError(f"{path}: no llama-bench records in it")
    if len(raw) > MAX_RECORDS:
        raise LlamaBenchImportError(f"{path}: more than {MAX_RECORDS} records")
    for i, rec in enumerate(raw):
        _check(rec, f"{path}: record {i + 1}")
    total = sum(len(rec["samples_ns"]) for rec in raw)
    if total > MAX_SAMPLES_PER_FILE:
        raise LlamaBenchImportError(f"{path}: {total} samples, more than {MAX_SAMPLES_PER_FILE}")
    return raw


def _check(rec: Any, place: str) -> None:
    problem = record_problem(rec)
    if problem is not None:
        raise LlamaBenchImportError(f"{place}: {problem}")


def import_llama_bench(session: Session, path: Path) -> ImportResult:
    """Store the file's records as one imported sweep; the caller commits."""
    records = read_records(path)
    first = records[0]
    device = get_or_create_device(session, _device_facts(first))
    now = utcnow()
    sweep = Sweep(
        name=f"import:{path.name}",
        plan_path=str(path.resolve()),
        plan_text=f"{IMPORT_MARK} {path.name}\n",  # no plan: llama-bench ran elsewhere, a file was read
        plan_hash=hashlib.sha256(path.read_bytes()).hexdigest(),  # the same file imported twice shows
        device_id=device.id,
        edgeprof_version=__version__,
        started_at=min((_time(r) for r in records), default=now),
        ended_at=max((_time(r) for r in records), default=now),
        status=SWEEP_STATUS,
        n_specs=len(records),
        sampler_json=json.dumps({"source": "llama-bench import", "file": path.name, "telemetry": None}),
    )
    session.add(sweep)
    session.flush()
    n_samples = 0
    for seq, rec in enumerate(records):
        # the context llama-bench ran the test at, which edgeprof bench gives it too: the two meet in compare
        n_ctx = ctx_of_test(int(rec["n_prompt"]), int(rec["n_gen"]), int(rec.get("n_depth", 0)))
        run = _run(session, sweep, seq, rec, n_ctx)
        session.add(run)
        session.flush()
        for rep, ns in enumerate(rec["samples_ns"]):
            session.add(_measurement(run, rep, rec, ns))
            n_samples += 1
    session.flush()
    return ImportResult(sweep.id, len(records), n_samples)


def _device_facts(rec: dict[str, Any]) -> dict[str, Any]:
    # The records came from some machine, not necessarily this one: a device named "imported", known only
    # by the CPU and GPU the records name (as the tegrastats import does), never this machine's row.
    return {
        "hostname": IMPORTED_HOSTNAME,
        "machine_id": None,
        "arch": "unknown",
        "cpu_model": str(rec.get("cpu_info") or "") or None,
        "cpu_count": None,
        "ram_total_mb": None,
        "board_model": None,
        "l4t_release": None,
        "gpu": str(rec.get("gpu_info") or "") or None,
        "kernel": None,
        "os_release": None,
        "source": "llama-bench output import: only the CPU and GPU names are known",
    }


def _build(session: Session, rec: dict[str, Any]) -> Build:
    commit, number = str(rec.get("build_commit", "unknown")), int(rec.get("build_number") or 0)
    backends = str(rec.get("backends", "CPU"))
    flags = {"commit": commit, "build_number": number, "backends": backends, "source": "llama-bench import"}
    fp = hashlib.sha256(json.dumps(["llama-bench", commit, number, backends]).encode()).hexdigest()
    build = session.scalar(select(Build).where(Build.fingerprint == fp))
    if build is None:
        build = add_unique(
            session,
            Build(
                fingerprint=fp,
                llama_cpp_python_version="",
                backend=backends.split(",")[0].lower(),
                gpu_offload=backends != "CPU",
                system_info="",
                build_flags=json.dumps(flags, sort_keys=True),
                runtime="llama-bench",
                runtime_version=f"{number} ({commit})",
                first_seen=utcnow(),
            ),
            fingerprint=fp,
        )
    return build


def _run(session: Session, sweep: Sweep, seq: int, rec: dict[str, Any], n_ctx: int) -> Run:
    n_prompt, n_gen, depth = int(rec["n_prompt"]), int(rec["n_gen"]), int(rec.get("n_depth", 0))
    workload = workload_of_test(n_prompt, n_gen)
    kept = {k: rec[k] for k in FIELD_NAMES if k in rec and k not in _PER_TEST}
    params = {k: rec.get(k) for k in ("n_batch", "n_ubatch", "n_threads", "n_gpu_layers", "flash_attn")}
    when = _time(rec)
    return Run(
        sweep_id=sweep.id,
        spec_id=hashlib.sha256(
            json.dumps([kept, n_prompt, n_gen, depth], sort_keys=True).encode()
        ).hexdigest()[:16],
        seq=seq,
        build_id=_build(session, rec).id,
        model_label=str(rec["model_filename"]),
        model_group=str(rec.get("model_type") or rec["model_filename"]),
        model_path=str(rec["model_filename"]),
        workload_name=name_of_test(n_prompt, n_gen),
        workload_hash=workload.hash,
        workload_json=json.dumps(workload.to_json()),
        params_json=json.dumps(params, sort_keys=True),
        effective_json=json.dumps({IMPORTED_KEY: kept}, sort_keys=True),
        repeat_json=json.dumps({"cold": 0, "warmup": 0, "steady": len(rec["samples_ns"])}),
        n_ctx=n_ctx,
        n_gpu_layers=_ngl(int(rec.get("n_gpu_layers", -1))),
        n_threads=int(rec.get("n_threads", 0)),
        n_batch=int(rec.get("n_batch", 0)),
        n_ubatch=int(rec.get("n_ubatch", 0)),
        flash_attn=_FA_NAMES.get(int(rec.get("flash_attn", -1)), "auto"),
        type_k=str(rec.get("type_k", "f16")),
        type_v=str(rec.get("type_v", "f16")),
        use_mmap=True,
        depth=depth,
        poll=rec.get("poll"),
        offload_kqv=not rec["no_kv_offload"] if "no_kv_offload" in rec else None,
        op_offload=not rec["no_op_offload"] if "no_op_offload" in rec else None,
        status="ok",
        reason="imported from llama-bench output",
        started_at=when,
        ended_at=when,
    )


def _ngl(ngl: int) -> int:
    # every layer, stored as edgeprof stores "all" (a bench or a plan's "all"); written back as -1
    return NGL_ALL if ngl < 0 else ngl


def _measurement(run: Run, rep: int, rec: dict[str, Any], ns: int) -> Measurement:
    """One sample as a steady repetition: a pp test's time is a prefill, a tg test's a decode; a pp+tg
    test's only its total (llama-bench does not split it)."""
    n_prompt, n_gen = int(rec["n_prompt"]), int(rec["n_gen"])
    ms = ns / 1e6
    m = Measurement(run_id=run.id, kind="steady", rep=rep, depth=run.depth)
    if n_gen == 0:
        m.n_prompt, m.prefill_ms, m.pp_tps = n_prompt, ms, n_prompt / (ms / 1000.0)
    elif n_prompt == 0:
        m.n_gen, m.decode_ms, m.tg_tps = n_gen, ms, n_gen / (ms / 1000.0)
    else:
        m.n_prompt, m.n_gen, m.e2e_ms = n_prompt, n_gen, ms
    return m


def _time(rec: dict[str, Any]) -> datetime:
    """llama-bench's test_time (RFC 3339, UTC, "%FT%TZ") as a naive UTC datetime, as edgeprof stores times."""
    try:
        return datetime.strptime(str(rec.get("test_time", "")), "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return utcnow()
