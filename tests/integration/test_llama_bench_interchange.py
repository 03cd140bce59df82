"""edgeprof's llama-bench records meet llama-bench's own in the tools users run on them:

- llama.cpp's scripts/compare-llama-bench.py (taken from the llama-cpp-python sdist that scripts/setup.sh
  builds llama-bench from, never a copy in this repository) reads llama-bench's ``-o sql`` and edgeprof's
  ``report --format llama-bench-sql`` from one SQLite file and pairs every test of the same command line:
  model_type, the build and every key field as llama.cpp writes them (a K-quant's "Q4_K - Medium" too);
- ``edgeprof compare`` pairs every config of an ``import-llama-bench`` of llama-bench's json with an
  ``edgeprof bench`` of the same command (one context, one "every layer").
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from support.llama_bench_tool import llama_bench, needs_llama_bench
from support.paths import REPO_ROOT

pytestmark = pytest.mark.timeout(600)

SCRIPT = "vendor/llama.cpp/scripts/compare-llama-bench.py"
# two models (a K-quant among them), two tests each; few reps: the values are not what is checked here
ARGS = ["-p", "32", "-n", "8", "-t", "1", "-r", "2"]


def server_cache() -> Path:
    base = os.environ.get("EDGEPROF_SERVER_CACHE")
    if base:
        return Path(base)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "edgeprof" / "llama-server"


def compare_script(dest: Path) -> Path | None:
    """llama.cpp's compare-llama-bench.py from the build cache's unpacked source, else from its sdist."""
    for found in sorted(glob.glob(str(server_cache() / "*" / "work" / "src" / "*" / SCRIPT))):
        return Path(found)
    for sdist in sorted(glob.glob(str(server_cache() / "*" / "work" / "dl" / "llama_cpp_python-*.tar.gz"))):
        with tarfile.open(sdist) as tar:
            member = next((m for m in tar.getmembers() if m.name.endswith("/" + SCRIPT)), None)
            if member is None:
                continue
            data = tar.extractfile(member)
            if data is None:
                continue
            out = dest / "compare-llama-bench.py"
            out.write_bytes(data.read())
            return out
    return None


def edgeprof(args: list[str], db: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EDGEPROF_DB": str(db), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "edgeprof", *args], env=env, cwd=cwd, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


@pytest.fixture(scope="module")
def same_command(tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """llama-bench and edgeprof bench on the same command line, from the models' folder (so that
    model_filename reads the same in both): llama-bench's sql and json, edgeprof's database."""
    work = tmp_path_factory.mktemp("interchange")
    names = []
    for quant in ("Q8_0", "Q4_K_M"):
        target = work / tiny_models[quant].name
        shutil.copy(tiny_models[quant], target)
        names.append(target.name)
    argv = ["-m", ",".join(names), *ARGS]
    theirs_sql = llama_bench([*argv, "-o", "sql"], work)
    theirs_json = llama_bench([*argv, "-o", "json"], work)
    db = work / "e.db"
    done = edgeprof(["bench", *argv, "-o", "sql"], db, work)
    assert done.returncode == 0, done.stderr[-3000:]
    return {
        "work": work, "db": db, "theirs_sql": theirs_sql, "theirs_json": theirs_json, "ours_sql": done.stdout,
    }  # fmt: skip


def _rows(sql: str) -> list[dict[str, Any]]:
    db = sqlite3.connect(":memory:")
    db.row_factory = sqlite3.Row
    db.executescript(sql)
    return [dict(r) for r in db.execute("SELECT * FROM llama_bench ORDER BY rowid")]


@needs_llama_bench
def test_key_fields_are_llama_benchs_own(same_command: dict[str, Any]) -> None:
    """Every field compare-llama-bench.py pairs by is llama-bench's value; the model's description is
    llama.cpp's exactly (no size or file type approximated)."""
    theirs, ours = _rows(same_command["theirs_sql"]), _rows(same_command["ours_sql"])
    assert len(ours) == len(theirs) == 4
    per_run = {"build_commit", "build_number", "test_time", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts"}
    for a, b in zip(theirs, ours, strict=True):
        differ = {k: (a[k], b[k]) for k in a if k not in per_run and a[k] != b[k]}
        assert not differ, differ
    assert {r["model_type"] for r in ours} == {"llama ?B Q8_0", "llama ?B Q4_K - Medium"}
    # the build that ran: the in-process library's llama.cpp commit (what `edgeprof --version` says)
    version = subprocess.run(
        [sys.executable, "-m", "edgeprof", "--version"], capture_output=True, text=True, timeout=60
    ).stdout
    commit = version.split("(commit ")[1].split(")")[0] if "(commit " in version else "unknown"
    assert {r["build_commit"] for r in ours} == {commit.removesuffix("-dirty")}


@needs_llama_bench
def test_report_prints_llama_benchs_own_table(same_command: dict[str, Any]) -> None:
    """``report --format llama-bench-md``: llama-bench's default output, its header and rows as its own."""
    work, db = same_command["work"], same_command["db"]
    theirs = llama_bench(["-m", ",".join(sorted(p.name for p in work.glob("*.gguf"))), *ARGS], work)
    done = edgeprof(["report", "--format", "llama-bench-md"], db, work)
    assert done.returncode == 0, done.stderr
    ours, theirs_lines = done.stdout.splitlines(), theirs.splitlines()
    assert ours[:2] == theirs_lines[:2]
    assert len(ours) == len(theirs_lines) == 2 + 4 + 2  # header, 4 tests, blank, build line
    # model, size, params, backend, threads, test: the same in every row (t/s is this run's)
    assert sorted(line.split("|")[1:7] for line in ours[2:6]) == sorted(
        line.split("|")[1:7] for line in theirs_lines[2:6]
    )


def _recipe_rename() -> str:
    """The SQL of docs/interop.md's compare-llama-bench.py recipe that names llama-bench's rows apart."""
    text = (REPO_ROOT / "docs" / "interop.md").read_text(encoding="utf-8")
    rename = r'^sqlite3 llama-bench\.sqlite "(UPDATE llama_bench SET build_commit = [^"]+)"$'
    found = re.search(rename, text, re.M)
    assert found is not None, "docs/interop.md's recipe no longer names llama-bench's rows apart"
    return found.group(1)


@needs_llama_bench
def test_compare_llama_bench_py_pairs_every_test(same_command: dict[str, Any]) -> None:
    pytest.importorskip("git", reason="compare-llama-bench.py needs GitPython (pip install -e .[dev])")
    pytest.importorskip("tabulate", reason="compare-llama-bench.py needs tabulate (pip install -e .[dev])")
    work = same_command["work"]
    script = compare_script(work)
    assert script is not None, f"no llama.cpp sdist in {server_cache()} (scripts/setup.sh keeps it)"
    path = work / "llama-bench.sqlite"
    db = sqlite3.connect(path)
    db.executescript(same_command["theirs_sql"])  # as `llama-bench -o sql | sqlite3 llama-bench.sqlite`
    ours = {r["build_commit"] for r in _rows(same_command["ours_sql"])}
    # the script compares two builds: llama-bench's side is named apart as docs/interop.md's recipe does
    # (one llama.cpp commit built both tools here, so without it nothing would be paired)
    db.execute(_recipe_rename())
    theirs = {r[0] for r in db.execute("SELECT DISTINCT build_commit FROM llama_bench")}
    assert theirs == {"llbench"}
    db.executescript(same_command["ours_sql"])
    db.commit()
    db.close()
    baseline, compare = theirs.pop(), ours.pop()
    done = subprocess.run(
        [sys.executable, str(script), "-i", str(path), "-b", baseline, "-c", compare],
        cwd=work, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("|") and "---" not in line]
    header, body = lines[0], lines[1:]
    assert f"t/s {baseline}" in header and f"t/s {compare}" in header and "Speedup" in header
    tests = sorted((cells[2], cells[3]) for cells in ([c.strip() for c in line.split("|")] for line in body))
    # the script prints "Q4_K - Medium" as "Q4_K_M" (its MODEL_SUFFIX_REPLACE); it paired by the full name
    assert tests == sorted(
        (model, test) for model in ("llama ?B Q4_K_M", "llama ?B Q8_0") for test in ("pp32", "tg8")
    ), done.stdout
    for line in body:  # both sides measured, a speedup computed: the rows were paired
        cells = [c.strip() for c in line.split("|")]
        assert float(cells[-4]) > 0 and float(cells[-3]) > 0 and float(cells[-2]) > 0, line


@needs_llama_bench
def test_compare_pairs_an_import_with_a_bench_of_the_same_command(same_command: dict[str, Any]) -> None:
    work, db = same_command["work"], same_command["db"]
    (work / "theirs.json").write_text(same_command["theirs_json"])
    done = edgeprof(["import-llama-bench", "theirs.json", "--json"], db, work)
    assert done.returncode == 0, done.stderr
    imported = json.loads(done.stdout)
    assert imported["tests"] == 4 and imported["imported"] is True
    compared = edgeprof(["compare", "1", str(imported["sweep_id"]), "--format", "json"], db, work)
    assert compared.returncode == 0, compared.stderr
    rows = json.loads(compared.stdout)
    rows = rows["rows"] if isinstance(rows, dict) else rows
    assert len(rows) == 4 and {r["match"] for r in rows} == {"both"}, rows
    assert {(r["quant"], r["workload"]) for r in rows} == {
        (q, t) for q in ("Q8_0", "Q4_K_M") for t in ("pp32", "tg8")
    }  # fmt: skip
