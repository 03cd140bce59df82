#!/usr/bin/env bash
# One command from a fresh clone to a working edgeprof: creates .venv, builds llama-cpp-python with flags
# chosen for this platform, installs edgeprof with its dev tools.
#
#   bash scripts/setup.sh            # then: .venv/bin/edgeprof demo
#
# Flags (EDGEPROF_CMAKE_ARGS overrides all of this):
#   Jetson / aarch64 with CUDA (/etc/nv_tegra_release or nvcc) -> -DGGML_CUDA=on
#   x86_64 -> portable AVX2/FMA/F16C build: the default native build can emit instructions (AMX, AVX-512)
#             that a VM or a sibling machine lacks, and then dies with SIGILL on quantized models.
# A wheel is reused only when it was built with exactly these flags, this llama-cpp-python version, this
# Python and this machine type (pip's own wheel cache ignores CMAKE_ARGS, so it is bypassed).
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION="${EDGEPROF_LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

PYTHON="${PYTHON:-python3}"
command -v "$PYTHON" >/dev/null || die "$PYTHON not found; install Python >= 3.10"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
  || die "Python >= 3.10 needed, found $("$PYTHON" -V 2>&1)"
"$PYTHON" -c 'import venv, ensurepip' 2>/dev/null \
  || die "the venv module is missing; on Debian/Ubuntu/JetPack: sudo apt-get install python3-venv"

ARCH="$(uname -m)"
IS_JETSON=0
[[ -f /etc/nv_tegra_release ]] && IS_JETSON=1
NVCC="$(command -v nvcc || true)"
[[ -z "$NVCC" && -x /usr/local/cuda/bin/nvcc ]] && NVCC=/usr/local/cuda/bin/nvcc

if [[ -n "${EDGEPROF_CMAKE_ARGS:-}" ]]; then
  CMAKE_ARGS_CHOSEN="$EDGEPROF_CMAKE_ARGS"; WHY="EDGEPROF_CMAKE_ARGS"
elif [[ "$ARCH" == "aarch64" && ( $IS_JETSON == 1 || -n "$NVCC" ) ]]; then
  [[ -n "$NVCC" ]] || die "Jetson detected but nvcc not found; install CUDA (JetPack: sudo apt-get install nvidia-jetpack) or set EDGEPROF_CMAKE_ARGS"
  export CUDACXX="$NVCC"
  export PATH="$(dirname "$NVCC"):$PATH"
  # One architecture, this board's own (scripts/cuda_arch.sh says how it was found, or why CUDA is too old).
  CUDA_ARCH_LINE="$(bash "$ROOT/scripts/cuda_arch.sh" --nvcc "$NVCC")" || exit 1
  CUDA_ARCH="${CUDA_ARCH_LINE%%$'\t'*}"
  CMAKE_ARGS_CHOSEN="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCH"
  WHY="aarch64 with CUDA (Jetson=$IS_JETSON, nvcc=$NVCC), CUDA architecture $CUDA_ARCH from ${CUDA_ARCH_LINE#*$'\t'}"
elif [[ "$ARCH" == "x86_64" ]]; then
  CMAKE_ARGS_CHOSEN="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
  WHY="x86_64, portable (no AMX/AVX-512)"
else
  CMAKE_ARGS_CHOSEN=""; WHY="$ARCH, llama.cpp defaults"
fi
say "llama-cpp-python $LLAMA_CPP_PYTHON_VERSION with CMAKE_ARGS='$CMAKE_ARGS_CHOSEN' ($WHY)"

[[ -x .venv/bin/python ]] || { say "creating .venv"; "$PYTHON" -m venv .venv; }
PY="$ROOT/.venv/bin/python"
"$PY" -m pip install --quiet --upgrade pip setuptools wheel

PYVER="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
KEY="$(printf '%s|%s|%s|%s' "$LLAMA_CPP_PYTHON_VERSION" "$CMAKE_ARGS_CHOSEN" "$ARCH" "$PYVER" | sha256sum | cut -c1-16)"
BUILD_RECORD=".venv/share/edgeprof/llama-build.json"
RECORD_JSON="{\"llama_cpp_python\": \"$LLAMA_CPP_PYTHON_VERSION\", \"cmake_args\": \"$CMAKE_ARGS_CHOSEN\", \"arch\": \"$ARCH\", \"python\": \"$PYVER\", \"key\": \"$KEY\"}"

if [[ -f "$BUILD_RECORD" ]] && grep -q "\"key\": \"$KEY\"" "$BUILD_RECORD" && "$PY" -c 'import llama_cpp' 2>/dev/null; then
  say "llama-cpp-python already built with these flags (key $KEY)"
else
  WHEEL_CACHE="${EDGEPROF_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/edgeprof/wheels}/$KEY"
  WHEEL="$(ls "$WHEEL_CACHE"/llama_cpp_python-*.whl 2>/dev/null | head -n1 || true)"
  if [[ -z "$WHEEL" || "${EDGEPROF_NO_WHEEL_CACHE:-0}" == "1" ]]; then
    say "building llama-cpp-python from source (several minutes; 15+ on a 2-core machine)"
    mkdir -p "$WHEEL_CACHE"
    CMAKE_ARGS="$CMAKE_ARGS_CHOSEN" FORCE_CMAKE=1 "$PY" -m pip wheel --no-cache-dir --no-deps \
      --no-binary llama-cpp-python "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -w "$WHEEL_CACHE"
    WHEEL="$(ls "$WHEEL_CACHE"/llama_cpp_python-*.whl | head -n1)"
  else
    say "reusing $WHEEL (built earlier with the same flags)"
  fi
  "$PY" -m pip install --quiet --no-cache-dir --force-reinstall "$WHEEL"
  mkdir -p "$(dirname "$BUILD_RECORD")"
  printf '%s\n' "$RECORD_JSON" > "$BUILD_RECORD"
fi

# postgres: psycopg 3, so --db postgresql://... (a central fleet DB) works and its tests run.
EXTRAS="dev,postgres"
[[ $IS_JETSON == 1 ]] && EXTRAS="$EXTRAS,jetson"
{ command -v nvidia-smi >/dev/null || [[ $IS_JETSON == 1 ]]; } && EXTRAS="$EXTRAS,nvidia"
say "installing edgeprof[$EXTRAS]"
"$PY" -m pip install --quiet -e ".[$EXTRAS]"

# llama-server (the serving runner) and llama-bench (what `edgeprof bench` is tested against) from the same
# llama.cpp source and flags as the wheel, in one build; cached by key, a tool missing from the cache is built.
# EDGEPROF_SKIP_SERVER_BUILD=1 skips both (the serving and llama-bench tests then skip unless CI is set).
if [[ "${EDGEPROF_SKIP_SERVER_BUILD:-0}" != "1" ]]; then
  bash "$ROOT/scripts/build_llama_server.sh" "$ROOT/.venv" "$LLAMA_CPP_PYTHON_VERSION" "$CMAKE_ARGS_CHOSEN"
fi

# Smoke check: the build must load a quantized model without SIGILL before we call setup done.
"$PY" - <<'PYEOF'
import tempfile, pathlib, subprocess, sys
code = (
    "import pathlib, sys, llama_cpp as ll\n"
    "from edgeprof.gguf import write_f16_gguf, quantize\n"
    "d = pathlib.Path(sys.argv[1])\n"
    "f16 = write_f16_gguf(d / 'f16.gguf', 'tiny')\n"
    "quantize(f16, d / 'q4.gguf', 15)\n"
    "ll.llama_backend_init()\n"
    "p = ll.llama_model_default_params()\n"
    "m = ll.llama_model_load_from_file(str(d / 'q4.gguf').encode(), p)\n"
    "c = ll.llama_init_from_model(m, ll.llama_context_default_params())\n"
    "toks = (ll.llama_token * 4)(1, 300, 301, 302)\n"
    "assert ll.llama_decode(c, ll.llama_batch_get_one(toks, 4)) == 0\n"
)
with tempfile.TemporaryDirectory() as d:
    r = subprocess.run([sys.executable, "-c", code, d], capture_output=True, text=True)
    if r.returncode != 0:
        sig = f" (signal {-r.returncode})" if r.returncode < 0 else ""
        print(f"setup: error: llama.cpp smoke test failed{sig}: {r.stderr.strip().splitlines()[-1:] }", file=sys.stderr)
        sys.exit(1)
print("setup: llama.cpp smoke test passed (quantized model decodes)")
PYEOF
say "done. Tests: .venv/bin/python -m pytest    Demo: .venv/bin/edgeprof demo"
