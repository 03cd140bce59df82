"""Will it fit? Predict a config's memory before it runs, from the GGUF alone, and compare with the device.

The prediction is the memory the llama.cpp child will hold resident, split by where it lives:

- weights: every tensor's size from the GGUF tensor table (never the file size: metadata and padding are not
  weights), split by ``-ngl`` as llama.cpp splits them: the last ``ngl`` repeating layers on the GPU, the
  output layer there too when ``ngl > n_layer``, the token embedding always on the CPU;
- KV cache: ``2 · n_layer · n_kv_heads · head_dim · bytes(type) · cells`` summed per layer, with per-layer KV
  head counts where the GGUF gives an array, and sliding-window layers holding only ``n_swa + n_ubatch``
  cells (llama-bench, and edgeprof, run with ``swa_full = false``);
- compute buffers: llama.cpp reserves them for a full ``n_ubatch`` at the full context, but on the CPU only
  the pages a request touches become resident, so the CPU term follows the depth the workload reaches
  (prompt + n_predict) and the logits it asks for. A GPU buffer is committed when allocated, so the GPU
  term is the full reservation;
- the vocabulary llama.cpp keeps in host memory, and, for a quality run, the worker's own scoring arrays
  (``quality_scoring_bytes``): both grow with n_vocab, which is why a large-vocabulary model shows them;
- the runtime: Python, llama.cpp and its libraries before any model (a measured constant, below).

Every term is one of llama.cpp's or the worker's allocations, sized from the GGUF and checked against the
child's measured ``VmHWM``: ``tests/integration/test_memory_fit.py`` holds generation runs to within
5 % + 4 MiB of the measured peak at ctx 512, 2048 and 8192 on the demo models, and quality runs to within
15 % + 16 MiB at ctx 512 and 2048 on the demo models and on a generated 262 144-token vocabulary.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from edgeprof.gguf.shape import ModelShape

MIB = 1024 * 1024

# The worker process before it loads a model: interpreter, llama_cpp and ggml libraries, the event pipe.
# Measured as VmHWM minus weights, KV and the touched compute on the demo models on x86_64 (CPU build):
# 52–56 MiB right after setup.sh, 47–49 MiB once the libraries' pages have been evicted and read back (fresh
# writes sit in large page-cache folios that a fault maps whole). 54 errs towards "does not fit" there.
# A CUDA build adds the CUDA context on top, which only a run on such a build can measure; it is not
# guessed here: the sweep replaces this constant by what its own finished runs show (agent/sweep/fit.py).
RUNTIME_BASE_MIB = 54.0

# Bytes per element of the KV cache types (llama-bench's -ctk/-ctv); block types as (block, bytes).
_KV_TYPE_BYTES: dict[str, float] = {
    "f32": 4.0,
    "f16": 2.0,
    "bf16": 2.0,
    "q8_0": 34 / 32,
    "q4_0": 18 / 32,
    "q4_1": 20 / 32,
    "q5_0": 22 / 32,
    "q5_1": 24 / 32,
    "iq4_nl": 18 / 32,
}

# Types llama.cpp's CPU backend repacks into an interleaved copy (the CPU_REPACK buffer: q4_0/q4_K/iq4_nl
# "8x8" on AVX2, "4x4"/"8x8" on ARM) for the layers' matrices. With mmap the file pages stay mapped and
# touched beside the copy, so those bytes are resident twice: the demo Q4_K_M measured 13 MiB above its
# weights + KV + compute without this term (llama.cpp reported an 11.5 MiB CPU_REPACK buffer).
_REPACKED_TYPES = frozenset({"Q4_0", "Q4_K", "IQ4_NL"})

# llama.cpp keeps the vocabulary in host memory whatever -ngl says: per token its text, score and
# attributes, an entry in the text-to-id hash map and the precomputed token piece. Measured as the anonymous
# memory a load adds beside the KV cache: 36.5 MiB for a generated 262 144-token SPM vocabulary of short
# pieces (146 B a token), 0.2 MiB for the demo's 1024. Rounded up; a BPE vocabulary's merge table comes on
# top and has not been measured.
VOCAB_BYTES_PER_TOKEN = 150.0

# The quality worker scores a chunk's rows this many at a time in float64 (runners/quality_math.py's
# ROWS_PER_BLOCK; tests/unit/gguf/test_memory.py keeps the two equal, as the block's arrays are a term below).
QUALITY_ROWS_PER_BLOCK = 16
# Bytes per vocabulary entry of one block that are alive together at the worst line of each loop. The
# reference pass (encode_rows) starts a block while the last block's log-probs and rounded values are still
# bound, beside the new block and log-softmax's two temporaries: 5 float64 arrays. A scoring pass
# (score_rows) starts a block still holding the last block's log-probs of both sides, p_ref and the mask,
# beside log-softmax's three arrays: 6 float64 arrays and a bool one. Measured on a 262 144-token
# vocabulary: 156 and 200 MiB above the chunk's own arrays, i.e. 39 and 50 B per entry of a 16-row block.
_REFERENCE_BLOCK_BYTES = 40.0
_SCORING_BLOCK_BYTES = 50.0
# A cached reference row: n_vocab 16-bit log-probs (padded to even) and quality_math's 20-byte RECORD.
_REFERENCE_RECORD_BYTES = 20
# A scoring pass ends with the summary, whose median and percentiles import numpy.ma on first use while the
# last chunk's arrays are still bound: 7.4–9.5 MiB more resident, measured on the demo models, where it is
# larger than any array of theirs.
_SUMMARY_IMPORT_BYTES = 9.0 * MIB


def kv_type_bytes(type_name: str) -> float:
    try:
        return _KV_TYPE_BYTES[type_name]
    except KeyError:
        raise ValueError(f"unknown KV cache type {type_name!r}") from None


def kv_bytes_per_cell(shape: ModelShape, type_k: str, type_v: str, layers: range | None = None) -> float:
    """K and V bytes one context position costs, summed over ``layers`` (default all)."""
    bk, bv = kv_type_bytes(type_k), kv_type_bytes(type_v)
    total = 0.0
    for il in layers if layers is not None else range(shape.n_layer):
        n_kv = shape.n_head_kv[il] if il < len(shape.n_head_kv) else shape.n_head_kv[-1]
        total += n_kv * (shape.head_dim_k * bk + shape.head_dim_v * bv)
    return total


def _pad(n: int, to: int = 256) -> int:
    return (n + to - 1) // to * to


def kv_cells(
    shape: ModelShape, il: int, n_ctx: int, n_ubatch: int, swa_full: bool = False, n_seq_max: int = 1
) -> int:
    """Cells layer ``il`` holds: the context, or for a sliding-window layer (unless swa_full) the window per
    sequence plus one ubatch, as llama.cpp sizes its SWA cache."""
    if not swa_full and shape.n_swa > 0 and il < len(shape.swa_layers) and shape.swa_layers[il]:
        return min(n_ctx, _pad(shape.n_swa * max(1, n_seq_max) + n_ubatch))
    return n_ctx


def kv_bytes(
    shape: ModelShape,
    n_ctx: int,
    n_ubatch: int,
    type_k: str,
    type_v: str,
    layers: range,
    swa_full: bool = False,
    n_seq_max: int = 1,
) -> float:
    return sum(
        kv_bytes_per_cell(shape, type_k, type_v, range(il, il + 1))
        * kv_cells(shape, il, n_ctx, n_ubatch, swa_full, n_seq_max)
        for il in layers
    )


def compute_bytes(
    shape: ModelShape, n_kv: int, n_tokens: int, flash_attn: bool, n_outputs: int
) -> float:
    """The graph's working set for ``n_tokens`` tokens against ``n_kv`` cached positions (f32 activations).

    Without flash attention the largest tensor is KQ (n_kv · n_tokens · n_head) next to the mask; with it,
    only the f16 mask. The rest of the graph (residual, Q/K/V, FFN activations) fitted as 7 · n_embd floats
    per token on the demo models (llama.cpp reports 8.5 and 15.0 MiB for the tiny and small demo at ctx 512,
    n_ubatch 512, flash attention off; 83.5 and 150.0 at ctx 8192). Logits: n_vocab floats per output.
    ggml's allocator hands a tensor's memory on once its consumers have run, and the logits are the graph's
    last node, so they reuse the attention's region: the larger of the two counts, not their sum (a
    262 144-token vocabulary with 256 outputs at ctx 512 measured 261 MiB of graph, its logits 256).
    """
    attn = n_kv * n_tokens * 2.0 if flash_attn else n_kv * n_tokens * 4.0 * (shape.n_head + 1)
    return max(attn, n_outputs * shape.n_vocab * 4.0) + n_tokens * 7.0 * shape.n_embd * 4.0


def cpu_work_bytes(shape: ModelShape, n_kv: int, n_tokens: int, flash_attn: bool, type_v: str) -> float:
    """The CPU backend's scratch beside the graph: a matmul whose second operand is not in the first's
    dot-product type converts it first, into a buffer of its own that grows to the largest such operand.
    Without flash attention that is softmax(KQ) (n_kv · n_tokens · n_head floats) converted to the 16-bit V
    cache for KQV: 8 and 16 MiB for the tiny and small demo at ctx 2048 with a 512-token ubatch, the part
    of their quality runs' peak the graph alone left out. An f32 V cache needs no conversion; flash
    attention's scratch is per thread and small."""
    if flash_attn or type_v not in ("f16", "bf16"):
        return 0.0
    return n_kv * n_tokens * shape.n_head * 2.0


@dataclass(frozen=True)
class MemoryPrediction:
    """Predicted resident memory of one config, MiB, with its parts (stored as the run's evidence)."""

    total_mb: float  # what the device must give: host + GPU on unified memory, host only otherwise
    host_mb: float
    gpu_mb: float
    weights_cpu_mb: float  # including the repacked copies
    weights_gpu_mb: float
    repack_mb: float
    kv_cpu_mb: float
    kv_gpu_mb: float
    compute_cpu_mb: float
    compute_gpu_mb: float
    runtime_mb: float
    unified: bool
    n_kv_touched: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    scoring_mb: float = 0.0  # a quality run's own arrays (included in host_mb)
    vocab_mb: float = 0.0  # llama.cpp's vocabulary (included in host_mb)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["notes"] = list(self.notes)
        return {k: round(v, 2) if isinstance(v, float) else v for k, v in out.items()}


def predict_memory(
    shape: ModelShape,
    *,
    n_ctx: int,
    n_gpu_layers: int,
    n_batch: int,
    n_ubatch: int,
    type_k: str,
    type_v: str,
    flash_attn: str,
    use_mmap: bool,
    prompt_tokens: int,
    n_predict: int,
    gpu_offload: bool = False,
    unified: bool = False,
    swa_full: bool = False,
    n_seq_max: int = 1,
    n_outputs: int = 1,
    ubatch_outputs: int | None = None,
    runtime_mb: float = RUNTIME_BASE_MIB,
    scoring_bytes: float = 0.0,
) -> MemoryPrediction:
    """Predict a config's memory. ``gpu_offload``: the build can offload (a CPU build ignores -ngl);
    ``n_outputs``: positions whose logits a request keeps (1 for generation; a quality run's are
    ``quality_outputs``), ``ubatch_outputs``: the most of them one ubatch computes (default: as many as
    fit in the ubatch); ``scoring_bytes``: a quality worker's own arrays (``quality_scoring_bytes``)."""
    ngl = max(0, min(n_gpu_layers, shape.n_layer + 1)) if gpu_offload else 0
    weights = _split_weights(shape, ngl, use_mmap)
    kv_cpu, kv_gpu = _split_kv(shape, ngl, n_ctx, n_ubatch, type_k, type_v, swa_full, n_seq_max)
    # "auto" resolves to on wherever the attention runs on the layer's own device (the CPU backend and
    # CUDA both have the kernel), so the prediction takes it as on; the run records what llama.cpp chose
    fa = flash_attn in ("on", "auto")
    n_ub = max(1, min(n_ubatch, n_batch))
    n_kv_touched, compute_cpu = _cpu_compute(
        shape, n_ctx, n_ub, fa, type_v, prompt_tokens, n_predict, max(n_outputs, n_seq_max), ubatch_outputs
    )
    # A GPU buffer is committed when allocated: the full reservation (n_ubatch at the full context).
    compute_gpu = compute_bytes(shape, n_ctx, n_ub, fa, n_ub) if ngl > 0 else 0.0
    vocab = shape.n_vocab * VOCAB_BYTES_PER_TOKEN
    host = runtime_mb + (weights.cpu + kv_cpu + compute_cpu + scoring_bytes + vocab) / MIB
    gpu = (weights.gpu + kv_gpu + compute_gpu) / MIB
    notes = ("CUDA context not included (not measured on this build)",) if gpu_offload and ngl > 0 else ()
    return MemoryPrediction(
        total_mb=host + gpu if unified else host,
        host_mb=host,
        gpu_mb=gpu,
        weights_cpu_mb=weights.cpu / MIB,
        weights_gpu_mb=weights.gpu / MIB,
        repack_mb=weights.repack / MIB,
        kv_cpu_mb=kv_cpu / MIB,
        kv_gpu_mb=kv_gpu / MIB,
        compute_cpu_mb=compute_cpu / MIB,
        compute_gpu_mb=compute_gpu / MIB,
        runtime_mb=runtime_mb,
        unified=unified,
        n_kv_touched=n_kv_touched,
        notes=notes,
        scoring_mb=scoring_bytes / MIB,
        vocab_mb=vocab / MIB,
    )


def _split_kv(
    shape: ModelShape,
    ngl: int,
    n_ctx: int,
    n_ubatch: int,
    type_k: str,
    type_v: str,
    swa_full: bool,
    n_seq_max: int,
) -> tuple[float, float]:
    """(CPU, GPU) KV cache bytes: each layer's cache lives with the layer, the last ``ngl`` on the GPU."""
    i_gpu_start = shape.n_layer - min(ngl, shape.n_layer)
    gpu_layers = range(i_gpu_start, shape.n_layer) if ngl > 0 else range(0)
    cpu_layers = range(0, i_gpu_start) if ngl > 0 else range(shape.n_layer)
    kv_cpu = kv_bytes(shape, n_ctx, n_ubatch, type_k, type_v, cpu_layers, swa_full, n_seq_max)
    kv_gpu = kv_bytes(shape, n_ctx, n_ubatch, type_k, type_v, gpu_layers, swa_full, n_seq_max)
    return kv_cpu, kv_gpu


def _cpu_compute(
    shape: ModelShape,
    n_ctx: int,
    n_ub: int,
    fa: bool,
    type_v: str,
    prompt_tokens: int,
    n_predict: int,
    n_kept: int,
    ubatch_outputs: int | None,
) -> tuple[int, float]:
    """(KV cells touched, resident CPU compute bytes): on the CPU only the pages a request touches become
    resident, so the working set follows the depth and batch a request of this workload actually reaches,
    and the logits it asks for, not the worst case llama.cpp reserves for."""
    depth = min(n_ctx, prompt_tokens + n_predict)
    n_kv_touched = min(n_ctx, _pad(max(depth, 1)))
    touched_tokens = max(1, min(n_ub, prompt_tokens))
    graph_outputs = min(n_kept, touched_tokens) if ubatch_outputs is None else ubatch_outputs
    compute_cpu = compute_bytes(shape, n_kv_touched, touched_tokens, fa, graph_outputs)
    compute_cpu += cpu_work_bytes(shape, n_kv_touched, touched_tokens, fa, type_v)
    # llama.cpp's output buffer: n_vocab floats for every position a request keeps (at least one per
    # sequence), filled by each ubatch and kept until the next request, so beside the graph's own logits.
    compute_cpu += n_kept * shape.n_vocab * 4.0
    return n_kv_touched, compute_cpu


def quality_outputs(ctx: int, n_ubatch: int) -> tuple[int, int]:
    """(positions of a chunk whose logits llama.cpp keeps, the most of them one ubatch computes) for a
    quality run: the worker asks for logits from ``ctx // 2`` on, in one batch of ``ctx`` tokens that
    llama.cpp cuts into ubatches, so the first half's ubatches compute none."""
    first, n_ub = ctx // 2, max(1, n_ubatch)
    per_ubatch = max(max(0, min(j + n_ub, ctx) - max(j, first)) for j in range(0, max(ctx, 1), n_ub))
    return ctx - first, per_ubatch


def quality_scoring_bytes(n_vocab: int, ctx: int, n_chunks: int | None = None) -> float:
    """The quality worker's own arrays at their peak (runners/quality_worker.py), beside llama.cpp's.

    Per chunk the worker holds the logits of the scored positions (float32, n_scored × n_vocab, copied out
    of llama.cpp's output buffer) and the reference's rows (16-bit), and scores them a block of rows at a
    time. ``n_chunks``: the workload's ``chunks`` (None: as many as the text gives, taken as several).
    """
    rows = ctx - 1 - ctx // 2  # positions ctx/2 .. ctx-2 each predict the next token
    logits = rows * n_vocab * 4.0
    ref_rows = rows * (2.0 * (2 * ((n_vocab + 1) // 2)) + _REFERENCE_RECORD_BYTES)
    block = min(QUALITY_ROWS_PER_BLOCK, rows) * n_vocab
    if n_chunks is None or n_chunks > 1:
        # From the second chunk on, each new array is filled while the name still holds the last chunk's
        # (``logits = eval_chunk(...)``, ``meta, qv = encode_rows(...)``, the reader's next rows): a second
        # logits array, or in the reference pass a second set of rows beside the block being encoded.
        reference = logits + ref_rows + max(logits, ref_rows + _REFERENCE_BLOCK_BYTES * block)
        scoring = logits + ref_rows + max(logits, _SCORING_BLOCK_BYTES * block, _SUMMARY_IMPORT_BYTES)
    else:
        # One chunk: the block's arrays, or in the reference pass the bytes copy of its rows written to
        # the cache file, whichever is larger.
        reference = logits + ref_rows + max(ref_rows, _REFERENCE_BLOCK_BYTES * block)
        scoring = logits + ref_rows + max(_SCORING_BLOCK_BYTES * block, _SUMMARY_IMPORT_BYTES)
    # The run's own child is the reference pass when this model is its group's reference and a scoring
    # pass otherwise, which depends on the plan's other models: the larger is predicted (the two differ
    # by the block arrays, a few per cent of such a run's peak).
    return max(reference, scoring)


@dataclass(frozen=True)
class _Weights:
    """Weight bytes by device; ``cpu`` includes ``repack``, the CPU backend's interleaved copies."""

    cpu: float
    gpu: float
    repack: float


def _split_weights(shape: ModelShape, ngl: int, use_mmap: bool) -> _Weights:
    """Split the tensors as llama.cpp does for ``ngl`` offloaded layers: the last ``ngl`` repeating layers on
    the GPU, the output layer too when ``ngl > n_layer``, the token embedding always on the CPU."""
    i_gpu_start = shape.n_layer - min(ngl, shape.n_layer)
    output_on_gpu = ngl > shape.n_layer
    w_cpu = w_gpu = repack = 0.0
    for t in shape.tensors:
        on_gpu = (t.layer is not None and t.layer >= i_gpu_start and ngl > 0) or (
            t.layer is None and t.name != "token_embd.weight" and output_on_gpu
        )
        if on_gpu:
            w_gpu += t.n_bytes
        else:
            w_cpu += t.n_bytes
            if t.layer is not None and t.ggml_type in _REPACKED_TYPES:
                repack += t.n_bytes
    if shape.tied_output and output_on_gpu:
        embd = next((t for t in shape.tensors if t.name == "token_embd.weight"), None)
        if embd is not None:
            w_gpu += embd.n_bytes  # llama.cpp places a copy of the tied embedding with the output layer
    if not use_mmap:
        # The file is read into a staging buffer and repacked from there: one resident copy, not two.
        repack = 0.0
    return _Weights(cpu=w_cpu + repack, gpu=w_gpu, repack=repack)


def mem_available_mb(root: Path | str = "/") -> float | None:
    """``MemAvailable`` from ``{root}/proc/meminfo`` in MiB (the kernel's estimate of what can be allocated
    without swapping); None where it cannot be read. On a Jetson the GPU draws from the same pool."""
    try:
        text = (Path(root) / "proc/meminfo").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            try:
                return int(line.split()[1]) / 1024.0
            except (IndexError, ValueError):
                return None
    return None


def is_unified_memory(root: Path | str = "/") -> bool:
    """A Jetson (Tegra): CPU and GPU share one DRAM, so a GPU allocation comes out of MemAvailable too."""
    return (Path(root) / "etc/nv_tegra_release").exists()


def fmt_mib(mib: float) -> str:
    """A memory figure as edgeprof prints every one: in MiB (as /proc, llama.cpp and the stored columns
    count), never mixed with decimal MB or GB; a tenth below 10 MiB, where whole MiB would read as 0."""
    return f"{mib:.1f} MiB" if abs(mib) < 10 else f"{mib:.0f} MiB"


@dataclass(frozen=True)
class FitCheck:
    fits: bool | None  # None: the device's free memory is unknown
    needed_mb: float
    # What the config may use: the device's free memory less the plan's reserve. Never below 0: a reserve
    # larger than what is free leaves nothing, it does not owe memory.
    available_mb: float | None
    reserve_mb: float
    what: str = ""  # "" for the host's (or unified) memory, "GPU memory" for a discrete GPU's
    device_free_mb: float | None = None  # what the device said was free, before the reserve

    def message(self) -> str:
        of = f" of {self.what}" if self.what else ""
        need = f"needs ≈ {fmt_mib(self.needed_mb)}{of}"
        if self.available_mb is None:
            return f"{need}, unknown available"
        reserve = f" after the plan's reserve of {fmt_mib(self.reserve_mb)}" if self.reserve_mb else ""
        if self.available_mb <= 0:
            # Say what there was, so the reader sees whether the reserve or the device left nothing.
            free = f" ({fmt_mib(self.device_free_mb)} free)" if self.device_free_mb is not None else ""
            return f"{need}, nothing left{reserve}{free}"
        return f"{need}, {fmt_mib(self.available_mb)} available{reserve}"


def check_fit(prediction: MemoryPrediction, available_mb: float | None, reserve_mb: float = 0.0) -> FitCheck:
    if available_mb is None:
        return FitCheck(None, prediction.total_mb, None, reserve_mb)
    free = max(0.0, available_mb - reserve_mb)
    return FitCheck(prediction.total_mb <= free, prediction.total_mb, free, reserve_mb, "", available_mb)
