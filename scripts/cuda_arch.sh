#!/usr/bin/env bash
# Which CUDA architecture to build llama.cpp for on this board, and whether its CUDA can build it at all.
#
#   bash scripts/cuda_arch.sh [--root DIR] [--nvcc PATH]
#
# Prints one line "ARCH<TAB>how it was found" (e.g. "87	device tree: NVIDIA Jetson AGX Orin Developer Kit"),
# or one line "cuda_arch: error: ..." on stderr and exits 2. scripts/setup.sh passes the result as
# -DCMAKE_CUDA_ARCHITECTURES=ARCH, so the build holds real device code for this GPU only: without it,
# llama.cpp builds a list of architectures, most of them as PTX that the driver JIT-compiles on the first
# load, which takes minutes on a Jetson and would be measured as cold start.
#
# Order: EDGEPROF_CUDA_ARCH (override, e.g. 87) > nvidia-smi's compute capability (dGPUs, Thor) > the device
# tree (/proc/device-tree/compatible and model: module part numbers and SoC names). --root makes the
# device-tree paths relative to DIR (tests).
set -euo pipefail

ROOT=""
NVCC="${NVCC:-$(command -v nvcc || true)}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --root) ROOT="${2%/}"; shift ;;
    --nvcc) NVCC="$2"; shift ;;
    *) printf 'cuda_arch: error: unknown option %s\n' "$1" >&2; exit 2 ;;
  esac
  shift
done

die() { printf 'cuda_arch: error: %s\n' "$*" >&2; exit 2; }

# --- the toolkit ---------------------------------------------------------------------------------------
# llama.cpp is C++17 throughout, host and device code; nvcc learned C++17 in CUDA 11.0. JetPack 4 (Nano,
# TX1, TX2, Xavier on L4T 32) ships CUDA 10.2, which fails deep inside the first .cu file.
CUDA_MIN_MAJOR=11
CUDA_VERSION=""
if [[ -n "$NVCC" ]]; then
  CUDA_VERSION="$("$NVCC" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | tail -n1)"
  [[ -n "$CUDA_VERSION" ]] || die "cannot read the CUDA version from '$NVCC --version'"
  major="${CUDA_VERSION%%.*}"
  if (( major < CUDA_MIN_MAJOR )); then
    die "CUDA $CUDA_VERSION (from $NVCC) is too old for the llama.cpp that llama-cpp-python vendors: it needs CUDA >= $CUDA_MIN_MAJOR.0 (C++17 in nvcc); this board's JetPack is too old for a CUDA build (EDGEPROF_CMAKE_ARGS='' builds for the CPU only)"
  fi
fi
cuda_major="${CUDA_VERSION%%.*}"

# --- the GPU -------------------------------------------------------------------------------------------
if [[ -n "${EDGEPROF_CUDA_ARCH:-}" ]]; then
  [[ "$EDGEPROF_CUDA_ARCH" =~ ^[0-9]+[af]?$ ]] || die "EDGEPROF_CUDA_ARCH='$EDGEPROF_CUDA_ARCH' is not an architecture such as 87"
  printf '%s\t%s\n' "$EDGEPROF_CUDA_ARCH" "EDGEPROF_CUDA_ARCH"
  exit 0
fi

if [[ -z "$ROOT" ]] && command -v nvidia-smi >/dev/null 2>&1; then
  # On Orin (JetPack 6) nvidia-smi exists but reports most fields as N/A or [N/A]: only a number counts.
  cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' ' || true)"
  if [[ "$cap" =~ ^([0-9]+)\.([0-9]+)$ ]]; then
    printf '%s\t%s\n' "${BASH_REMATCH[1]}${BASH_REMATCH[2]}" "nvidia-smi compute capability $cap"
    exit 0
  fi
fi

dt=""
for f in "$ROOT/proc/device-tree/compatible" "$ROOT/sys/firmware/devicetree/base/compatible" \
         "$ROOT/proc/device-tree/model" "$ROOT/sys/firmware/devicetree/base/model"; do
  [[ -r "$f" ]] && dt="$dt $(tr '\0' ' ' < "$f")"
done
model="$(tr -d '\0' < "$ROOT/proc/device-tree/model" 2>/dev/null || true)"
[[ -n "$model" ]] || model="$(tr -d '\0' < "$ROOT/sys/firmware/devicetree/base/model" 2>/dev/null || true)"
dt_lower="${dt,,}"

arch=""
case "$dt_lower" in
  # Thor (T264): compute capability 10.1 up to CUDA 12.9, renamed 11.0 from CUDA 13.
  *tegra264*|*p3834*|*thor*)
    if [[ -n "$cuda_major" ]] && (( cuda_major >= 13 )); then arch=110; else arch=101; fi ;;
  # Orin (T234): AGX Orin p3701, Orin NX / Orin Nano p3767, IGX p3740.
  *tegra234*|*p3701*|*p3767*|*p3740*|*orin*) arch=87 ;;
  # Xavier (T194): AGX Xavier p2888, Xavier NX p3668.
  *tegra194*|*p2888*|*p3668*|*xavier*) arch=72 ;;
  # TX2 (T186): p3310, p3489, p3636.
  *tegra186*|*p3310*|*p3489*|*p3636*|*tx2*) arch=62 ;;
  # Nano and TX1 (T210).
  *tegra210*|*p3448*|*p3450*|*p2180*|*jetson_tx1*|*tx1*|*nano*) arch=53 ;;
esac
if [[ -n "$arch" ]]; then
  printf '%s\t%s\n' "$arch" "device tree: ${model:-${dt# }}"
  exit 0
fi
die "cannot tell this GPU's CUDA architecture (no nvidia-smi compute capability, device tree '${dt# }'); set EDGEPROF_CUDA_ARCH (e.g. 87 for Orin)"
