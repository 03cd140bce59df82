"""The command line where a user meets it: a usage error is one line ``edgeprof: error: ...`` and exit 2
(never a framed box of usage text), ``analyse`` wraps to the terminal and has ``--json`` as ``push``,
``import`` and ``import-llama-bench`` do, ``--device-name`` / ``$EDGEPROF_DEVICE_NAME`` name a device
without changing the hostname, and ``bench`` takes llama-bench's remaining flags (or says why not), under
the same thread ceiling as a plan. Read from the golden fixture database, in fresh processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.golden import env_for, load_db

from edgeprof.plan.bounds import logical_cpus

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def golden_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = load_db(tmp_path_factory.mktemp("seams") / "golden.db")
    assert run(["db", "upgrade"], db).returncode == 0
    return db


def run(args: list[str], db: Path, columns: int | None = None, **env: str) -> subprocess.CompletedProcess:
    environ = env_for(db)
    environ.pop("COLUMNS", None)
    if columns is not None:
        environ["COLUMNS"] = str(columns)
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-m", "edgeprof", *args], env=environ, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["report", "--format", "xml"], "'xml' is not one of"),
        (["report", "--no-such-option"], "No such option: --no-such-option"),
        (["import-llama-bench"], "Missing argument 'file'"),
        (["no-such-command"], "No such command"),
        (["report", "--sweep", "x"], "Invalid value for '--sweep'"),
    ],
)
def test_a_usage_error_is_one_line_and_exit_2(golden_db: Path, args: list[str], said: str) -> None:
    done = run(args, golden_db)
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("edgeprof: error: "), done.stderr
    command = args[0] if args[0] != "no-such-command" else ""
    assert said in done.stderr and f"(see {' '.join(['edgeprof', command]).strip()} --help)" in done.stderr
    assert "╭" not in done.stderr and "Usage:" not in done.stderr


def test_help_still_exits_0(golden_db: Path) -> None:
    done = run(["report", "--help"], golden_db)
    assert done.returncode == 0 and "Usage:" in done.stdout


def test_analyse_wraps_to_the_terminal_and_has_json(golden_db: Path) -> None:
    wrapped = run(["analyse", "--sweep", "1"], golden_db, columns=80)
    assert wrapped.returncode == 0, wrapped.stderr
    assert wrapped.stdout and max(len(line) for line in wrapped.stdout.splitlines()) <= 80
    whole = run(["analyse", "--sweep", "1"], golden_db)  # piped: whole lines for a script
    assert max(len(line) for line in whole.stdout.splitlines()) > 80
    as_json = run(["analyse", "--sweep", "1", "--json"], golden_db, columns=80)
    doc = json.loads(as_json.stdout)  # as --format json: run id -> verdict kind -> value and evidence
    assert doc == json.loads(run(["analyse", "--sweep", "1", "--format", "json"], golden_db).stdout)
    first = next(iter(doc.values()))
    assert {"value", "evidence"} <= set(next(iter(first.values())))


def test_push_and_import_have_json(golden_db: Path, tmp_path: Path) -> None:
    target = tmp_path / "central.db"
    pushed = run(["push", "--to", str(target), "--sweep", "1", "--json"], golden_db)
    assert pushed.returncode == 0, pushed.stderr
    doc = json.loads(pushed.stdout)
    assert [s["sweep_id"] for s in doc["sent"]] == [1] and doc["rows_added"] > 0
    again = json.loads(run(["push", "--to", str(target), "--sweep", "1", "--json"], golden_db).stdout)
    assert again["sent"] == [] and again["already_there"] == [1] and again["rows_added"] == 0
    export = tmp_path / "s1.jsonl"
    assert run(["export", "--sweep", "1", "-o", str(export)], golden_db).returncode == 0
    imported = run(["import", str(export), "--json", "--db", str(tmp_path / "other.db")], golden_db)
    assert imported.returncode == 0, imported.stderr
    doc = json.loads(imported.stdout)
    assert len(doc["sweeps"]) == 1 and doc["rows_added"] == doc["sweeps"][0]["rows_added"] > 0


def _device_of_a_bench(tiny: Path, db: Path, *args: str, **env: str) -> str:
    done = run(
        [*args, "bench", "-m", str(tiny), "-p", "8", "-n", "0", "-r", "1", "-t", "1", "--no-telemetry", "-o",
         "jsonl"], db, **env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    listed = run(["sweeps", "--json"], db)
    newest = max(json.loads(listed.stdout), key=lambda s: s["sweep_id"])
    return str(newest["device_hostname"])


def test_a_device_is_named_by_option_or_environment(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    assert _device_of_a_bench(tiny_models["Q8_0"], db, "--device-name", "bench-rig-1") == "bench-rig-1"
    assert _device_of_a_bench(tiny_models["Q8_0"], db, EDGEPROF_DEVICE_NAME="bench-rig-2") == "bench-rig-2"
    bad = run(["--device-name", "a\tb", "sweeps"], db)
    assert bad.returncode == 2 and bad.stderr.startswith("edgeprof: error: --device-name")
    bad_env = run(["sweeps"], db, EDGEPROF_DEVICE_NAME="x" * 65)
    assert bad_env.returncode == 2 and "EDGEPROF_DEVICE_NAME" in bad_env.stderr


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["-embd", "1"], "-embd 1: edgeprof measures generation, not embeddings"),
        (["--prio", "4"], "--prio 4: expected -1..3"),
        (["-C", "0xzz"], "-C 0xzz: a CPU mask is hex"),
        (["--poll", "101"], "--poll 101: expected 0..100"),
        (["-nkvo", "2"], "-nkvo: '2' is not 0 or 1"),
        (["-t", str(logical_cpus() + 1)], "logical CPUs; more only oversubscribes"),
    ],
)
def test_bench_refuses_what_it_cannot_run_with_reason(tmp_path: Path, flags: list[str], said: str) -> None:
    done = run(["bench", "-m", "x.gguf", *flags], tmp_path / "e.db")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert said in done.stderr


def test_the_same_thread_ceiling_as_a_plan(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        f'name = "t"\n[matrix]\nmodels = ["{tiny_models["Q8_0"]}"]\nthreads = [{logical_cpus() + 1}]\n'
        '[[workload]]\nname = "w"\nprompt_tokens = 8\nn_predict = 2\n'
    )
    checked = run(["run", str(plan), "--check"], tmp_path / "e.db")
    assert checked.returncode == 2 and "logical CPUs; more only oversubscribes" in checked.stderr


def test_bench_takes_llama_benchs_remaining_flags(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    done = run(
        ["bench", "-m", str(tiny_models["Q8_0"]), "-p", "8", "-n", "2", "-r", "1", "-t", "1", "-nkvo", "1",
         "-nopo", "0", "--poll", "0", "--delay", "0", "--no-warmup", "-C", "0x1", "--cpu-strict", "1",
         "--prio", "0", "-embd", "0", "-oe", "csv", "--progress", "-v", "-o", "jsonl", "--no-telemetry"],
        tmp_path / "e.db",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["n_prompt"], r["n_gen"]) for r in records] == [(8, 0), (0, 2)]
    assert all(r["no_kv_offload"] is True and r["poll"] == 0 for r in records)
    # the threadpool on CPU 0 only, one thread per CPU, as llama-bench -C 0x1 --cpu-strict 1 prints it
    assert all(r["cpu_mask"] == "0x1" and r["cpu_strict"] is True for r in records)
    assert "build_commit,build_number," in done.stderr  # -oe csv: a second copy on stderr
    # --no-warmup: no warm-up rep was stored
    listed = run(["report", "--format", "json"], tmp_path / "e.db")
    rows = json.loads(listed.stdout)
    rows = rows["rows"] if isinstance(rows, dict) else rows
    assert all(r.get("n_warmup", 0) in (0, None) for r in rows)
    assert os.environ.get("EDGEPROF_DEVICE_NAME") is None  # the test process itself was left alone
