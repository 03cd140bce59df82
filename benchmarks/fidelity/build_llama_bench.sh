#!/usr/bin/env bash
# Build llama.cpp's `llama-bench` from the llama.cpp source vendored in the
# llama-cpp-python sdist, i.e. the same llama.cpp that edgeprof runs, with the
# same portable CPU flags edgeprof's llama-cpp-python build uses.
#
# Usage:
#   benchmarks/fidelity/build_llama_bench.sh [SDIST_TARBALL] [BUILD_ROOT]
#
#   SDIST_TARBALL  llama_cpp_python-<ver>.tar.gz; if omitted it is fetched with
#                  `pip download --no-deps --no-binary :all: llama-cpp-python==<ver>`
#                  where <ver> is the llama-cpp-python installed in the active
#                  Python (override with LLAMA_CPP_PYTHON_VERSION).
#   BUILD_ROOT     where the source is unpacked and built
#                  (default: benchmarks/out/llama-bench, which is git-ignored).
#
# Prints the path of the llama-bench binary on its last line of stdout.
# Environment: JOBS (default 2), PYTHON (default python3), TARGETS (default "llama-bench"; e.g.
# "llama-bench llama-perplexity" also builds llama-perplexity for benchmarks/fidelity/quality_vs_llama_perplexity.py,
# into the same bin/ folder).
set -euo pipefail

# benchmarks/out (git-ignored), where every benchmark writes
out="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/out"
PYTHON="${PYTHON:-python3}"
JOBS="${JOBS:-2}"
TARGETS="${TARGETS:-llama-bench}"
sdist="${1:-}"
build_root="${2:-$out/llama-bench}"

ver="${LLAMA_CPP_PYTHON_VERSION:-}"
if [[ -z "$ver" ]]; then
    ver="$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))' 2>/dev/null || true)"
fi

if [[ -z "$sdist" ]]; then
    [[ -n "$ver" ]] || { echo "cannot tell the llama-cpp-python version; pass the sdist path or set LLAMA_CPP_PYTHON_VERSION" >&2; exit 2; }
    dl="$build_root/dl"
    mkdir -p "$dl"
    sdist="$dl/llama_cpp_python-$ver.tar.gz"
    if [[ ! -f "$sdist" ]]; then
        echo ">> downloading llama-cpp-python==$ver sdist" >&2
        "$PYTHON" -m pip download --no-deps --no-binary :all: "llama-cpp-python==$ver" -d "$dl" >&2
    fi
fi
[[ -f "$sdist" ]] || { echo "sdist not found: $sdist" >&2; exit 2; }

sdist_name="$(basename "$sdist")"
sdist_name="${sdist_name%.tar.gz}"
if [[ -n "$ver" && "$sdist_name" != *"-$ver" ]]; then
    echo "WARNING: sdist $sdist_name does not match installed llama-cpp-python $ver" >&2
fi

src_root="$build_root/src"
src="$src_root/$sdist_name/vendor/llama.cpp"
if [[ ! -f "$src/CMakeLists.txt" ]]; then
    echo ">> unpacking $sdist" >&2
    mkdir -p "$src_root"
    tar -xzf "$sdist" -C "$src_root" "$sdist_name/vendor/llama.cpp"
fi

bld="$build_root/build-$sdist_name"
opts=(
    -G "$(command -v ninja >/dev/null && echo Ninja || echo 'Unix Makefiles')"
    -DCMAKE_BUILD_TYPE=Release
    # the same portable x86-64 flags as edgeprof's llama-cpp-python build
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
    -DGGML_F16C=ON -DGGML_BMI2=ON
    # llama-cpp-python builds llama/ggml as shared libraries
    -DBUILD_SHARED_LIBS=ON
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF
    -DLLAMA_BUILD_TOOLS=ON
)
# LLAMA_CURL is deprecated (a no-op with a warning) in newer llama.cpp; only
# pass the options this source tree still knows.
if grep -qE 'option\(LLAMA_CURL\b' "$src/CMakeLists.txt"; then opts+=(-DLLAMA_CURL=OFF); fi
if grep -qE 'option\(LLAMA_OPENSSL\b' "$src/CMakeLists.txt"; then opts+=(-DLLAMA_OPENSSL=OFF); fi

echo ">> configuring $bld" >&2
cmake -S "$src" -B "$bld" "${opts[@]}" >&2
echo ">> building $TARGETS (-j$JOBS)" >&2
# shellcheck disable=SC2086  # TARGETS is a space-separated list of cmake targets
cmake --build "$bld" --target $TARGETS -j"$JOBS" >&2

bin="$bld/bin/llama-bench"
[[ -x "$bin" ]] || { echo "llama-bench not found at $bin" >&2; exit 1; }
# record what was built, for the fidelity report
{
    echo "sdist=$sdist_name"
    echo "cmake_options=${opts[*]}"
    git -C "$src" rev-parse HEAD 2>/dev/null | sed 's/^/llama_cpp_commit=/' || true
} > "$bld/BUILD_INFO" 2>/dev/null || true
echo "$bin"
