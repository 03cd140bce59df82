"""A ``run`` imports only the executors its plan uses: a plain in-process sweep, run as a user runs it (the
CLI in a fresh interpreter), never imports the serving executors, the serving runners nor their HTTP
client; looking up a serving spec's executor imports it then."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.plans import plan_toml

pytestmark = pytest.mark.timeout(300)

SERVING_ONLY = (
    "edgeprof.executors.serving",
    "edgeprof.executors.openai_server",
    "edgeprof.executors.serving_soak",
    "edgeprof.runners.llama_server",
    "edgeprof.runners.openai_api",
    "edgeprof.runners.loadgen",
    "httpx",
)

# the CLI as the console script runs it, with every module loaded at its exit written to a file
DRIVER = """
import atexit, json, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv[0] = "edgeprof"
from edgeprof.cli import main
main()
"""


def _modules_after(argv: list[str], tmp_path: Path) -> set[str]:
    out = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if k != "EDGEPROF_DB"}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(out), *argv],
        cwd=tmp_path, env={**env, "NO_COLOR": "1"}, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return set(json.loads(out.read_text()))


def test_an_in_process_run_imports_no_serving_executor(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        plan_toml({"q8": tiny_models["Q8_0"]}, ctx=(64, 128), repeat={"warmup": 0, "steady": 1}),
        encoding="utf-8",
    )
    loaded = _modules_after(["run", str(plan), "--db", str(tmp_path / "r.db"), "--no-telemetry"], tmp_path)
    assert "edgeprof.executors.inprocess" in loaded  # the run did run its configs
    assert sorted(m for m in SERVING_ONLY if m in loaded) == []


def test_a_serving_runner_imports_its_executor_on_lookup() -> None:
    script = """
import sys
from edgeprof.executors import executor_for
before = "edgeprof.executors.serving" in sys.modules
executor_for("llama-cpp")
middle = "edgeprof.executors.serving" in sys.modules
executor_for("llama-server")
print(before, middle, "edgeprof.executors.serving" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "True"]
