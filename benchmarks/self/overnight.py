#!/usr/bin/env python3
"""Overnight-scale benchmark (SYNTHETIC data): DB size and the read commands' times on a night of telemetry.

Builds a labelled-synthetic database (sweep name ``SYNTHETIC overnight``, device hostname ``synthetic``):
100 configs x 3 quants of one made-up model, each run with its phases (cooldown, idle, load, cold/warm-up/5
steady prefill+decode), measurements and ~10 M samples of 60 tegrastats-like metrics in total at 5 Hz
(temperatures in 0.1 and 0.031 C steps, discrete clocks, integer mW rails, utilisation, memory), written
the way live telemetry is (one block per 2-s sampler flush through ``storage.samples.write_ticks``, then
``seal_run`` per run, as ``Telemetry.after_run`` does) plus a second, small sweep of the same configs for
``compare``. Then it times, as separate processes (``python -m edgeprof ...``), ``status``, ``report``,
``report --format json``, ``report --html``, ``analyse`` and ``compare``, each ``--repeat`` times, and reports
wall time and the child's CPU time (user+sys): on a shared 2-core VM the wall time mostly measures the
neighbours, the CPU time what the command costs. It also measures the live write path's CPU cost at 10 Hz.

Usage: python benchmarks/self/overnight.py [--samples 10000000] [--out benchmarks/out/overnight] [--repeat 3]
       [--soak-hours 10]  (also a 10-hour soak run: its bytes per reading and the time to judge it)
Results: a table on stdout and ``<out>/overnight-<date>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.orm import Session

from edgeprof.storage.db import open_engine
from edgeprof.storage.models import (
    Build,
    Device,
    Measurement,
    ModelFile,
    Phase,
    PhaseStat,
    Run,
    SampleBlock,
    SoakWindow,
    Sweep,
)
from edgeprof.storage.sample_codec import CODEC, ST_NULL, ST_VALUE, encode_arrays
from edgeprof.storage.samples import seal_run, write_batch
from edgeprof.telemetry import SampleRow
from edgeprof.verdicts import analyse_run

OUT_DIR = Path(__file__).resolve().parents[1] / "out"  # benchmarks/out, git-ignored
QUANTS = ("q8_0", "q5_k_m", "q4_k_m")
INTERVAL_S = 0.2
FLUSH_TICKS = 10  # the sampler flushes every 2 s


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------- synthetic data


def metric_names() -> list[str]:
    names = [f"temp.zone{i}_c" for i in range(12)]
    names += [f"cpu{i}.freq_mhz" for i in range(12)]
    names += [f"cpu{i}.util_pct" for i in range(12)]
    names += [f"power.rail{i}_mw" for i in range(6)] + [f"power.rail{i}_avg_mw" for i in range(6)]
    names += ["mem.ram_used_mb", "mem.swap_used_mb", "mem.lfb_blocks", "mem.shared_mb", "mem.cached_mb"]
    names += ["gpu.freq_mhz", "gpu.util_pct", "emc.freq_mhz", "emc.util_pct", "fan.pwm_pct", "cpu.util_pct"]
    names += ["gpu.temp_c"]
    assert len(names) == 60, len(names)
    return names


def synthetic_columns(rng: np.random.Generator, n: int, load: np.ndarray) -> list[np.ndarray]:
    """60 columns of n ticks; ``load`` (0/1 per tick) drives clocks, utilisation and power."""
    cols: list[np.ndarray] = []
    for i in range(12):  # temperatures: random walks, 0.1 C (sysfs-like) or 0.031 C (tegrastats AGX) steps
        step = 0.1 if i < 6 else 0.03125
        walk = np.cumsum(rng.choice([-1, 0, 0, 0, 1], size=n) + load * (rng.random(n) < 0.05))
        cols.append(np.round(np.clip(40.0 + walk * step, 25.0, 95.0), 5 if i >= 6 else 1))
    levels = np.array([729.0, 1420.0, 2201.0])
    for _ in range(12):
        cols.append(np.where(load > 0, 2201.0, levels[rng.integers(0, 3, n)]))
    for _ in range(12):
        cols.append(np.clip(np.rint(load * 85 + rng.normal(5, 4, n)), 0, 100))
    for i in range(12):
        base = 1500 + 400 * (i % 6)
        cols.append(np.rint(base + load * 3000 + rng.normal(0, 60, n)))
    cols.append(np.rint(3000 + np.cumsum(rng.integers(-2, 3, n))))
    cols.append(np.full(n, 851.0))
    cols.append(np.full(n, 8.0))
    cols.append(np.rint(500 + load * 1200 + rng.integers(0, 3, n)))
    cols.append(np.rint(1200 + np.cumsum(rng.integers(0, 2, n)) / 10))
    cols.append(np.where(load > 0, 1300.0, 306.0))
    cols.append(np.clip(np.rint(load * 90 + rng.normal(2, 2, n)), 0, 100))
    cols.append(np.full(n, 3199.0))
    cols.append(np.clip(np.rint(load * 40 + rng.normal(5, 2, n)), 0, 100))
    cols.append(np.rint(np.clip(30 + load * 40, 0, 100)))
    cols.append(np.clip(np.rint(load * 88 + rng.normal(4, 3, n)), 0, 100))
    cols.append(np.round(np.clip(45.0 + np.cumsum(rng.choice([-1, 0, 1], n)) * 0.5, 30, 90), 1))
    return cols


def build_db(path: Path, n_samples: int, n_configs: int, seed: int) -> dict[str, Any]:
    if path.exists():
        path.unlink()
    for ext in ("-wal", "-shm"):
        Path(str(path) + ext).unlink(missing_ok=True)
    engine = open_engine(path)
    rng = np.random.default_rng(seed)
    prng = random.Random(seed)
    names = metric_names()
    ticks_per_run = max(20, n_samples // len(names) // n_configs)
    now = dt.datetime(2026, 1, 1, 22, 0, 0)
    t_write = 0.0
    t_seal = 0.0
    with Session(engine) as s:
        device = Device(fingerprint="synthetic", hostname="synthetic", arch="aarch64", facts_json="{}",
                        first_seen=now, board_model="SYNTHETIC overnight board")  # fmt: skip
        build = Build(fingerprint="synthetic", llama_cpp_python_version="0.3.36", backend="cpu",
                      gpu_offload=False, system_info="SYNTHETIC", first_seen=now)  # fmt: skip
        s.add_all([device, build])
        s.flush()
        files = {}
        for q in QUANTS:
            files[q] = ModelFile(path=f"/synthetic/model-{q}.gguf", sha256=(q * 64)[:64], size_bytes=10**9,
                                 mtime_ns=0, quant_type=q.upper(), name="SYNTHETIC")  # fmt: skip
        s.add_all(files.values())
        s.flush()
        sweeps = []
        for sweep_no, ticks in ((1, ticks_per_run), (2, 20)):
            sweep = Sweep(name=f"SYNTHETIC overnight {sweep_no}", plan_text="# synthetic", plan_hash=f"h{sweep_no}",
                          device_id=device.id, edgeprof_version="synthetic", started_at=now, ended_at=now,
                          status="completed", n_specs=n_configs)  # fmt: skip
            s.add(sweep)
            s.flush()
            sweeps.append(sweep.id)
            t_clock = 1000.0 + sweep_no * 1e6
            for i in range(n_configs):
                q = QUANTS[i % 3]
                ctx = [512, 1024, 2048, 4096][(i // 3) % 4]
                threads = [2, 4, 6][(i // 12) % 3]
                nb = [128, 256, 512][(i // 36) % 3]
                params = {"n_ctx": ctx, "n_threads": threads, "n_batch": nb}
                dur = ticks * INTERVAL_S
                run = Run(sweep_id=sweep.id, spec_id=f"spec{i:03d}", seq=i, model_file_id=files[q].id,
                          build_id=build.id, model_label=q, model_group="SYNTHETIC", model_path=files[q].path,
                          workload_name="synthetic", workload_hash="w", workload_json="{}",
                          params_json=json.dumps(params), repeat_json='{"cold":1,"warmup":1,"steady":5}',
                          n_ctx=ctx, n_gpu_layers=0, n_threads=threads, n_batch=nb, n_ubatch=nb,
                          flash_attn="off", type_k="f16", type_v="f16", use_mmap=True, status="ok",
                          started_at=now, ended_at=now, t_start_mono=t_clock, t_end_mono=t_clock + dur,
                          start_temp_c=45.0, power_source="power.rail0_mw")  # fmt: skip
                s.add(run)
                s.flush()
                # phases: cooldown 5 %, idle 3 %, load 2 %, then 7 reps (cold, warm-up, 5 steady)
                spans = [("cooldown", None, 0, 0.0, 0.05), ("idle", None, 0, 0.05, 0.08),
                         ("load", "cold", 0, 0.08, 0.10)]  # fmt: skip
                reps = [("cold", 0)] + [("warmup", 0)] + [("steady", r) for r in range(5)]
                width = 0.9 / len(reps)
                for k, (kind, rep) in enumerate(reps):
                    a = 0.10 + k * width
                    spans.append(("prefill", kind, rep, a, a + width * 0.1))
                    spans.append(("decode", kind, rep, a + width * 0.1, a + width))
                load = np.zeros(ticks)
                bounds: dict[tuple[str | None, int], list[float]] = {}
                for name, kind, rep, a, b in spans:
                    if name in ("prefill", "decode"):
                        bounds.setdefault((kind, rep), []).extend([t_clock + a * dur, t_clock + b * dur])
                    s.add(Phase(run_id=run.id, name=name, kind=kind, rep=rep, t_start_mono=t_clock + a * dur,
                                t_end_mono=t_clock + b * dur))  # fmt: skip
                    if name in ("prefill", "decode", "load"):
                        load[int(a * ticks) : int(b * ticks)] = 1
                base_tg = {"q8_0": 20.0, "q5_k_m": 25.0, "q4_k_m": 28.0}[q] * (2 / threads) ** -0.3
                for kind, rep in reps:
                    tg = base_tg * (1 + prng.gauss(0, 0.01))
                    s.add(Measurement(run_id=run.id, kind=kind, rep=rep, n_prompt=128, prefill_ms=300.0,
                                      pp_tps=128 / 0.3 * (1 + prng.gauss(0, 0.01)), ttft_ms=310.0, n_gen=127,
                                      decode_ms=127 / tg * 1000, tg_tps=tg, e2e_ms=310 + 127 / tg * 1000,
                                      tpot_ms=1000 / tg, tokens_out=128, output_hash=f"synthetic{q}",
                                      output_tokens_json=json.dumps(list(range(128))), finish_reason="length",
                                      load_ms=800.0 if kind == "cold" else None,
                                      cold_start_ms=1500.0 if kind == "cold" else None,
                                      decode_power_mw=6000.0, decode_j_per_token=0.3, temp_max_c=60.0,
                                      t_start_mono=min(bounds[(kind, rep)]),
                                      t_end_mono=max(bounds[(kind, rep)])))  # fmt: skip
                for metric in names[:12]:
                    for stat, value in (("max", 60.0), ("mean", 55.0)):
                        s.add(PhaseStat(run_id=run.id, phase="decode", kind="steady", rep=0, metric=metric,
                                        stat=stat, value=value))  # fmt: skip
                s.flush()
                t_mono = t_clock + np.arange(ticks) * INTERVAL_S
                t_wall = 1.767e9 + t_mono
                cols = synthetic_columns(rng, ticks, load)
                null_every = 997  # an unreadable tick now and then: NULL, never 0
                t0 = time.perf_counter()
                for start in range(0, ticks, FLUSH_TICKS):
                    sl = slice(start, min(ticks, start + FLUSH_TICKS))
                    n = sl.stop - sl.start
                    enc = []
                    for j, name in enumerate(names):
                        states = np.full(n, ST_VALUE, dtype=np.uint8)
                        idx = np.arange(sl.start, sl.stop)
                        states[(idx + j) % null_every == 0] = ST_NULL
                        enc.append((name, states, cols[j][sl][states == ST_VALUE]))
                    payload, n_values = encode_arrays(t_mono[sl], t_wall[sl], enc)
                    s.execute(
                        SampleBlock.__table__.insert(),
                        [{"sweep_id": sweep.id, "run_id": run.id, "source": "tegrastats", "codec": CODEC,
                          "t_start_mono": float(t_mono[sl.start]), "t_end_mono": float(t_mono[sl.stop - 1]),
                          "n_ticks": n, "n_values": n_values, "resolution_ms": None, "data": payload}],
                    )  # fmt: skip
                t_write += time.perf_counter() - t0
                t0 = time.perf_counter()
                seal_run(s, run.id)
                t_seal += time.perf_counter() - t0
                s.commit()
                t_clock += dur + 10.0
                if sweep_no == 1 and (i + 1) % 10 == 0:
                    log(f"built {i + 1}/{n_configs} configs")
        n_values_total = s.scalar(select(func.sum(SampleBlock.n_values)))
        n_blocks = s.scalar(select(func.count()).select_from(SampleBlock))
    engine.dispose()
    raw = create_engine(f"sqlite:///{path}")
    with raw.connect() as c:
        c.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
    raw.dispose()
    size = path.stat().st_size
    return {
        "sweeps": sweeps,
        "configs": n_configs,
        "metrics": len(names),
        "ticks_per_run": ticks_per_run,
        "samples": int(n_values_total or 0),
        "blocks": int(n_blocks or 0),
        "db_bytes": size,
        "bytes_per_sample": size / max(1, int(n_values_total or 0)),
        "encode_s": t_write,
        "seal_s": t_seal,
    }


def add_soak(path: Path, hours: float, seed: int) -> dict[str, Any]:
    """A soak run of ``hours`` in sweep 1: the 60 metrics at 5 Hz for the whole soak, written as live
    telemetry is, its 10-s windows (a phase and a ``soak_window`` row each, the speed easing off by a tenth
    as the synthetic board heats), then judged as the sweep judges a finished run (``analyse_run``: the
    soak verdict reads every reading of the run). Returns the soak's bytes per reading and the judging time."""
    engine = open_engine(path)
    rng = np.random.default_rng(seed + 1)
    names = metric_names()
    ticks = int(hours * 3600 / INTERVAL_S)
    window_s = 10.0
    with Session(engine) as s:
        template = s.scalars(select(Run).where(Run.sweep_id == 1).order_by(Run.id)).first()
        assert template is not None, "build the overnight DB first"
        t_clock = float(s.scalar(select(func.max(Run.t_end_mono)))) + 60.0
        workload = {"kind": "soak", "prompt_tokens": 128, "n_predict": 256, "duration_s": hours * 3600,
                    "window_s": window_s}  # fmt: skip
        run = Run(sweep_id=1, spec_id="soak", seq=10_000, model_file_id=template.model_file_id,
                  build_id=template.build_id, model_label=template.model_label, model_group="SYNTHETIC",
                  model_path=template.model_path, workload_name="soak", workload_hash="soak",
                  workload_json=json.dumps(workload), params_json=template.params_json,
                  repeat_json='{"cold":1,"warmup":0,"steady":0}', n_ctx=512, n_gpu_layers=0, n_threads=4,
                  n_batch=512, n_ubatch=512, flash_attn="off", type_k="f16", type_v="f16", use_mmap=True,
                  status="ok", started_at=template.started_at, ended_at=template.ended_at,
                  t_start_mono=t_clock, t_end_mono=t_clock + ticks * INTERVAL_S, start_temp_c=45.0,
                  power_source="power.rail0_mw")  # fmt: skip
        s.add(run)
        s.flush()
        n_windows = int(ticks * INTERVAL_S / window_s)
        for i in range(n_windows):
            a, b = t_clock + i * window_s, t_clock + (i + 1) * window_s
            tg = 28.0 * (1.0 - 0.1 * min(1.0, i / max(1, n_windows // 3))) * (1 + float(rng.normal(0, 0.01)))
            s.add(Phase(run_id=run.id, name="soak_window", kind="soak", rep=i, t_start_mono=a, t_end_mono=b))
            s.add(SoakWindow(run_id=run.id, idx=i, t_start_mono=a, t_end_mono=b, tokens=int(tg * window_s),
                             decode_s=int(tg * window_s) / tg, tg_tps=tg, pp_tps=None))  # fmt: skip
        t_mono = t_clock + np.arange(ticks) * INTERVAL_S
        cols = synthetic_columns(rng, ticks, np.ones(ticks))
        for start in range(0, ticks, FLUSH_TICKS):
            sl = slice(start, min(ticks, start + FLUSH_TICKS))
            n = sl.stop - sl.start
            enc = [(name, np.full(n, ST_VALUE, dtype=np.uint8), cols[j][sl]) for j, name in enumerate(names)]
            payload, n_values = encode_arrays(t_mono[sl], 1.767e9 + t_mono[sl], enc)
            s.execute(
                SampleBlock.__table__.insert(),
                [{"sweep_id": 1, "run_id": run.id, "source": "tegrastats", "codec": CODEC,
                  "t_start_mono": float(t_mono[sl.start]), "t_end_mono": float(t_mono[sl.stop - 1]),
                  "n_ticks": n, "n_values": n_values, "resolution_ms": None, "data": payload}],
            )  # fmt: skip
        seal_run(s, run.id)
        s.commit()
        stored = s.execute(
            select(func.sum(func.length(SampleBlock.data)), func.sum(SampleBlock.n_values)).where(
                SampleBlock.run_id == run.id
            )
        ).one()
        t0 = time.perf_counter()
        verdicts = analyse_run(s, run.id)
        judge_s = time.perf_counter() - t0
        soak = next((v for v in verdicts if v.kind == "soak"), None)
    engine.dispose()
    return {
        "hours": hours,
        "windows": n_windows,
        "readings": int(stored[1]),
        "block_bytes": int(stored[0]),
        "bytes_per_reading": int(stored[0]) / max(1, int(stored[1])),
        "judge_s": judge_s,
        "verdict": soak.value if soak is not None else None,
    }


# --------------------------------------------------------------------------------------------- timings


def time_cmd(args: list[str], repeat: int) -> dict[str, Any]:
    walls, cpus = [], []
    rc = None
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "edgeprof", *args], capture_output=True, text=True)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
        rc = proc.returncode
        if rc != 0:
            log(f"{' '.join(args)}: exit {rc}: {proc.stderr.strip()[-300:]}")
    return {
        "wall_s_min": min(walls),
        "wall_s_median": statistics.median(walls),
        "cpu_s_min": min(cpus),
        "cpu_s_median": statistics.median(cpus),
        "n": repeat,
        "rc": rc,
    }


def write_cost(tmp: Path, seconds: float = 120.0, hz: float = 10.0) -> dict[str, Any]:
    """CPU the live write path costs: 60 metrics at ``hz`` for ``seconds`` of simulated time, flushed every
    2 s through write_batch + commit (what Telemetry._write does), as a share of one core."""
    path = tmp / "write-cost.db"
    path.unlink(missing_ok=True)
    engine = open_engine(path)
    names = metric_names()
    rng = random.Random(1)
    with Session(engine) as s:
        s.add(Device(fingerprint="w", hostname="synthetic", arch="x", facts_json="{}", first_seen=dt.datetime.now()))
        s.commit()
    n_ticks = int(seconds * hz)
    per_flush = int(2.0 * hz)
    batches = []
    for start in range(0, n_ticks, per_flush):
        rows = []
        for k in range(start, min(n_ticks, start + per_flush)):
            t = 100.0 + k / hz
            rows += [SampleRow(t, 1.7e9 + t, "tegrastats", m, float(rng.randrange(1000, 5000)), None) for m in names]
        batches.append(rows)
    cpu0 = time.thread_time()
    for rows in batches:
        with Session(engine) as s:
            write_batch(s, None, rows)
            s.commit()
    cpu = time.thread_time() - cpu0
    engine.dispose()
    return {"hz": hz, "metrics": len(names), "simulated_s": seconds, "cpu_s": cpu,
            "pct_of_one_core": 100.0 * cpu / seconds}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=10_000_000)
    ap.add_argument("--configs", type=int, default=100)
    ap.add_argument("--out", type=Path, default=OUT_DIR / "overnight")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reuse", action="store_true", help="time an existing DB instead of rebuilding it")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--soak-hours", type=float, default=0.0, help="also a soak run of this many hours (e.g. 10)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    db = args.out / "overnight.db"
    result: dict[str, Any] = {"label": "SYNTHETIC", "host": os.uname().nodename, "cpus": os.cpu_count()}
    result["load_avg_start"] = os.getloadavg()
    if not args.reuse or not db.exists():
        t0 = time.perf_counter()
        log(f"building a synthetic DB: {args.configs} configs, {args.samples:,} samples")
        result["build"] = build_db(db, args.samples, args.configs, args.seed)
        result["build"]["wall_s"] = time.perf_counter() - t0
        b = result["build"]
        log(f"built: {b['samples']:,} samples in {b['blocks']} blocks, {b['db_bytes'] / 1e6:.1f} MB "
            f"({b['bytes_per_sample']:.2f} B/sample)")  # fmt: skip
        if args.soak_hours > 0:
            log(f"adding a {args.soak_hours:g}-hour soak and judging it")
            result["soak"] = add_soak(db, args.soak_hours, args.seed)
            k = result["soak"]
            log(f"soak: {k['readings']:,} readings in {k['block_bytes'] / 1e6:.1f} MB "
                f"({k['bytes_per_reading']:.2f} B/reading), {k['windows']} windows, judged in {k['judge_s']:.1f} s "
                f"({k['verdict']})")  # fmt: skip
    result["db_bytes"] = db.stat().st_size
    html = args.out / "overnight.html"
    commands = {
        "status": ["status", "--db", str(db)],
        "report": ["report", "--db", str(db), "--sweep", "1"],
        "report --format json": ["report", "--db", str(db), "--sweep", "1", "--format", "json"],
        "report --html": ["report", "--db", str(db), "--sweep", "1", "--html", str(html)],
        "analyse": ["analyse", "--db", str(db), "--sweep", "1"],
        "compare": ["compare", "1", "2", "--db", str(db)],
    }
    result["timings"] = {}
    for name, cmd in commands.items():
        log(f"timing {name}")
        result["timings"][name] = time_cmd(cmd, args.repeat if name != "analyse" else max(1, args.repeat - 1))
    result["write_cost"] = write_cost(args.out)
    result["load_avg_end"] = os.getloadavg()
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    (args.out / f"overnight-{stamp}.json").write_text(json.dumps(result, indent=2))
    print(f"SYNTHETIC overnight DB: {db} — {result['db_bytes'] / 1e6:.1f} MB")
    if "build" in result:
        b = result["build"]
        print(f"  {b['samples']:,} samples ({b['configs']} configs x {b['ticks_per_run']} ticks x {b['metrics']} "
              f"metrics + a small 2nd sweep), {b['blocks']} blocks, {b['bytes_per_sample']:.2f} bytes/sample")  # fmt: skip
    print(f"{'command':22s} {'wall min':>9s} {'wall med':>9s} {'cpu min':>8s} {'cpu med':>8s}")
    for name, t in result["timings"].items():
        print(f"{name:22s} {t['wall_s_min']:9.2f} {t['wall_s_median']:9.2f} {t['cpu_s_min']:8.2f} "
              f"{t['cpu_s_median']:8.2f}{'' if t['rc'] == 0 else '  exit ' + str(t['rc'])}")  # fmt: skip
    if "soak" in result:
        k = result["soak"]
        print(f"soak of {k['hours']:g} h: {k['readings']:,} readings, {k['bytes_per_reading']:.2f} bytes/reading, "
              f"{k['windows']} windows, judged in {k['judge_s']:.1f} s: {k['verdict']}")  # fmt: skip
    w = result["write_cost"]
    print(f"write path at {w['hz']:.0f} Hz x {w['metrics']} metrics: {w['pct_of_one_core']:.2f} % of one core")
    print(f"load average start {result['load_avg_start']}, end {result['load_avg_end']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
