"""``edgeprof models demo``: the demo GGUF models (``edgeprof demo`` builds them too when missing)."""

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


def register(models_app: typer.Typer) -> None:
    models_app.command("demo", epilog="Example: edgeprof models demo --size tiny --out ./models")(models_demo)
