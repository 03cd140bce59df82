"""``edgeprof models demo``: the demo GGUF models (``edgeprof demo`` builds them too when missing);
``edgeprof models quantize``: the quants to compare, made from the user's own F16/BF16 GGUF."""

from __future__ import annotations

import contextlib
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from edgeprof.cli.common import JsonOption, data_dir, fail, quiet_native_stderr


class DemoSizeChoice(str, Enum):
    tiny = "tiny"
    small = "small"


OutOption = Annotated[Path | None, typer.Option("--out", help="Folder for the GGUF files.")]
SizeOption = Annotated[DemoSizeChoice, typer.Option("--size", help="tiny (tests) or small (~29 M params).")]
ForceOption = Annotated[bool, typer.Option("--force", help="Rebuild even if the files exist.")]


def models_demo(
    out: OutOption = None,
    size: SizeOption = DemoSizeChoice.small,
    force: ForceOption = False,
    as_json: JsonOption = False,
) -> None:
    """Write a llama-architecture GGUF (F16) and quantize it to Q8_0, Q5_K_M and Q4_K_M."""
    paths = build_demo(out or data_dir() / "models", size.value, force)
    if as_json:
        import json

        typer.echo(json.dumps({quant: str(path) for quant, path in paths.items()}, indent=2))
        return
    for quant, path in paths.items():
        typer.echo(f"{quant:7s} {path}")


def build_demo(out: Path, size: str, force: bool) -> dict[str, Path]:
    """quant -> path of the demo models in ``out`` (built when missing); llama.cpp's own output is kept off
    the terminal and shown (its tail) only when the build fails."""
    from edgeprof.gguf import build_demo_models

    try:
        with quiet_native_stderr() as log:
            paths = build_demo_models(out, size, force=force)
    except (RuntimeError, OSError) as exc:
        tail = log.read_text(errors="replace")[-800:] if log.exists() else ""
        fail(f"building demo models failed: {exc}" + (f"\n{tail}" if tail else ""))
    finally:
        with contextlib.suppress(OSError, UnboundLocalError):
            log.unlink()
    return paths


SourceArg = Annotated[Path, typer.Argument(help="The GGUF to quantize (F16, BF16 or F32).")]
TypesOption = Annotated[
    str, typer.Option("--types", help="Comma-separated llama.cpp types, e.g. Q8_0,Q5_K_M,Q4_K_M.")
]
QuantOutOption = Annotated[
    Path | None, typer.Option("--out", help="Folder for the quantized files (default: the source's folder).")
]
RequantOption = Annotated[
    bool,
    typer.Option(
        "--allow-requantize",
        help="Quantize an already-quantized source anyway; the files are marked requantized in every report.",
    ),
]


def models_quantize(
    source: SourceArg,
    types: TypesOption = "Q8_0,Q5_K_M,Q4_K_M",
    out: QuantOutOption = None,
    allow_requantize: RequantOption = False,
) -> None:
    """Make the quants to compare from a GGUF with llama.cpp's own quantizer (<name>-<type>.gguf each).

    A source that is already quantized is refused: a quant made from it loses precision twice."""
    from edgeprof.gguf import GGUFError, read_gguf_info, sha256_file
    from edgeprof.gguf.quantizer import QuantizeError, quantize_model
    from edgeprof.safetext import safe_text

    try:
        info = read_gguf_info(source)
    except GGUFError as exc:
        fail(safe_text(str(exc)))
    wanted = [t.strip() for t in types.split(",") if t.strip()]
    try:
        with quiet_native_stderr() as log:
            result = quantize_model(
                source,
                out or source.parent,
                wanted,
                allow_requantize=allow_requantize,
                source_quant=info.quant_type,
                source_sha256=lambda: sha256_file(source),
            )
    except QuantizeError as exc:
        fail(safe_text(str(exc)))
    except OSError as exc:
        fail(f"quantizing {safe_text(source)} failed: {safe_text(exc)}")
    finally:
        with contextlib.suppress(OSError, UnboundLocalError):
            log.unlink()
    for quant, path in result.made.items():
        typer.echo(f"{quant:7s} {safe_text(path)}")  # a newline in a path must not forge a second line
    if result.requantized_from is not None:
        typer.echo(f"note: requantized from {result.requantized_from}; marked in each file and every report")


def register(models_app: typer.Typer) -> None:
    models_app.command("demo", epilog="Example: edgeprof models demo --size tiny --out ./models")(models_demo)
    models_app.command(
        "quantize", epilog="Example: edgeprof models quantize model-f16.gguf --types Q8_0,Q5_K_M,Q4_K_M"
    )(models_quantize)
