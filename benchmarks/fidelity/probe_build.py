"""Compile one of the C++ probes (``ctx_probe.cpp``, ``lockstep_probe.cpp``) against the llama.cpp that
``build_llama_bench.sh`` built from the same sdist as edgeprof's wheel, or, without that build, against the
wheel's own libraries (``llama_cpp/lib``) with the headers of the sdist ``scripts/setup.sh`` kept in its cache
(``EDGEPROF_SDIST`` names another); again only when it or ``probe_common.h`` changed."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from common import OUT_DIR, latest_build

HERE = Path(__file__).resolve().parent


def _wheel_sources() -> tuple[Path, Path]:
    """(vendored llama.cpp source with headers, the wheel's library folder), from the cached sdist."""
    import llama_cpp

    libdir = Path(llama_cpp.__file__).parent / "lib"
    cached = Path.home() / ".cache/edgeprof/llama-server/*/work/dl/llama_cpp_python-*.tar.gz"
    sdists = [os.environ.get("EDGEPROF_SDIST", ""), *sorted(glob.glob(str(cached)))]
    sdist = next((Path(s) for s in sdists if s and Path(s).exists()), None)
    if sdist is None:
        sys.exit(
            "no llama-bench build and no cached sdist: run benchmarks/fidelity/build_llama_bench.sh first"
        )
    dest = OUT_DIR / "probe-src" / sdist.name.removesuffix(".tar.gz")
    if not dest.exists():
        with tarfile.open(sdist) as tar:
            wanted = [m for m in tar.getmembers() if "/vendor/llama.cpp/" in m.name and "/include/" in m.name]
            tar.extractall(dest, members=wanted, filter="data")
    return next(dest.glob("*/vendor/llama.cpp")), libdir


def build_probe(name: str, libs: str = "auto") -> Path:
    """``libs``: ``auto`` (the llama-bench build where there is one, else the wheel's), ``llama-bench`` or
    ``wheel`` (the very libraries edgeprof's worker loads: a difference left is then the process, not the
    build)."""
    build = latest_build() if libs != "wheel" else None
    if build is not None:
        src = next((build.parent / "src").glob("*/vendor/llama.cpp"))
        libdir = build / "bin"
    elif libs == "llama-bench":
        sys.exit("no llama-bench build: run benchmarks/fidelity/build_llama_bench.sh first")
    else:
        src, libdir = _wheel_sources()
    source = HERE / f"{name}.cpp"
    exe = OUT_DIR / (name if build is not None else f"{name}-wheel")  # one binary per set of libraries
    newest = max(source.stat().st_mtime, (HERE / "probe_common.h").stat().st_mtime)
    if not exe.exists() or exe.stat().st_mtime < newest:
        cmd = [
            "g++", "-O2", "-std=c++17", f"-I{src}/include", f"-I{src}/ggml/include", str(source),
            f"-L{libdir}", "-l:libllama.so", "-l:libggml.so", "-l:libggml-base.so", "-l:libggml-cpu.so",
            f"-Wl,-rpath,{libdir}",
            "-o", str(exe),
        ]  # fmt: skip
        subprocess.run(cmd, check=True)
    return exe
