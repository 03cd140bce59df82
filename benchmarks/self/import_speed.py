#!/usr/bin/env python3
"""``import-tegrastats`` speed on a 100 MB log (SYNTHETIC: made from a real AGX Orin capture).

The log is built from the three real AGX Orin 64GB lines in ``tests/fixtures/captures/tegrastats/``
(``agx-orin-64gb_jp6.2.1-r36.4.4_3.txt``): cycled, with consecutive 1-s timestamps and the CPU loads,
clocks, temperatures and rail powers perturbed by random walks (so the values are not three lines
repeated; the format is exactly the real one). Then it times, as child processes:

* ``edgeprof import-tegrastats LOG --db DB`` (the bulk path: sample blocks through ``storage.samples``),
* ``edgeprof import-tegrastats LOG`` (the summary mode), with the child's peak RSS (bounded memory).

``--lines 200000,360000``: instead, per line count a log of that many lines (a 55-hour and a 100-hour log at
1 Hz; an overnight log at 100 ms is 360 000 lines), imported with ``edgeprof import-log LOG --db DB`` (time
and the child's peak RSS: the import judges the log once and stores its verdict), then the reads of that
sweep, each a child process timed alone: ``report --format json``, ``analyse`` and ``status``. Each read
must take under 2 s (``--max-read-s``; exit 1 otherwise): they read the stored verdict, never the samples,
so a 300-line log is the baseline (the CLI's start-up) that the long ones should match.

Usage: python benchmarks/self/import_speed.py [--mb 100 | --lines 200000,360000] [--out benchmarks/out/import]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "tests" / "fixtures" / "captures" / "tegrastats" / "agx-orin-64gb_jp6.2.1-r36.4.4_3.txt"
_CPU = re.compile(r"(\d+)%@(\d+)")
_TEMP = re.compile(r"@(\d+\.\d+)C")
_MW = re.compile(r"(\d+)mW/(\d+)mW")


def make_log(path: Path, mb: float, seed: int = 0, lines_wanted: int | None = None) -> int:
    rng = random.Random(seed)
    lines = [ln.split(" ", 2)[2] for ln in CAPTURE.read_text().splitlines() if ln and not ln.startswith("#")]
    temp_off = 0.0
    mw_off = 0
    t = 1_767_225_600  # 2026-01-01 00:00:00 UTC
    target = int(mb * 1e6)
    written = 0
    n = 0
    with path.open("w", encoding="utf-8") as f:
        while (n < lines_wanted) if lines_wanted is not None else (written < target):
            body = lines[n % len(lines)]
            temp_off = max(-10.0, min(30.0, temp_off + rng.choice((-0.031, 0.0, 0.031))))
            mw_off = max(-1000, min(8000, mw_off + rng.randrange(-200, 201)))
            body = _CPU.sub(lambda m: f"{rng.randrange(0, 101)}%@{m.group(2)}", body)
            body = _TEMP.sub(lambda m, dt=temp_off: f"@{float(m.group(1)) + dt:.3f}C", body)
            body = _MW.sub(lambda m, dw=mw_off: f"{int(m.group(1)) + dw}mW/{int(m.group(2)) + dw}mW", body)
            stamp = time.strftime("%m-%d-%Y %H:%M:%S", time.gmtime(t + n))
            line = f"{stamp} {body}\n"
            f.write(line)
            written += len(line)
            n += 1
    return n


def run(args: list[str]) -> dict[str, float | int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "edgeprof", *args], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=sys.stderr)
    return {
        "rc": proc.returncode,
        "wall_s": wall,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "max_rss_mb": after.ru_maxrss / 1024.0,  # the largest child so far (this is the only one running)
        "last_line": (proc.stdout.strip().splitlines() or [""])[-1][:200],
    }


def run_alone(args: list[str]) -> dict[str, float | int | str]:
    """One edgeprof child, its own wall time, CPU time and peak RSS (``os.wait4``: this child's, not the
    largest of all children so far)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "edgeprof", *args], stdout=out, stderr=err)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        print(stderr[-2000:], file=sys.stderr)
    return {
        "rc": proc.returncode,
        "wall_s": round(wall, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "max_rss_mb": round(usage.ru_maxrss / 1024.0, 1),
        "last_line": (stdout.strip().splitlines() or [""])[-1][:200],
    }


def read_figures(lines: list[int], out: Path, max_read_s: float) -> int:
    """Per line count: import-log --db, then report --format json, analyse and status of that sweep."""
    results: list[dict[str, object]] = []
    failed = False
    for n in lines:
        log = out / f"synthetic-agx-orin-{n}.log"
        db = out / f"import-{n}.db"
        for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
            p.unlink(missing_ok=True)
        made = make_log(log, 0.0, lines_wanted=n)
        entry: dict[str, object] = {
            "label": "SYNTHETIC (from a real AGX Orin capture)",
            "lines": made,
            "log_bytes": log.stat().st_size,
            "load_before": os.getloadavg(),
            "import": run_alone(["import-log", str(log), "--db", str(db)]),
        }
        for name, cmd in (
            ("report_json", ["report", "--db", str(db), "--format", "json"]),
            ("analyse", ["analyse", "--db", str(db)]),
            ("status", ["status", "--db", str(db)]),
        ):
            entry[name] = run_alone(cmd)
            failed |= entry[name]["rc"] != 0 or entry[name]["wall_s"] >= max_read_s  # type: ignore[index,operator]
        entry["load_after"] = os.getloadavg()
        results.append(entry)
        imp = entry["import"]
        print(f"SYNTHETIC log, {made:,} lines ({entry['log_bytes'] / 1e6:.1f} MB), "  # type: ignore[operator]
              f"load {entry['load_before'][0]:.2f} -> {entry['load_after'][0]:.2f}")  # type: ignore[index]  # fmt: skip
        print(f"  import-log --db: wall {imp['wall_s']:.1f} s, cpu {imp['cpu_s']:.1f} s, "  # type: ignore[index]
              f"peak RSS {imp['max_rss_mb']:.0f} MB")  # type: ignore[index]  # fmt: skip
        for name in ("report_json", "analyse", "status"):
            r = entry[name]
            print(f"  {name}: wall {r['wall_s']:.2f} s, cpu {r['cpu_s']:.2f} s, rc {r['rc']}")  # type: ignore[index]
    (out / "import-read-speed.json").write_text(json.dumps(results, indent=2))
    if failed:
        print(f"FAIL: a read failed or took {max_read_s:g} s or more", file=sys.stderr)
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--lines", default=None, help="comma-separated line counts: the read-speed figures")
    ap.add_argument("--max-read-s", type=float, default=2.0)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out" / "import")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.lines:
        return read_figures([int(x) for x in args.lines.split(",")], args.out, args.max_read_s)
    log = args.out / "synthetic-agx-orin.log"
    db = args.out / "import.db"
    for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        p.unlink(missing_ok=True)
    n_lines = make_log(log, args.mb)
    size = log.stat().st_size
    summary = run(["import-tegrastats", str(log)])  # first: its peak RSS is not masked by the --db run
    stored = run(["import-tegrastats", str(log), "--db", str(db)])
    result = {
        "label": "SYNTHETIC (from a real AGX Orin capture)",
        "log_bytes": size,
        "lines": n_lines,
        "db": stored,
        "db_bytes": db.stat().st_size if db.exists() else None,
        "summary": summary,
    }
    (args.out / "import-speed.json").write_text(json.dumps(result, indent=2))
    print(f"SYNTHETIC log: {size / 1e6:.1f} MB, {n_lines:,} lines")
    print(f"  --db:    wall {stored['wall_s']:.1f} s, cpu {stored['cpu_s']:.1f} s, "
          f"DB {result['db_bytes'] / 1e6 if result['db_bytes'] else float('nan'):.1f} MB  ({stored['last_line']})")  # fmt: skip
    print(f"  summary: wall {summary['wall_s']:.1f} s, cpu {summary['cpu_s']:.1f} s, "
          f"peak RSS {summary['max_rss_mb']:.0f} MB")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
