"""How close is decode to the memory-bandwidth limit? Bytes read per token × tokens/s, against the device.

Decode is bandwidth-bound: each generated token reads every weight it multiplies (all of them for a dense
model; the used experts' share of the expert tensors for a MoE) plus the KV cache up to the current depth.
``achieved GB/s = bytes per token × tg_tps``, and its share of what the device can deliver:

- measured once per sweep by :func:`probe_bandwidth` (a few seconds of numpy copies over buffers far larger
  than any cache, on every core; its method and figures are stored with the sweep);
- on a Jetson also the board's datasheet figure (:data:`JETSON_BANDWIDTH`, each with its source).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from edgeprof.gguf.memory import kv_bytes_per_cell, kv_cells
from edgeprof.gguf.shape import ModelShape


def weights_read_per_token(shape: ModelShape) -> int:
    """Weight bytes one decode step reads: the embedding contributes one row (get_rows), unless the output
    layer is tied to it; MoE expert tensors (``*_exps``) only the used experts' share."""
    total = 0.0
    for t in shape.tensors:
        if t.name == "token_embd.weight" and not shape.tied_output:
            total += t.n_bytes / max(1, shape.n_vocab)
        elif "_exps" in t.name and shape.n_expert > 0 and shape.n_expert_used > 0:
            total += t.n_bytes * shape.n_expert_used / shape.n_expert
        else:
            total += t.n_bytes
    return int(total)


def kv_read_per_token(
    shape: ModelShape, depth: float, n_ctx: int, n_ubatch: int, type_k: str, type_v: str
) -> float:
    """KV bytes attention reads at ``depth`` cached positions (a sliding-window layer: its window only)."""
    total = 0.0
    for il in range(shape.n_layer):
        cells = min(float(depth), float(kv_cells(shape, il, n_ctx, n_ubatch)))
        if shape.n_swa > 0 and il < len(shape.swa_layers) and shape.swa_layers[il]:
            cells = min(cells, float(shape.n_swa))
        total += kv_bytes_per_cell(shape, type_k, type_v, range(il, il + 1)) * cells
    return total


def decode_mean_depth(n_prompt: int, n_gen: int, depth_before: int = 0) -> float:
    """Mean number of cached positions over a rep's decode steps: step i (1…n_gen) attends to
    depth + n_prompt + i − 1 positions (the prompt's last token is scored by prefill)."""
    return depth_before + n_prompt + (n_gen + 1) / 2.0


def achieved_gbps(bytes_per_token: float, tg_tps: float | None) -> float | None:
    if tg_tps is None or tg_tps <= 0:
        return None
    return bytes_per_token * tg_tps / 1e9


# Datasheet peak DRAM bandwidth of Jetson boards, GB/s (bus width × transfer rate), with the source of each
# figure. Matched against /proc/device-tree/model; Orin Nano's figure depends on the memory size and on the
# "Super" (MAXN_SUPER) EMC clock. Only boards whose figure has a source are listed.
@dataclass(frozen=True)
class BoardBandwidth:
    match: tuple[str, ...]  # every substring must be in the lower-cased DT model
    gbps: float
    source: str
    max_ram_mb: float | None = None  # e.g. the 4 GB Orin Nano (64-bit bus) vs the 8 GB one
    power_mode: str | None = None  # the figure applies only in this nvpmodel mode


_NANO_SRC = (
    "NVIDIA Jetson Orin Nano Super Developer Kit datasheet (Dec 2024): 68 GB/s, 102 GB/s in MAXN_SUPER; "
    "128-bit LPDDR5 on the 8 GB module, 64-bit on the 4 GB (quoted at brojogopalsapui.com, "
    "ai-foundations/sub_contents/AI_hardware/jetson_orin_nano_light.html)"
)
JETSON_BANDWIDTH: tuple[BoardBandwidth, ...] = (
    BoardBandwidth(("thor",), 273.0, "NVIDIA Jetson AGX Thor product material: 256-bit LPDDR5X, 273 GB/s"),
    BoardBandwidth(
        ("agx orin",),
        204.8,
        "NVIDIA Jetson AGX Orin Series datasheet DS-10662-001: 256-bit LPDDR5, 204.8 GB/s",
    ),
    BoardBandwidth(("orin nx",), 102.4, "NVIDIA Jetson Orin NX Series datasheet: 128-bit LPDDR5, 102.4 GB/s"),
    BoardBandwidth(("orin nano",), 34.0, _NANO_SRC + " (4 GB: half of 68)", max_ram_mb=6000.0),
    BoardBandwidth(("orin nano",), 102.0, _NANO_SRC, power_mode="MAXN_SUPER"),
    BoardBandwidth(("orin nano",), 68.0, _NANO_SRC),
)


def datasheet_bandwidth(
    board_model: str | None, ram_total_mb: float | None = None, power_mode: str | None = None
) -> BoardBandwidth | None:
    if not board_model:
        return None
    model = board_model.lower()
    for entry in JETSON_BANDWIDTH:
        if not all(m in model for m in entry.match):
            continue
        if entry.max_ram_mb is not None and (ram_total_mb is None or ram_total_mb > entry.max_ram_mb):
            continue
        if entry.power_mode is not None and power_mode != entry.power_mode:
            continue
        return entry
    return None


@dataclass(frozen=True)
class ProbeResult:
    gbps: float  # the figure used as the device's bandwidth: the better of read and copy
    read_gbps: float
    copy_gbps: float
    method: str
    threads: int
    buffer_mb: float
    passes: int
    duration_s: float
    # The spread of the passes (each pass's better of read and copy): the probe's own noise, shown beside the
    # figure so a share of it is not read as exact. None where a caller measured no passes of its own.
    pass_min_gbps: float | None = None
    pass_median_gbps: float | None = None
    pass_max_gbps: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}


def _run_threads(n: int, work: Any) -> float:
    """Wall seconds for ``work(i)`` on n threads started together (numpy releases the GIL in these loops)."""
    barrier = threading.Barrier(n + 1)

    def body(i: int) -> None:
        barrier.wait()
        work(i)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def probe_bandwidth(
    buffer_mb: float = 256.0, budget_s: float = 1.0, threads: int | None = None
) -> ProbeResult:
    """Measure DRAM bandwidth with numpy: per thread, a read pass (``sum`` of uint64s: 8 bytes read per
    element) and a copy pass (``copyto``: counted as read + write, STREAM's convention) over buffers that
    together are ``buffer_mb`` MiB — far past any last-level cache — best pass of each within ``budget_s``.

    Best rather than median: the question is what the memory can deliver, and a pass can only be slowed (by
    another process, a page fault), never sped up. A numpy probe reaches less than a tuned C kernel; the
    figure is a floor of the device's bandwidth, and bw_pct against it an upper estimate.
    """
    import numpy as np

    n = threads or max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    per = max(1, int(buffer_mb * 1024 * 1024 / n / 8 / 2))  # uint64 elements per buffer (src and dst)
    src = [np.ones(per, dtype=np.uint64) for _ in range(n)]
    dst = [np.empty(per, dtype=np.uint64) for _ in range(n)]
    for d in dst:
        d.fill(0)  # fault the pages in before timing
    bytes_per = per * 8
    best_read = best_copy = float("inf")
    passes = 0
    per_pass: list[float] = []  # GB/s of each pass, the better of its read and its copy
    t_start = time.perf_counter()
    # at least 5 passes: a spread of fewer says little (a pass over 256 MiB takes tens of milliseconds)
    while passes < 5 or (time.perf_counter() - t_start < budget_s and passes < 50):
        t_read = _run_threads(n, lambda i: src[i].sum())
        t_copy = _run_threads(n, lambda i: np.copyto(dst[i], src[i]))
        best_read, best_copy = min(best_read, t_read), min(best_copy, t_copy)
        per_pass.append(max(n * bytes_per / t_read, 2 * n * bytes_per / t_copy) / 1e9)
        passes += 1
    read = n * bytes_per / best_read / 1e9
    copy = 2 * n * bytes_per / best_copy / 1e9
    spread = sorted(per_pass)
    return ProbeResult(
        gbps=max(read, copy),
        read_gbps=read,
        copy_gbps=copy,
        method=(
            f"numpy: {n} threads, {2 * n * bytes_per / 2**20:.0f} MiB in all; read = uint64 sum (8 B/elem), "
            "copy = copyto (read + write); best pass of each; gbps = max(read, copy)"
        ),
        threads=n,
        buffer_mb=2 * n * bytes_per / 2**20,
        passes=passes,
        duration_s=time.perf_counter() - t_start,
        pass_min_gbps=spread[0],
        pass_median_gbps=spread[(len(spread) - 1) // 2],  # the lower median: a pass is only ever slowed
        pass_max_gbps=spread[-1],
    )


def read_board_model(root: Path | str = "/") -> str | None:
    try:
        return (Path(root) / "proc/device-tree/model").read_bytes().rstrip(b"\x00\n").decode(errors="replace")
    except OSError:
        return None
