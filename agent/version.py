"""``edgeprof --version``: edgeprof, llama-cpp-python and the llama.cpp (ggml) build it carries.

Read without importing llama_cpp (that loads the whole library and costs start-up time): the package version
from its metadata, ggml's version and commit from ``libggml-base`` through ctypes, and the CMake flags that
scripts/setup.sh recorded in the venv.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path

from edgeprof import __version__


def _ggml_build() -> tuple[str | None, str | None]:
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None, None
    for folder in spec.submodule_search_locations:
        for lib in sorted((Path(folder) / "lib").glob("libggml-base.*")):
            try:
                handle = ctypes.CDLL(str(lib))
            except OSError:
                continue
            found: list[str | None] = []
            for name in ("ggml_version", "ggml_commit"):
                fn = getattr(handle, name, None)
                if fn is None:
                    found.append(None)
                    continue
                fn.restype = ctypes.c_char_p
                value = fn()
                found.append(value.decode() if value else None)
            return found[0], found[1]
    return None, None


def build_flags() -> str | None:
    path = Path(sys.prefix) / "share" / "edgeprof" / "llama-build.json"
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    flags = record.get("cmake_args") if isinstance(record, dict) else None
    return str(flags) if flags is not None else None


def version_text() -> str:
    try:
        lcp = importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        lcp = "not installed"
    ggml_version, ggml_commit = _ggml_build()
    lines = [f"edgeprof {__version__}", f"llama-cpp-python {lcp}"]
    if ggml_version or ggml_commit:
        lines.append(f"llama.cpp ggml {ggml_version or '?'} (commit {ggml_commit or '?'})")
    flags = build_flags()
    if flags is not None:
        lines.append(f"built with CMAKE_ARGS='{flags}'")
    lines.append(f"Python {sys.version.split()[0]} ({sys.executable})")
    return "\n".join(lines)
