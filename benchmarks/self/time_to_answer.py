"""Time to an answer: ``edgeprof bench`` against ``llama-bench`` on the same command line, wall clock from
start to exit, and where edgeprof's extra time goes.

Runs, in rotating order per round: llama-bench; ``edgeprof bench --no-telemetry``; ``edgeprof bench``
(telemetry on). Each edgeprof run writes a fresh database. Its stderr lines are time-stamped as they
arrive, which splits its wall time into: start-up (interpreter, imports, plan, database) up to its first
line; the pre-flight (busy-process scan, memory-bandwidth probe with telemetry) up to the first config;
each config's child process (spawn, llama_cpp import and model load up to "loaded", then the reps); and
the tail (records read back, output printed).

    .venv/bin/python benchmarks/self/time_to_answer.py [--rounds 5] [--size small|tiny] [--model PATH]
        [--args "-p 512 -n 128"] [--record]

Writes ``benchmarks/out/time-to-answer-<time>.json`` and prints the medians and ratios. The machine's
load average is recorded before and after: on a shared machine the ratios move with it. ``--record`` (the
README's quick command, on a quiet machine) also writes ``benchmarks/recorded/time-to-answer.json``: the
figures the README and docs/interop.md quote, as ``doc_figures`` words them; tests/unit/test_docs.py checks
that the pages say what the record holds.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
OUT_DIR = REPO / "benchmarks" / "out"
RECORD = REPO / "benchmarks" / "recorded" / "time-to-answer.json"
DEFAULT_ARGS = "-p 512 -n 128"  # llama-bench's own defaults (and -r 5, threads = physical cores)


def llama_bench_path() -> str:
    found = Path(sys.prefix) / "bin" / "llama-bench"
    return str(found) if found.is_file() else (shutil.which("llama-bench") or "llama-bench")


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, list[tuple[float, str]], int]:
    """(wall seconds, [(seconds since start, stderr line)], exit code) of one run."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[tuple[float, str]] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append((time.monotonic() - t0, line.rstrip()))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    code = proc.wait(timeout=600)
    wall = time.monotonic() - t0
    reader.join(timeout=10)
    return wall, lines, code


def phases(wall: float, lines: list[tuple[float, str]]) -> dict[str, float]:
    """edgeprof's wall time split by its stderr lines (see the module docstring)."""
    first = lines[0][0] if lines else wall
    starts = [t for t, line in lines if line.endswith("… running")]
    loaded = [t for t, line in lines if "  loaded (" in line]
    ends = [t for t, line in lines if line.startswith("[") and " run " in line and ("  ok  " in line)]
    last_end = ends[-1] if ends else wall
    out = {
        "startup_s": first,
        "preflight_s": (starts[0] - first) if starts else 0.0,
        "child_spawn_and_load_s": sum(b - a for a, b in zip(starts, loaded, strict=False)),
        "reps_s": sum(b - a for a, b in zip(loaded, ends, strict=False)),
        "between_configs_s": sum(b - a for a, b in zip(ends, starts[1:], strict=False)),
        "tail_s": wall - last_end,
    }
    return {k: round(v, 3) for k, v in out.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model", type=Path, default=None, help="default: the demo model of --size (built)")
    parser.add_argument("--size", default="small", help="demo size: small (edgeprof demo's) or tiny")
    parser.add_argument("--args", default=DEFAULT_ARGS, help=f"llama-bench's flags (default {DEFAULT_ARGS!r})")
    parser.add_argument("--record", action="store_true", help=f"also write {RECORD.relative_to(REPO)}")
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="edgeprof-tta-"))
    model = opts.model
    if model is None:
        from edgeprof.gguf.demo import build_demo_models

        model = build_demo_models(work / "models", opts.size)["Q8_0"]
    local = work / model.name
    shutil.copy(model, local)
    argv = ["-m", local.name, *shlex.split(opts.args), "-o", "json"]
    env = {**os.environ, "NO_COLOR": "1"}
    kinds = {
        "llama-bench": lambda: [llama_bench_path(), *argv],
        "edgeprof --no-telemetry": lambda: [sys.executable, "-m", "edgeprof", "bench", *argv, "--no-telemetry"],
        "edgeprof": lambda: [sys.executable, "-m", "edgeprof", "bench", *argv],
    }
    walls: dict[str, list[float]] = {k: [] for k in kinds}
    split: dict[str, list[dict[str, float]]] = {k: [] for k in kinds if k != "llama-bench"}
    load_before = os.getloadavg()
    for rnd in range(opts.rounds):
        order = list(kinds)[rnd % 3 :] + list(kinds)[: rnd % 3]
        for kind in order:
            db = work / f"r{rnd}-{kind.replace(' ', '_')}.db"
            wall, lines, code = timed(kinds[kind](), {**env, "EDGEPROF_DB": str(db)}, work)
            if code != 0:
                print(f"{kind}: exit {code}\n" + "\n".join(line for _t, line in lines[-10:]), file=sys.stderr)
                return 1
            walls[kind].append(round(wall, 3))
            if kind in split:
                split[kind].append(phases(wall, lines))
    load_after = os.getloadavg()
    median = {k: statistics.median(v) for k, v in walls.items()}
    base = median["llama-bench"]
    result: dict[str, Any] = {
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "command": shlex.join(argv),
        "tests": _tests(opts.args),
        "model": str(model),
        "rounds": opts.rounds,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "wall_s": walls,
        "median_wall_s": median,
        "ratio_to_llama_bench": {k: round(v / base, 2) for k, v in median.items()},
        "median_phases_s": {
            k: {p: statistics.median(s[p] for s in v) for p in v[0]} for k, v in split.items() if v
        },
    }
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    out = OUT_DIR / f"time-to-answer-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: result[k] for k in ("median_wall_s", "ratio_to_llama_bench", "median_phases_s")}, indent=2))
    print(f"written: {out}", file=sys.stderr)
    if opts.record:
        RECORD.parent.mkdir(parents=True, exist_ok=True)
        RECORD.write_text(json.dumps(result, indent=2) + "\n")
        print(f"recorded: {RECORD}; the docs quote:\n" + "\n".join(doc_figures(result).values()), file=sys.stderr)
    shutil.rmtree(work, ignore_errors=True)
    return 0


def _tests(args: str) -> int:
    """How many tests a llama-bench command line runs (one per -p and -n value that is not 0)."""
    words = shlex.split(args)
    count = 0
    for flag, default in (("-p", "512"), ("-n", "128")):
        values = [words[i + 1] for i, w in enumerate(words[:-1]) if w == flag] or [default]
        count += sum(1 for v in ",".join(values).split(",") if v.strip() not in ("", "0"))
    return count


def doc_figures(record: dict[str, Any]) -> dict[str, str]:
    """The figures of a record as the README and docs/interop.md word them (seconds to 2 decimals)."""
    wall = record["median_wall_s"]
    ratio = record["ratio_to_llama_bench"]
    phase = record["median_phases_s"]["edgeprof --no-telemetry"]
    per_test = phase["child_spawn_and_load_s"] / max(1, int(record["tests"]))
    load = max(record["loadavg_before"][0], record["loadavg_after"][0])
    return {
        "bench": f"{wall['edgeprof --no-telemetry']:.2f} s",
        "llama_bench": f"{wall['llama-bench']:.2f} s",
        "telemetry": f"{wall['edgeprof']:.2f} s",
        "ratio": f"{ratio['edgeprof --no-telemetry']:.2f}×",
        "ratio_telemetry": f"{ratio['edgeprof']:.2f}×",
        "startup": f"{phase['startup_s']:.2f} s",
        "preflight": f"{phase['preflight_s']:.2f} s",
        "per_test": f"{per_test:.2f} s",
        "tail": f"{phase['tail_s']:.2f} s",
        "when": f"{record['date_utc']} UTC, load {load:.1f}",
    }


if __name__ == "__main__":
    sys.exit(main())
