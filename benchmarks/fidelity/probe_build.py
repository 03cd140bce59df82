"""Compile one of the C++ probes (``ctx_probe.cpp``, ``lockstep_probe.cpp``) against the llama.cpp that
``build_llama_bench.sh`` built from the same sdist as edgeprof's wheel; again only when it or
``probe_common.h`` changed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from common import OUT_DIR, latest_build

HERE = Path(__file__).resolve().parent


def build_probe(name: str) -> Path:
    build = latest_build()
    if build is None:
        sys.exit("run benchmarks/fidelity/build_llama_bench.sh first")
    src = next((build.parent / "src").glob("*/vendor/llama.cpp"))
    libdir = build / "bin"
    source = HERE / f"{name}.cpp"
    exe = OUT_DIR / name
    newest = max(source.stat().st_mtime, (HERE / "probe_common.h").stat().st_mtime)
    if not exe.exists() or exe.stat().st_mtime < newest:
        cmd = [
            "g++", "-O2", "-std=c++17", f"-I{src}/include", f"-I{src}/ggml/include", str(source),
            f"-L{libdir}", "-lllama", "-lggml", "-lggml-base", "-lggml-cpu", f"-Wl,-rpath,{libdir}",
            "-o", str(exe),
        ]  # fmt: skip
        subprocess.run(cmd, check=True)
    return exe
