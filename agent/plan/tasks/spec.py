"""The keys of a ``kind = "task"`` workload, their validation, and the llama.cpp params its runs use.

The file is read and parsed whole when the plan is checked (runners/tasks/data.py): a missing, truncated
or malformed file is one problem naming the file and its first bad line, and the sweep never starts, so
nothing is stored. Its sha256 goes into the spec (and so into the spec id and the stored result); the
worker reads it again and refuses a file that changed since.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgeprof.plan.checker import Checker
from edgeprof.runners.tasks.data import KINDS, LLAMA_PERPLEXITY_SEED, TaskFileError, parse_tasks, select
from edgeprof.safefs import UnsafePath, read_regular

DEFAULT_TASKS = 400  # llama-perplexity's --hellaswag-tasks default
DEFAULT_CTX = 512  # llama-perplexity's -c default; the context holds 4 sequences of it (n_parallel 4)
SEQ_PER_CONTEXT = 4
# The full HellaSwag validation set in llama.cpp's layout is ~11 MB, the multiple-choice sets of
# llama.cpp's users (ARC, MMLU, TruthfulQA) a few MB: 256 MiB is far beyond any, far below a runaway file.
MAX_TASK_FILE_BYTES = 256 << 20
TASK_KEYS = {"name", "kind", "task", "file", "tasks", "seed", "ctx", "reference"}


@dataclass(frozen=True)
class TaskSpec:
    """What a task run scores. ``max_task_bytes``: the longest chosen task's sequences in bytes (a bound
    on its tokens, for the memory prediction); ``chance``: the accuracy of a uniformly random pick."""

    task: str
    file: str
    file_sha256: str
    tasks: int | None
    seed: int
    ctx: int
    reference: str | None
    n_available: int
    n_selected: int
    chance: float
    max_task_bytes: int
    total_bytes: int
    batch_tokens_bound: int  # the most tokens one batch can hold (bytes + BOS per sequence, <= n_ctx)

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "file": self.file,
            "file_sha256": self.file_sha256,
            "tasks": self.tasks,
            "seed": self.seed,
            "ctx": self.ctx,
            "reference": self.reference,
            "n_available": self.n_available,
            "n_selected": self.n_selected,
        }


def is_task(table: dict[str, Any]) -> bool:
    return table.get("kind") == "task"


def _read(chk: Checker, raw: Any, place: str, base: Path) -> tuple[Path, bytes] | None:
    name = chk.string(raw, f"{place}.file")
    if name is None:
        return None
    path = Path(os.path.expandvars(os.path.expanduser(name)))
    if not path.is_absolute():
        path = base / path
    try:
        return path, read_regular(path, MAX_TASK_FILE_BYTES)
    except FileNotFoundError:
        chk.add(f"{place}.file", f"no such file: {path}")
    except UnsafePath as exc:
        chk.add(f"{place}.file", exc.strerror or str(exc))
    except OSError as exc:
        chk.add(f"{place}.file", f"cannot read {path}: {exc.strerror}")
    return None


def parse_task(chk: Checker, table: dict[str, Any], place: str, base: Path) -> TaskSpec | None:
    """Validate one ``kind = "task"`` table, its file parsed whole; every problem goes to ``chk``."""
    chk.unknown_keys(table, TASK_KEYS, place)
    kind = table.get("task")
    if kind not in KINDS:
        chk.add(f"{place}.task", f"expected one of {', '.join(repr(k) for k in KINDS)}, got {kind!r}")
    if "file" not in table:
        chk.add(place, "needs 'file': the task set (llama-perplexity's layout for the task)")
    n_tasks = chk.integer(table.get("tasks", DEFAULT_TASKS), f"{place}.tasks", minimum=1)
    seed = chk.integer(table.get("seed", LLAMA_PERPLEXITY_SEED), f"{place}.seed", minimum=0)
    ctx = chk.integer(table.get("ctx", DEFAULT_CTX), f"{place}.ctx", minimum=16)
    if seed is not None and seed > 0xFFFFFFFF:
        chk.add(f"{place}.seed", "at most 2^32 - 1 (std::mt19937's seed)")
    reference = chk.string(table["reference"], f"{place}.reference") if "reference" in table else None
    read = _read(chk, table["file"], place, base) if "file" in table else None
    if read is None or kind not in KINDS or n_tasks is None or seed is None or ctx is None:
        return None
    path, data = read
    try:
        tasks = parse_tasks(str(kind), data, str(path))
    except TaskFileError as exc:
        chk.add(f"{place}.file", str(exc))
        return None
    order = select(str(kind), len(tasks), n_tasks, seed)
    chosen = [tasks[i] for i in order]
    sizes = [sum(len(t.sequence(i).encode()) + 1 for i in range(len(t.endings))) for t in chosen]
    return TaskSpec(
        task=str(kind),
        file=str(path),
        file_sha256=hashlib.sha256(data).hexdigest(),
        tasks=n_tasks,
        seed=seed,
        ctx=ctx,
        reference=reference,
        n_available=len(tasks),
        n_selected=len(chosen),
        chance=sum(len(t.gold) / len(t.endings) for t in chosen) / len(chosen),
        max_task_bytes=max(sizes),
        total_bytes=sum(sizes),
        batch_tokens_bound=_batch_bound(chosen, sizes, SEQ_PER_CONTEXT * ctx),
    )


def _batch_bound(chosen: list[Any], sizes: list[int], n_ctx: int) -> int:
    """An upper bound of the tokens in one batch (one token per byte plus BOS, as the generation workloads'
    prompts are bounded): llama-perplexity packs whole tasks while their sequences fit 4 sequence ids."""
    per_batch = max(
        size * max(1, SEQ_PER_CONTEXT // len(t.endings)) for t, size in zip(chosen, sizes, strict=True)
    )
    return min(n_ctx, per_batch)


def task_params(axes: dict[str, tuple[Any, ...]], spec: TaskSpec) -> dict[str, Any]:
    """The llama.cpp params of a task run (once per model and task workload), as llama-perplexity sets them
    for its task modes: 4 sequences of ``ctx`` in one unified KV cache (n_ctx = 4 x ctx, n_seq_max 4),
    n_batch = min(2048, n_ctx), n_ubatch = min(512, n_batch); the most offloaded -ngl of the plan; the
    first value of every other axis."""
    first = {name: values[0] for name, values in axes.items()}
    n_ctx = SEQ_PER_CONTEXT * spec.ctx
    n_batch = min(2048, n_ctx)
    return {
        "n_gpu_layers": max(axes["ngl"]),
        "use_mmap": first["mmap"],
        "n_ctx": n_ctx,
        "n_batch": n_batch,
        "n_ubatch": min(512, n_batch),
        "flash_attn": first["flash_attn"],
        "type_k": first["type_k"],
        "type_v": first["type_v"],
        "n_threads": first["threads"],
        "n_seq_max": SEQ_PER_CONTEXT,
        "kv_unified": True,
    }
