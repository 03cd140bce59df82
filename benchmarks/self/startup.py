"""Start-up time of the CLI: `edgeprof --help`, `edgeprof status`, `edgeprof --version`, interleaved rounds.

    .venv/bin/python benchmarks/self/startup.py [--rounds 15] [--before-checkout DIR]

`--before-checkout DIR` times an older checkout side by side (e.g. `git archive a82f996 | tar -x -C /tmp/old`):
its folders are laid out as the wheel installs them (a tree of links, as scripts/typecheck.sh does) and put
first on PYTHONPATH, ahead of this venv's editable install; a checkout from before the `edgeprof` import
name is run as `python -m agent.cli` with DIR on PYTHONPATH.
Both run with this venv's interpreter, interleaved round by round, so the host's slow phases hit both alike;
the table gives min and median wall seconds of each, and the ratio of medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def link_tree(checkout: Path, into: Path) -> Path:
    """``into/edgeprof`` laid out as installed: agent/'s entries, and collectors, runners, storage inside."""
    package = into / "edgeprof"
    package.mkdir(parents=True)
    for entry in (checkout / "agent").iterdir():
        (package / entry.name).symlink_to(entry)
    for sub in ("collectors", "runners", "storage"):
        (package / sub).symlink_to(checkout / sub)
    return into


def command_for(checkout: Path | None, work: Path) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    if checkout is None:
        return [sys.executable, "-m", "edgeprof"], env
    if (checkout / "agent" / "__main__.py").is_file():
        env["PYTHONPATH"] = str(link_tree(checkout, work / "before-tree"))
        return [sys.executable, "-m", "edgeprof"], env
    env["PYTHONPATH"] = str(checkout)
    return [sys.executable, "-m", "agent.cli"], env


def time_once(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--before-checkout", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        variants: dict[str, tuple[list[str], dict[str, str]]] = {"now": command_for(None, work)}
        if args.before_checkout is not None:
            variants["before"] = command_for(args.before_checkout.resolve(), work)
        # Each variant reads a database of its own schema: the current code creates one explicitly (its
        # read-only commands never create a database), the older one created it on first use.
        now_cmd, now_env = variants["now"]
        subprocess.run([*now_cmd, "db", "upgrade", "--db", str(work / "now.db")], env=now_env, cwd=work,
                       capture_output=True, check=False)
        if "before" in variants:
            old_cmd, old_env = variants["before"]
            for setup in (["db", "upgrade"], ["status"]):  # whichever the older code has
                subprocess.run([*old_cmd, *setup, "--db", str(work / "before.db")], env=old_env, cwd=work,
                               capture_output=True, check=False)
        times: dict[tuple[str, str], list[float]] = {}
        cases = ("--help", "status", "--version")
        for _ in range(args.rounds):
            for case in cases:
                for name, (cmd, venv) in variants.items():
                    if name == "before" and case == "--version":
                        continue
                    extra = ["status", "--db", str(work / f"{name}.db")] if case == "status" else [case]
                    times.setdefault((case, name), []).append(time_once([*cmd, *extra], venv, work))
        print(f"{'command':12} {'variant':8} {'min s':>7} {'median s':>9} {'n':>3}")
        for (case, name), values in times.items():
            print(f"{case:12} {name:8} {min(values):7.3f} {statistics.median(values):9.3f} {len(values):3d}")
        if "before" in variants:
            for case in cases:
                if (case, "before") in times:
                    r = statistics.median(times[(case, "now")]) / statistics.median(times[(case, "before")])
                    print(f"{case}: now / before (medians) = {r:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
