"""``edgeprof bench`` against the real llama-bench (scripts/setup.sh builds it from the same vendored
llama.cpp as the wheel), same arguments, on the tiny demo model: the same field names in -o json, the same
configs, values that agree (timings as a ratio within a loose band: the machine is shared and noisy), the
import of llama-bench's own json/jsonl round-tripping through ``report --format llama-bench-json``,
llama-bench's csv/sql/md layouts, and the exit codes (2 for a bad flag, 1 when a config failed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.llama_bench_tool import llama_bench, needs_llama_bench

from edgeprof.report.llamabench import FIELD_NAMES, SAMPLE_FIELDS
from edgeprof.runners import FAULT_ENV

pytestmark = pytest.mark.timeout(600)


# -t 1: one thread, so that a core taken by another process stalls no thread barrier (the tiny model's
# tests last milliseconds; at -t 2 on a shared 2-core machine one preemption costs more than the test)
ARGS = ["-p", "32", "-n", "8", "-t", "1", "-r", "3"]
# Fields whose value is this run's own (when it ran, how fast it was, which build ran it: the wheel's and
# llama-bench's are two builds, tests/integration/test_llama_bench_interchange.py checks the build fields)
PER_RUN = {"test_time", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts", "samples_ns", "samples_ts"}
BUILD = {"build_commit", "build_number"}
# A loose band for one tool's best rate over the other's: both measure the same llama.cpp on a machine
# other jobs share; a wrong token count or a unit slip is off by far more (x16 for a tg test counted as one
# token, x1000 for ms taken as ns)
BAND = (0.25, 4.0)


def edgeprof(args: list[str], db: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EDGEPROF_DB": str(db), "NO_COLOR": "1", **kw.pop("env", {})}
    return subprocess.run(
        [sys.executable, "-m", "edgeprof", *args], env=env, capture_output=True, text=True, timeout=300, **kw
    )


@pytest.fixture(scope="module")
def compared(tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """llama-bench's and edgeprof's -o json for the same command line, run from the model's folder so
    model_filename reads the same relative path in both."""
    work = tmp_path_factory.mktemp("bench")
    model = work / "tiny-q8_0.gguf"
    shutil.copy(tiny_models["Q8_0"], model)
    theirs = json.loads(llama_bench(["-m", model.name, *ARGS, "-o", "json"], work))
    done = edgeprof(["bench", "-m", model.name, *ARGS, "-o", "json"], work / "e.db", cwd=work)
    assert done.returncode == 0, done.stderr[-3000:]
    return {
        "work": work,
        "model": model,
        "theirs": theirs,
        "ours": json.loads(done.stdout),
        "db": work / "e.db",
    }


@needs_llama_bench
def test_bench_json_has_llama_benchs_fields_and_values(compared: dict[str, Any]) -> None:
    theirs, ours = compared["theirs"], compared["ours"]
    assert [list(r) for r in ours] == [list(r) for r in theirs]  # the same fields, in the same order
    assert list(theirs[0]) == [*FIELD_NAMES, *SAMPLE_FIELDS]  # the field list is this llama-bench's
    assert [(r["n_prompt"], r["n_gen"]) for r in ours] == [(32, 0), (0, 8)]
    for a, b in zip(theirs, ours, strict=True):
        same = {k: (a[k], b[k]) for k in a if k not in PER_RUN | BUILD}  # model_type too: llama.cpp's own
        assert all(x == y for x, y in same.values()), {k: v for k, v in same.items() if v[0] != v[1]}
        assert len(b["samples_ns"]) == len(a["samples_ns"]) == 3
        ratio = max(b["samples_ts"]) / max(a["samples_ts"])
        assert BAND[0] < ratio < BAND[1], (a["samples_ts"], b["samples_ts"])


@needs_llama_bench
@pytest.mark.parametrize("kind", ["json", "jsonl"])
def test_import_of_llama_benchs_output_round_trips(compared: dict[str, Any], kind: str) -> None:
    work, model = compared["work"], compared["model"]
    if kind == "json":
        original = compared["theirs"]
        path = work / "theirs.json"
        path.write_text(json.dumps(original))
    else:
        text = llama_bench(["-m", model.name, *ARGS, "-o", "jsonl"], work)
        original = [json.loads(line) for line in text.splitlines()]
        path = work / "theirs.jsonl"
        path.write_text(text)
    db = work / f"import-{kind}.db"
    done = edgeprof(["import-llama-bench", str(path)], db)
    assert done.returncode == 0, done.stderr
    assert "marked imported" in done.stdout
    sweep_id = int(done.stdout.split("sweep ")[1].split(",")[0])
    back = edgeprof(["report", "--sweep", str(sweep_id), "--format", "llama-bench-json"], db)
    assert back.returncode == 0, back.stderr
    rows = json.loads(back.stdout)
    assert [list(r) for r in rows] == [list(r) for r in original]
    for a, b in zip(original, rows, strict=True):
        for key, value in a.items():
            if isinstance(value, float) or key == "samples_ts":
                # llama-bench prints doubles with 6 decimals, samples_ts with 6 significant digits
                assert b[key] == pytest.approx(value, rel=1e-5), key
            else:
                assert b[key] == value, key


@needs_llama_bench
def test_text_layouts_are_llama_benchs(compared: dict[str, Any]) -> None:
    """csv header, sql table and md header line as llama-bench writes them for the same command."""
    work, model, db = compared["work"], compared["model"], compared["db"]
    for kind in ("csv", "sql"):
        theirs = llama_bench(["-m", model.name, *ARGS, "-o", kind], work).splitlines()
        ours = edgeprof(["report", "--format", f"llama-bench-{kind}"], db).stdout.splitlines()
        head = 1 if kind == "csv" else len(FIELD_NAMES) + 2  # the header, or the CREATE TABLE statement
        assert ours[:head] == theirs[:head]
        assert len(ours) == len(theirs)
    theirs_md = llama_bench(["-m", model.name, *ARGS], work).splitlines()
    from edgeprof.report.llamabench import sweep_records
    from edgeprof.report.render.llama_bench import FORMATS
    from edgeprof.storage.db import new_session, open_engine

    with new_session(open_engine(db, read_only=True)) as s:
        ours_md = FORMATS["md"](sweep_records(s, None)).splitlines()
    assert ours_md[:2] == theirs_md[:2]  # the same columns, widths and alignment
    assert [line.split("|")[-3] for line in ours_md[2:4]] == [line.split("|")[-3] for line in theirs_md[2:4]]
    assert ours_md[-1].startswith("build: ") and theirs_md[-1].startswith("build: ")  # <commit> (<number>)


def test_a_bad_flag_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for argv in (["-m", "x.gguf", "-p", "1-"], ["-m", "x.gguf", "--mmap", "0"], ["-p", "64"]):
        done = edgeprof(["bench", *argv], tmp_path / "e.db")
        assert done.returncode == 2, done
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("edgeprof: error: ")
        assert done.stdout == ""
    shown = edgeprof(["bench", "-h"], tmp_path / "e.db")  # llama-bench's help flag
    assert shown.returncode == 0 and "-pg PP,TG" in shown.stdout
    missing = edgeprof(["bench", "-m", str(tmp_path / "none.gguf")], tmp_path / "e.db")
    assert missing.returncode == 2 and missing.stderr.startswith("edgeprof: error: ")


def test_a_failed_config_exits_1_and_the_rest_is_printed(
    tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    """The q4 model's worker dies before its decode (both its tests fail); the sweep goes on, stores and
    prints what ran, and exits 1 as ``run`` does."""
    q8, q4 = tiny_models["Q8_0"], tiny_models["Q4_K_M"]
    done = edgeprof(
        ["bench", "-m", f"{q8},{q4}", "-p", "16", "-n", "4", "-t", "1", "-r", "1", "-o", "jsonl",
         "--no-telemetry"],
        tmp_path / "e.db",
        env={FAULT_ENV: f"exit@decode:{q4.name}"},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    printed = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(Path(r["model_filename"]).name, r["n_prompt"], r["n_gen"]) for r in printed] == [
        (q8.name, 16, 0),
        (q8.name, 0, 4),
    ]
    assert "sweep 1: 2 error, 2 ok" in done.stderr
