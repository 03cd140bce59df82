#!/usr/bin/env python3
"""``import-tegrastats`` speed on a 100 MB log (SYNTHETIC: made from a real AGX Orin capture).

The log is built from the three real AGX Orin 64GB lines in ``tests/fixtures/captures/tegrastats/``
(``agx-orin-64gb_jp6.2.1-r36.4.4_3.txt``): cycled, with consecutive 1-s timestamps and the CPU loads,
clocks, temperatures and rail powers perturbed by random walks (so the values are not three lines
repeated; the format is exactly the real one). Then it times, as child processes:

* ``edgeprof import-tegrastats LOG --db DB`` (the bulk path: sample blocks through ``storage.samples``),
* ``edgeprof import-tegrastats LOG`` (the summary mode), with the child's peak RSS (bounded memory).

Usage: python benchmarks/self/import_speed.py [--mb 100] [--out benchmarks/out/import]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "tests" / "fixtures" / "captures" / "tegrastats" / "agx-orin-64gb_jp6.2.1-r36.4.4_3.txt"
_CPU = re.compile(r"(\d+)%@(\d+)")
_TEMP = re.compile(r"@(\d+\.\d+)C")
_MW = re.compile(r"(\d+)mW/(\d+)mW")


def make_log(path: Path, mb: float, seed: int = 0) -> int:
    rng = random.Random(seed)
    lines = [ln.split(" ", 2)[2] for ln in CAPTURE.read_text().splitlines() if ln and not ln.startswith("#")]
    temp_off = 0.0
    mw_off = 0
    t = 1_767_225_600  # 2026-01-01 00:00:00 UTC
    target = int(mb * 1e6)
    written = 0
    n = 0
    with path.open("w", encoding="utf-8") as f:
        while written < target:
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out" / "import")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
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
