"""SYNTHETIC logs in the formats users have (tegrastats, jtop's CSV, nvidia-smi's CSV), written from a
first-order thermal model whose clock cap drops at a trip point (as ``support.heating`` models a soak). Not
captures: every answer (when the cap dropped, which clock, by how much) is known by construction. Each file
starts with a line saying SYNTHETIC."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

SYNTHETIC_HEADER = (
    "# SYNTHETIC: edgeprof tests/support/synthetic_logs.py, first-order thermal model, not a capture"
)
START = datetime(2026, 3, 1, 22, 0, 0)


@dataclass(frozen=True)
class Board:
    ambient_c: float = 25.0
    tau_s: float = 90.0
    hot_c: float = 85.0  # where the board settles at full clock
    trip_c: float | None = 70.0  # None: no trip reached
    max_mhz: float = 1020.0
    capped_mhz: float = 612.0
    lines: int = 400
    interval_s: float = 1.0
    gpu_util: float = 99.0
    cpu_util: float = 60.0
    cpu_mhz: float = 1510.0
    cpu_swing_mhz: float = 0.0  # DVFS steps of the CPU clock (0: held at cpu_mhz with a 1-MHz jitter)

    def run(self) -> list[tuple[float, float, float, bool]]:
        """(t, temperature, GPU clock, throttled) per line."""
        temp, cap, out = self.ambient_c + 8.0, self.max_mhz, []
        for i in range(self.lines):
            t = i * self.interval_s
            if self.trip_c is not None and cap == self.max_mhz and temp >= self.trip_c:
                cap = self.capped_mhz
            out.append((t, temp, cap, cap != self.max_mhz))
            target = self.ambient_c + (self.hot_c - self.ambient_c) * cap / self.max_mhz
            temp = target + (temp - target) * math.exp(-self.interval_s / self.tau_s)
        return out

    def trip_t(self) -> float | None:
        return next((t for t, _, _, throttled in self.run() if throttled), None)

    def cpu_at(self, i: int) -> float:
        if self.cpu_swing_mhz:
            return self.cpu_mhz - self.cpu_swing_mhz * (i % 4) / 3.0
        return self.cpu_mhz - (i % 2)


def tegrastats_log(path: Path, board: Board, *, gap_h: float = 0.0, timestamps: bool = True) -> Path:
    """An Orin-style tegrastats log (``tj`` zone, PMIC@50C fixed); ``gap_h``: the same run twice, that
    many hours apart."""
    lines = [SYNTHETIC_HEADER]
    runs = [0.0] if not gap_h else [0.0, gap_h * 3600.0]
    for offset in runs:
        for i, (t, temp, gpu, _) in enumerate(board.run()):
            stamp = (
                (START + timedelta(seconds=offset + t)).strftime("%m-%d-%Y %H:%M:%S ") if timestamps else ""
            )
            cpu = board.cpu_at(i)
            cores = ",".join(f"{board.cpu_util:.0f}%@{cpu:.0f}" for _ in range(4))
            power = int(5000 + 5000 * gpu / board.max_mhz)
            lines.append(
                f"{stamp}RAM 3000/7620MB (lfb 10x4MB) SWAP 0/3810MB (cached 0MB) CPU [{cores},off,off] "
                f"EMC_FREQ 20%@2133 GR3D_FREQ {board.gpu_util:.0f}%@{gpu:.0f} "
                f"cpu@{temp - 2.0:.2f}C soc2@{temp - 3.0:.2f}C gpu@{temp - 1.0:.2f}C PMIC@50C "
                f"tj@{temp:.2f}C VDD_IN {power}mW/{power}mW"
            )
    path.write_text("\n".join(lines) + "\n")
    return path


def jtop_csv(path: Path, board: Board) -> Path:
    """jtop's CSV: the keys of ``jtop.stats`` as jetson-stats' logger writes them (loads, temperatures,
    power; no clocks)."""
    head = "time,uptime,CPU1,CPU2,CPU3,CPU4,CPU5,CPU6,RAM,SWAP,EMC,GPU,APE,Fan pwmfan0,Temp CPU,Temp GPU,"
    head += "Temp PMIC,Temp tj,Power VDD_IN,Power TOT,jetson_clocks,nvp model"
    lines = [SYNTHETIC_HEADER, head]
    for t, temp, gpu, _ in board.run():
        stamp = (START + timedelta(seconds=t)).strftime("%Y-%m-%d %H:%M:%S.%f")
        power = int(5000 + 5000 * gpu / board.max_mhz)
        cpus = ",".join([f"{board.cpu_util:.0f}"] * 4)
        lines.append(
            f"{stamp},{timedelta(seconds=3600 + t)},{cpus},OFF,OFF,0.4,0.0,20,{board.gpu_util:.0f},OFF,60,"
            f"{temp - 2.0:.2f},{temp - 1.0:.2f},50.0,{temp:.2f},{power},{power},OFF,15W"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def nvidia_smi_csv(
    path: Path, board: Board, *, old_names: bool = False, limit_mhz: float | None = None
) -> Path:
    """``nvidia-smi --query-gpu=timestamp,index,temperature.gpu,clocks.sm,clocks.max.sm,power.draw,
    power.limit,utilization.gpu,<reasons>.sw_thermal_slowdown,<reasons>.hw_slowdown,<reasons>.sw_power_cap
    --format=csv`` (``<reasons>``: clocks_event_reasons, or the older clocks_throttle_reasons)"""
    reasons = "clocks_throttle_reasons" if old_names else "clocks_event_reasons"
    head = (
        "timestamp, index, temperature.gpu, clocks.current.sm [MHz], clocks.max.sm [MHz], power.draw [W], "
        f"power.limit [W], utilization.gpu [%], {reasons}.sw_thermal_slowdown, {reasons}.hw_slowdown, "
        f"{reasons}.sw_power_cap"
    )
    lines = [SYNTHETIC_HEADER, head]
    for t, temp, sm, throttled in board.run():
        stamp = (START + timedelta(seconds=t)).strftime("%Y/%m/%d %H:%M:%S.000")
        flag = "Active" if throttled else "Not Active"
        watts = 100 + 150 * sm / board.max_mhz
        lines.append(
            f"{stamp}, 0, {temp:.0f}, {sm:.0f} MHz, {limit_mhz or board.max_mhz:.0f} MHz, {watts:.2f} W, "
            f"300.00 W, {board.gpu_util:.0f} %, {flag}, Not Active, Not Active"
        )
    path.write_text("\n".join(lines) + "\n")
    return path
