"""What will make this machine's numbers noisy, said before measuring (``doctor`` and the sweep header), in
the manner of pyperf's system check: other busy processes, the cpufreq governor, turbo/boost, Jetson clocks
not locked, swap in use. Each warning says what it costs and what to do; nothing is changed.

Everything is read under ``root`` (a fixture tree in tests) with an injectable sleep, so every rule is tested
on a tree whose answer is known.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from edgeprof.collectors import parse_pid_cpu_ticks

# A process using more than a tenth of a core while we look is "busy": an idle desktop's daemons stay far
# below it (timers, logging), and a tenth of a core is already several percent of a 2-4 core edge board.
BUSY_CORE_SHARE = 0.10
SAMPLE_S = 0.3
MAX_LISTED = 5


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def _pid_ticks(proc: Path) -> dict[int, tuple[str, float]]:
    out: dict[int, tuple[str, float]] = {}
    try:
        entries = list(proc.iterdir())
    except OSError:
        return out
    for entry in entries:
        if not entry.name.isdigit():
            continue
        text = _read(entry / "stat")
        ticks = parse_pid_cpu_ticks(text)
        if text is None or ticks is None:
            continue
        name = text[text.find("(") + 1 : text.rfind(")")] if "(" in text else "?"
        out[int(entry.name)] = (name, ticks)
    return out


class BusyScan:
    """The busy-process scan, started now and read later: its window overlaps what the caller does meanwhile
    (a sweep hashes its models and opens its sweep), so the scan costs no wait of its own once that took
    ``sample_s``. A window that grew past ``MAX_WINDOW_FACTOR`` × ``sample_s`` (a wait for another sweep's
    lease) would average a hog that just started away: it is sampled afresh instead."""

    MAX_WINDOW_FACTOR = 4.0

    def __init__(
        self,
        root: Path | str = "/",
        *,
        sample_s: float = SAMPLE_S,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        exclude: frozenset[int] | None = None,
        clk_tck: float | None = None,
    ) -> None:
        self.proc = Path(root) / "proc"
        self.sample_s, self.sleep, self.clock = sample_s, sleep, clock
        self.skip = {os.getpid(), *(exclude or ())}
        self.tck = clk_tck or float(os.sysconf("SC_CLK_TCK"))
        self._start()

    def _start(self) -> None:
        self.before, self.t0 = _pid_ticks(self.proc), self.clock()

    def result(self) -> list[tuple[int, str, float]]:
        """(pid, name, cores) of processes above ``BUSY_CORE_SHARE`` of a core over the window, busiest
        first; this process (and ``exclude``) left out."""
        if self.clock() - self.t0 > self.MAX_WINDOW_FACTOR * self.sample_s:
            self._start()
        left = self.sample_s - (self.clock() - self.t0)
        if left > 0:
            self.sleep(left)
        after = _pid_ticks(self.proc)
        window_s = max(self.clock() - self.t0, self.sample_s)
        busy = []
        for pid, (name, ticks) in after.items():
            if pid in self.skip or pid not in self.before:
                continue
            cores = (ticks - self.before[pid][1]) / self.tck / window_s
            if cores > BUSY_CORE_SHARE:
                busy.append((pid, name, cores))
        return sorted(busy, key=lambda b: -b[2])


def busy_processes(
    root: Path | str = "/",
    *,
    sample_s: float = SAMPLE_S,
    sleep: Callable[[float], None] = time.sleep,
    exclude: frozenset[int] | None = None,
    clk_tck: float | None = None,
) -> list[tuple[int, str, float]]:
    """``BusyScan`` over a window of its own: ``sample_s`` waited here."""
    return BusyScan(root, sample_s=sample_s, sleep=sleep, exclude=exclude, clk_tck=clk_tck).result()


def _governors(root: Path) -> dict[str, str]:
    base = root / "sys/devices/system/cpu/cpufreq"
    out: dict[str, str] = {}
    try:
        policies = sorted(p for p in base.iterdir() if p.name.startswith("policy"))
    except OSError:
        return out
    for policy in policies:
        governor = _read(policy / "scaling_governor")
        if governor:
            out[policy.name] = governor
    return out


def _swap_used_mb(root: Path) -> float | None:
    text = _read(root / "proc/meminfo")
    if text is None:
        return None
    fields: dict[str, float] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            fields[key] = float(parts[0])
    if "SwapTotal" not in fields or "SwapFree" not in fields:
        return None
    return (fields["SwapTotal"] - fields["SwapFree"]) / 1024.0


def system_warnings(
    root: Path | str = "/",
    *,
    jetson: Mapping[str, Any] | None = None,
    sample_s: float = SAMPLE_S,
    sleep: Callable[[float], None] = time.sleep,
    exclude: frozenset[int] | None = None,
    scan: BusyScan | None = None,
) -> list[str]:
    """One line per thing that will make measurements noisy (empty: nothing found). ``jetson`` is
    ``edgeprof.device.jetson.jetson_state`` (None off a Jetson); ``scan``: a busy-process scan started
    earlier (else one is taken here)."""
    root = Path(root)
    warnings: list[str] = []
    busy = (scan or BusyScan(root, sample_s=sample_s, sleep=sleep, exclude=exclude)).result()
    if busy:
        listed = ", ".join(f"{name} (pid {pid}) {100 * cores:.0f}%" for pid, name, cores in busy[:MAX_LISTED])
        more = f" and {len(busy) - MAX_LISTED} more" if len(busy) > MAX_LISTED else ""
        warnings.append(
            f"other busy processes (share of one core): {listed}{more}; they compete with the benchmark "
            "for CPU and memory bandwidth: stop them or expect contended/unstable verdicts"
        )
    governors = _governors(root)
    slow = {p: g for p, g in governors.items() if g != "performance"}
    if slow:
        kinds = ", ".join(sorted(set(slow.values())))
        warnings.append(
            f"cpufreq governor {kinds} on {len(slow)} of {len(governors)} policies: clocks follow the load, "
            "so short runs and cold starts measure ramp-up; for stable numbers: "
            "sudo cpupower frequency-set -g performance"
        )
    no_turbo = _read(root / "sys/devices/system/cpu/intel_pstate/no_turbo")
    boost = _read(root / "sys/devices/system/cpu/cpufreq/boost")
    if no_turbo == "0" or boost == "1":
        which = "Intel turbo boost" if no_turbo == "0" else "CPU frequency boost"
        warnings.append(
            f"{which} is on: the clock depends on temperature and on how many cores are busy, so results "
            "drift as the machine heats; compare like with like, or turn it off for the sweep"
        )
    if jetson is not None:
        clocks = jetson.get("jetson_clocks") or {}
        locked = clocks.get("locked") if isinstance(clocks, Mapping) else None
        if locked is False:
            warnings.append(
                "Jetson clocks are not locked: DVFS moves CPU/GPU/EMC clocks with load; run "
                "sudo jetson_clocks before the sweep (and record the power mode) for repeatable numbers"
            )
        elif locked is None:
            warnings.append("whether Jetson clocks are locked is unknown (jetson_clocks --show needs root)")
    swap = _swap_used_mb(root)
    if swap is not None and swap > 0:
        warnings.append(
            f"swap in use: {swap:.0f} MiB; a model or KV cache paged out makes load and decode times jump"
        )
    return warnings
