"""The ``kind = "quality"`` workload of a plan: its keys, validation, and the params its runs use.

A quality workload measures how far each variant's next-token distribution is from the reference's over a
fixed text (KL divergence, same top token, perplexity), as llama-perplexity's ``--kl-divergence`` does. It
is kept apart from the generation workloads (agent/plan/workloads.py only calls in here) so those stay as
they were.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from edgeprof.plan.checker import Checker
from edgeprof.safefs import UnsafePath, read_regular

DEFAULT_CTX = 512
# "All chunks" is capped: a 100-chunk pass at ctx 512 is ~25 k scored tokens, which puts the standard error
# of mean KLD well below the differences between quants, and keeps a reference cache of a 150 k-token
# vocabulary near 7.7 GB rather than unbounded.
MAX_CHUNKS = 100
# A quality text is read whole at validation (its hash is part of the config): 64 MiB is ~16 M tokens, far
# more than MAX_CHUNKS chunks of any context, and far less than a file that never ends (/dev/zero).
MAX_TEXT_FILE_BYTES = 64 << 20

# The text shipped with edgeprof (agent/data/): public-domain prose of a few thousand tokens.
DEFAULT_TEXT_NAME = "alice_ch1-2.txt"
DEFAULT_TEXT_SHA256 = "546210f182a1cc8360a99a0326c62f02adbc97e2551c09ab350fa32bd533be25"
DEFAULT_TEXT_SOURCE = (
    "Lewis Carroll, Alice's Adventures in Wonderland (1865, public domain), chapters I-II, from the "
    "Millennium Fulcrum Edition 2.9 (Project Gutenberg), as the Canterbury-corpus file alice29.txt in the "
    "Brotli 1.2.1 sdist on PyPI (tests/testdata/alice29.txt, sha256 7467306ee0feed49...), lines 1-472, "
    "CRLF line ends made LF"
)

QUALITY_KEYS = {"name", "kind", "text", "text_file", "ctx", "chunks", "reference"}


@dataclass(frozen=True)
class QualitySpec:
    """What a quality run scores; ``text`` itself stays out of the spec id and the stored JSON (its hash
    is in)."""

    source: str
    text_sha256: str
    ctx: int = DEFAULT_CTX
    chunks: int | None = None
    reference: str | None = None
    text: str = field(default="", compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "text_sha256": self.text_sha256,
            "ctx": self.ctx,
            "chunks": self.chunks,
            "max_chunks": MAX_CHUNKS,
            "reference": self.reference,
        }


def default_text() -> str:
    data = resources.files("edgeprof").joinpath("data").joinpath(DEFAULT_TEXT_NAME).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != DEFAULT_TEXT_SHA256:
        # A packaging slip (line-end conversion, truncation) must not pass as the documented text.
        raise RuntimeError(
            f"edgeprof's default quality text has sha256 {digest}, expected {DEFAULT_TEXT_SHA256}"
        )
    return data.decode("utf-8")


def is_quality(table: dict[str, Any]) -> bool:
    return table.get("kind") == "quality"


def parse_quality(chk: Checker, table: dict[str, Any], place: str, base: Path) -> QualitySpec | None:
    """Validate one ``kind = "quality"`` workload table; every problem goes to ``chk``."""
    chk.unknown_keys(table, QUALITY_KEYS, place)
    ctx = chk.integer(table.get("ctx", DEFAULT_CTX), f"{place}.ctx", minimum=16)
    chunks = chk.integer(table["chunks"], f"{place}.chunks", minimum=1) if "chunks" in table else None
    if chunks is not None and chunks > MAX_CHUNKS:
        chk.add(f"{place}.chunks", f"at most {MAX_CHUNKS} chunks, got {chunks}")
        chunks = None
    reference = chk.string(table["reference"], f"{place}.reference") if "reference" in table else None
    text: str | None = None
    source = ""
    if "text" in table and "text_file" in table:
        chk.add(place, "give 'text' or 'text_file', not both")
        return None
    if "text" in table:
        text = chk.string(table["text"], f"{place}.text")
        source = "inline text in the plan"
    elif "text_file" in table:
        raw = chk.string(table["text_file"], f"{place}.text_file")
        if raw is None:
            return None
        path = Path(os.path.expandvars(os.path.expanduser(raw)))
        if not path.is_absolute():
            path = base / path
        try:
            # Bounded and regular only: a FIFO would hang validation, /dev/zero exhaust memory.
            text = read_regular(path, MAX_TEXT_FILE_BYTES).decode("utf-8")
        except FileNotFoundError:
            chk.add(f"{place}.text_file", f"no such file: {path}")
            return None
        except UnsafePath as exc:
            chk.add(f"{place}.text_file", exc.strerror or str(exc))
            return None
        except UnicodeDecodeError:
            chk.add(f"{place}.text_file", f"not UTF-8 text: {path}")
            return None
        except OSError as exc:
            chk.add(f"{place}.text_file", f"cannot read {path}: {exc.strerror}")
            return None
        source = f"file {path}"
    else:
        text = default_text()
        source = f"edgeprof default text {DEFAULT_TEXT_NAME}: {DEFAULT_TEXT_SOURCE}"
    if text is None or ctx is None:
        return None
    n_bytes = len(text.encode("utf-8"))
    # At most one token per byte (+ BOS): a text shorter than that bound cannot fill one chunk.
    if n_bytes + 1 < ctx:
        chk.add(place, f"the text has {n_bytes} bytes, too short for one chunk of ctx {ctx} tokens")
        return None
    return QualitySpec(
        source=source,
        text_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        ctx=ctx,
        chunks=chunks,
        reference=reference,
        text=text,
    )


def quality_params(axes: dict[str, tuple[Any, ...]], spec: QualitySpec) -> dict[str, Any]:
    """The llama.cpp params of a quality run (one per model and quality workload, not one per matrix cell).

    The numbers do not depend on the speed axes, so: the workload's ctx; n_batch = ctx and n_ubatch =
    min(512, ctx) (llama-perplexity's defaults at that ctx: one batch per chunk); the most offloaded -ngl
    of the plan (the fastest way through the text); the first value of every other axis.
    """
    first = {name: values[0] for name, values in axes.items()}
    return {
        "n_gpu_layers": max(axes["ngl"]),
        "use_mmap": first["mmap"],
        "n_ctx": spec.ctx,
        "n_batch": spec.ctx,
        "n_ubatch": min(512, spec.ctx),
        "flash_attn": first["flash_attn"],
        "type_k": first["type_k"],
        "type_v": first["type_v"],
        "n_threads": first["threads"],
    }
