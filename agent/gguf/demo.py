"""Build the demo models: a llama-architecture GGUF in F16 written with the ``gguf`` package, then quantized
by llama.cpp's own quantizer to Q8_0, Q5_K_M and Q4_K_M.

The weights are random (a fixed seed), so the text is gibberish, but every tensor has the shapes and types of
a real llama model and runs through the same kernels: speed, memory and quant-vs-quant divergence are real.
The F16 file is byte-for-byte identical for a given size on every machine.
"""

from __future__ import annotations

import ctypes
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

DEMO_QUANTS: dict[str, int] = {"Q8_0": 7, "Q5_K_M": 17, "Q4_K_M": 15}

# gguf token types (llama.cpp's llama_token_type)
_TOKEN_NORMAL, _TOKEN_UNKNOWN, _TOKEN_CONTROL, _TOKEN_BYTE = 1, 2, 3, 6

_WORDS = (
    "the of and to in is that for it as with was on be by this are or at from an which have not but they his "
    "her we can one all there their has been more if will would when what about so no out up into only other "
    "model token speed memory power device edge jetson quant cache context layer time first steady cold run "
    "llama decode prefill latency throughput energy thermal clock board report test result sweep"
).split()


@dataclass(frozen=True)
class DemoSize:
    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_ctx_train: int


# n_embd and n_ff are multiples of 256 so every matrix takes the K-quant types (QK_K = 256) rather than a
# fallback type: Q4_K_M here means what it means on a real model.
DEMO_SIZES: dict[str, DemoSize] = {
    "tiny": DemoSize(n_vocab=1024, n_embd=256, n_layer=2, n_head=4, n_head_kv=4, n_ff=768, n_ctx_train=2048),
    # ~31 M parameters: decode is dominated by the matrix-vector work, not per-call overhead.
    "small": DemoSize(
        n_vocab=4096, n_embd=512, n_layer=8, n_head=8, n_head_kv=4, n_ff=1536, n_ctx_train=4096
    ),
}


# ChatML's control tokens, for the test variant with a chat template (chat workloads need a model with one)
CHAT_SPECIALS = ("<|im_start|>", "<|im_end|>")
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def _vocab(n_vocab: int, extra_specials: tuple[str, ...] = ()) -> tuple[list[str], list[float], list[int]]:
    """An SPM-style vocabulary: specials, 256 byte-fallback tokens, then words and letter pieces."""
    tokens = ["<unk>", "<s>", "</s>", *extra_specials]
    types = [_TOKEN_UNKNOWN, _TOKEN_CONTROL, _TOKEN_CONTROL] + [_TOKEN_CONTROL] * len(extra_specials)
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(_TOKEN_BYTE)
    pieces: list[str] = []
    pieces += ["▁" + w for w in _WORDS]
    pieces += ["▁" + c for c in string.ascii_letters + string.digits]
    pieces += list(string.ascii_letters + string.digits + string.punctuation)
    pieces += [a + b for a in "etaoinshrdlu" for b in "etaoinshrdlucmfwy"]
    pieces += ["▁" + a + b for a in "tawsbcdfhimop" for b in "heoaiurn"]
    seen: set[str] = set(tokens)
    unique = [p for p in pieces if not (p in seen or seen.add(p))]  # type: ignore[func-returns-value]
    i = 0
    while len(tokens) + len(unique) < n_vocab:
        unique.append(f"▁w{i}")
        i += 1
    tokens += unique[: n_vocab - len(tokens)]
    types += [_TOKEN_NORMAL] * (n_vocab - len(types))
    # SPM merges prefer higher scores; longer pieces first gives word tokens before letters.
    n_special = 3 + len(extra_specials)
    scores = [0.0] * n_special + [-1000.0] * 256 + [-(float(k)) for k in range(n_vocab - 256 - n_special)]
    return tokens, scores, types


def write_f16_gguf(
    path: Path,
    size: str = "tiny",
    seed: int = 20261129,
    *,
    chat_template: str | None = None,
    sliding_window: int | None = None,
    eos_token_id: int = 2,
    n_layer: int | None = None,
    n_vocab: int | None = None,
) -> Path:
    """Write the demo model in F16 (norms in F32, as llama.cpp's converter does).

    Test variants, for chat, sliding-window and early-EOS tests (the defaults write the demo model byte for
    byte as before, and the names say synthetic): ``chat_template`` adds ChatML's control tokens and the
    template; ``sliding_window`` writes a Gemma-3-style model (gemma3 architecture: every sixth layer
    global, the others sliding-window) whose KV cache llama.cpp sizes per the window; ``eos_token_id``
    makes another token EOS, so a greedy run stops early at a known place; ``n_vocab`` gives the model a
    vocabulary of that many tokens (real models have 32 k to 262 k: the memory of a quality run, which keeps
    n_vocab floats per scored position, grows with it, and the demo's 1 k–4 k hides that).
    """
    import gguf

    if size not in DEMO_SIZES:
        raise ValueError(f"unknown demo size {size!r}; choose one of {', '.join(DEMO_SIZES)}")
    cfg = DEMO_SIZES[size]
    if n_layer is not None:
        cfg = DemoSize(**{**cfg.__dict__, "n_layer": n_layer})
    if n_vocab is not None:
        if n_vocab < 1024:  # the specials, the 256 byte tokens and the word pieces need room
            raise ValueError(f"n_vocab {n_vocab} is too small for the demo vocabulary (at least 1024)")
        cfg = DemoSize(**{**cfg.__dict__, "n_vocab": n_vocab})
    arch = "gemma3" if sliding_window else "llama"
    tmp = path.with_suffix(path.suffix + ".tmp")
    writer = gguf.GGUFWriter(str(tmp), arch=arch)
    variant = ("-chat" if chat_template else "") + (f"-swa{sliding_window}" if sliding_window else "")
    variant += f"-v{n_vocab}" if n_vocab is not None else ""
    writer.add_name(f"edgeprof-demo-{size}" + (f"{variant}-synthetic" if variant else ""))
    _add_hyperparameters(writer, cfg, sliding_window)
    _add_tokenizer(writer, cfg, chat_template, eos_token_id)
    _add_tensors(writer, cfg, seed, arch)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(path)
    return path


def _add_hyperparameters(writer: Any, cfg: DemoSize, sliding_window: int | None) -> None:
    import gguf

    head_dim = cfg.n_embd // cfg.n_head
    writer.add_context_length(cfg.n_ctx_train)
    writer.add_embedding_length(cfg.n_embd)
    writer.add_block_count(cfg.n_layer)
    writer.add_feed_forward_length(cfg.n_ff)
    writer.add_head_count(cfg.n_head)
    writer.add_head_count_kv(cfg.n_head_kv)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(int(gguf.LlamaFileType.MOSTLY_F16))
    if sliding_window:
        writer.add_sliding_window(sliding_window)
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)


def _add_tokenizer(writer: Any, cfg: DemoSize, chat_template: str | None, eos_token_id: int) -> None:
    tokens, scores, types = _vocab(cfg.n_vocab, CHAT_SPECIALS if chat_template else ())
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(eos_token_id)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    if chat_template:
        writer.add_chat_template(chat_template)


def _add_tensors(writer: Any, cfg: DemoSize, seed: int, arch: str) -> None:
    """Random weights from ``seed``, drawn in a fixed order: the same seed gives the same bytes."""
    import numpy as np  # here, not at the top: importing edgeprof.gguf must not load numpy (CLI start-up)

    rng = np.random.default_rng(seed)
    head_dim = cfg.n_embd // cfg.n_head
    n_embd_kv = head_dim * cfg.n_head_kv

    def mat(rows: int, cols: int, std: float) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * std).astype(np.float16)

    def norm(n: int = cfg.n_embd) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    std = 1.0 / np.sqrt(cfg.n_embd)
    embd = mat(cfg.n_vocab, cfg.n_embd, 1.0)
    writer.add_tensor("token_embd.weight", embd)
    for i in range(cfg.n_layer):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", norm())
        writer.add_tensor(f"blk.{i}.attn_q.weight", mat(cfg.n_embd, cfg.n_embd, std))
        writer.add_tensor(f"blk.{i}.attn_k.weight", mat(n_embd_kv, cfg.n_embd, std))
        writer.add_tensor(f"blk.{i}.attn_v.weight", mat(n_embd_kv, cfg.n_embd, std))
        writer.add_tensor(f"blk.{i}.attn_output.weight", mat(cfg.n_embd, cfg.n_embd, 2.0 * std))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", norm())
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", mat(cfg.n_ff, cfg.n_embd, std))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", mat(cfg.n_ff, cfg.n_embd, std))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", mat(cfg.n_embd, cfg.n_ff, 2.0 / np.sqrt(cfg.n_ff)))
        if arch == "gemma3":  # Gemma's extra norms: per-head Q/K norms, post-attention and post-FFN norms
            writer.add_tensor(f"blk.{i}.attn_q_norm.weight", norm(head_dim))
            writer.add_tensor(f"blk.{i}.attn_k_norm.weight", norm(head_dim))
            writer.add_tensor(f"blk.{i}.post_attention_norm.weight", norm())
            writer.add_tensor(f"blk.{i}.post_ffw_norm.weight", norm())
    writer.add_tensor("output_norm.weight", norm())
    # The output matrix is the embedding with its rows permuted: the residual stream still carries the
    # current token, so greedy decoding follows a definite chain through the vocabulary that the layers
    # perturb. With a fully random head every logit is a near-tie and even Q8_0 vs F16 diverges at the first
    # token, which would make the quality column meaningless for the demo.
    perm = rng.permutation(cfg.n_vocab)
    writer.add_tensor("output.weight", np.ascontiguousarray(embd[perm]))


def quantize(src: Path, dst: Path, ftype: int, n_threads: int = 0) -> None:
    """Quantize with llama.cpp's quantizer (``llama_model_quantize``); raises RuntimeError on failure."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = n_threads
    tmp = dst.with_suffix(dst.suffix + ".tmp")
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(tmp).encode(), ctypes.byref(params))
    if rc != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"llama_model_quantize({src.name} -> ftype {ftype}) failed with code {rc}")
    tmp.replace(dst)


def demo_model_paths(out: Path, size: str) -> dict[str, Path]:
    base = f"edgeprof-demo-{size}"
    paths = {"F16": out / f"{base}-f16.gguf"}
    for quant in DEMO_QUANTS:
        paths[quant] = out / f"{base}-{quant.lower()}.gguf"
    return paths


def build_demo_models(
    out: Path, size: str = "tiny", force: bool = False, log: Callable[[str], None] | None = None
) -> dict[str, Path]:
    """Write the F16 model and its quantizations under ``out``; existing files are kept unless ``force``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = demo_model_paths(out, size)
    if force or not paths["F16"].exists():
        if log:
            log(f"writing {paths['F16']}")
        write_f16_gguf(paths["F16"], size)
    for quant, ftype in DEMO_QUANTS.items():
        if force or not paths[quant].exists():
            if log:
                log(f"quantizing to {quant}: {paths[quant]}")
            quantize(paths["F16"], paths[quant], ftype)
    return paths
