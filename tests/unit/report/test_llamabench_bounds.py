"""``import-llama-bench`` given what llama-bench never writes: every field checked for type and range, samples
bounded in count and size, JSON nesting bounded, a FIFO or /dev/zero refused from its type. Each is one
line (exit 2) and the database is byte for byte as it was."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from support.hostile_cases import case
from support.hostile_run import edgeprof_db, refused, sha
from typer.testing import CliRunner

from edgeprof.cli import app


def record(**over: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "build_commit": "abc1234", "build_number": 4000, "cpu_info": "cpu", "gpu_info": "", "backends": "CPU",
        "model_filename": "m.gguf", "model_type": "llama 1B Q4_K_M", "model_size": 1000, "model_n_params": 10,
        "n_batch": 2048, "n_ubatch": 512, "n_threads": 4, "type_k": "f16", "type_v": "f16", "n_gpu_layers": 0,
        "flash_attn": 0, "n_prompt": 0, "n_gen": 16, "n_depth": 0, "test_time": "2025-01-02T03:04:05Z",
        "avg_ns": 1000000, "stddev_ns": 0, "avg_ts": 16000.0, "stddev_ts": 0.0,
        "samples_ns": [1000000], "samples_ts": [16000.0],
    }  # fmt: skip
    rec.update(over)
    return rec


HOSTILE = {
    "build-number-text": (json.dumps([record(build_number="abc")]), "build_number"),
    "flash-attn-on": (json.dumps([record(flash_attn="on")]), "flash_attn"),
    "threads-1e400": (json.dumps([record()]).replace('"n_threads": 4', '"n_threads": 1e400'), "n_threads"),
    "prompt-10e30": (json.dumps([record(n_prompt=10**30)]), "n_prompt"),
    "samples-10e30": (json.dumps([record(samples_ns=[10**30])]), "samples_ns"),
    "samples-million": (json.dumps([record(samples_ns=[1] * 1_000_000)]), "more than 10000"),
    "deep-json": ("[" * 100_000 + "]" * 100_000, "nested too deep"),
    "nested-field": (json.dumps([record(extra={"a": [1, [2]]})]), "extra is not a plain value"),
    "nan-rate": (json.dumps([record()]).replace('"avg_ts": 16000.0', '"avg_ts": NaN'), "avg_ts"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("hostile", [case("llama-bench-import-malformed")], ids=lambda c: c.id)
@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_malformed_record_is_one_line_and_nothing_stored(
    tmp_path: Path, name: str, hostile: object
) -> None:
    db = edgeprof_db(tmp_path / "e.db")
    text, word = HOSTILE[name]
    path = tmp_path / "bench.json"
    path.write_text(text)
    before = sha(db)
    refused(CliRunner().invoke(app, ["import-llama-bench", str(path), "--db", str(db)]), word)
    assert sha(db) == before


@pytest.mark.timeout(30)
@pytest.mark.parametrize("hostile", [case("llama-bench-import-fifo")], ids=lambda c: c.id)
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_fifo_or_a_device_is_refused_from_its_type(tmp_path: Path, kind: str, hostile: object) -> None:
    db = edgeprof_db(tmp_path / "e.db")
    path = tmp_path / "bench.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    before = sha(db)
    refused(CliRunner().invoke(app, ["import-llama-bench", str(path), "--db", str(db)]), "not a regular file")
    assert sha(db) == before


def test_a_well_formed_record_still_imports(tmp_path: Path) -> None:
    db = edgeprof_db(tmp_path / "e.db")
    path = tmp_path / "bench.json"
    path.write_text(json.dumps([record(flash_attn=True, samples_ns=[1000000, 1100000])]))
    result = CliRunner().invoke(app, ["import-llama-bench", str(path), "--db", str(db)])
    assert result.exit_code == 0, result.output
