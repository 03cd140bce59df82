#!/usr/bin/env bash
# Build llama.cpp's `llama-server` (the serving runner) from the llama.cpp source vendored in the
# llama-cpp-python sdist, i.e. the same llama.cpp the in-process runner links, with the same platform flags.
#
#   scripts/build_llama_server.sh VENV_DIR LLAMA_CPP_PYTHON_VERSION "CMAKE_ARGS"
#
# Only the llama-server target is built (no tests, examples or other tools; no libcurl) so that the build fits
# the CI budget on 2 cores. Static libraries, so the one binary can be copied into VENV_DIR/bin without the
# build tree. The result is cached by a key of (version, flags, machine type) under
# ${EDGEPROF_SERVER_CACHE:-~/.cache/edgeprof/llama-server}/<key>, like the wheel, and a rebuild happens only
# when the key changes. The build record goes to VENV_DIR/share/edgeprof/llama-server.json.
# Environment: JOBS (default: number of CPUs), PYTHON (default VENV_DIR/bin/python).
set -euo pipefail

venv="${1:?usage: build_llama_server.sh VENV_DIR VERSION CMAKE_ARGS}"
ver="${2:?llama-cpp-python version}"
cmake_args="${3-}"
venv="$(cd "$venv" && pwd)"
PYTHON="${PYTHON:-$venv/bin/python}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
ARCH="$(uname -m)"

say() { printf 'setup: llama-server: %s\n' "$*"; }
die() { printf 'setup: error: llama-server: %s\n' "$*" >&2; exit 1; }

key="$(printf 'server|%s|%s|%s' "$ver" "$cmake_args" "$ARCH" | sha256sum | cut -c1-16)"
cache="${EDGEPROF_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/edgeprof/llama-server}/$key"
record="$venv/share/edgeprof/llama-server.json"

if [[ -x "$venv/bin/llama-server" && -f "$record" ]] && grep -q "\"key\": \"$key\"" "$record"; then
  say "already built with these flags (key $key)"
  exit 0
fi

if [[ ! -x "$cache/llama-server" || "${EDGEPROF_NO_SERVER_CACHE:-0}" == "1" ]]; then
  work="$cache/work"
  mkdir -p "$work/dl"
  sdist="$work/dl/llama_cpp_python-$ver.tar.gz"
  if [[ ! -f "$sdist" ]]; then
    say "downloading the llama-cpp-python==$ver sdist (its vendored llama.cpp is what the wheel was built from)"
    "$PYTHON" -m pip download --quiet --no-deps --no-binary llama-cpp-python "llama-cpp-python==$ver" -d "$work/dl"
  fi
  [[ -f "$sdist" ]] || die "sdist not found after download: $sdist"
  name="llama_cpp_python-$ver"
  src="$work/src/$name/vendor/llama.cpp"
  if [[ ! -f "$src/CMakeLists.txt" ]]; then
    mkdir -p "$work/src"
    tar -xzf "$sdist" -C "$work/src" "$name/vendor/llama.cpp"
  fi
  # shellcheck disable=SC2206  # the flags are a space-separated list on purpose, as for the wheel
  opts=(
    -DCMAKE_BUILD_TYPE=Release
    $cmake_args
    -DBUILD_SHARED_LIBS=OFF
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON
  )
  command -v ninja >/dev/null && opts=(-G Ninja "${opts[@]}")
  # Newer llama.cpp made LLAMA_CURL a deprecated no-op; pass only the options this tree still declares.
  if grep -qE 'option\(LLAMA_CURL\b' "$src/CMakeLists.txt"; then opts+=(-DLLAMA_CURL=OFF); fi
  if grep -qE 'option\(LLAMA_OPENSSL\b' "$src/CMakeLists.txt"; then opts+=(-DLLAMA_OPENSSL=OFF); fi
  bld="$work/build"
  say "configuring (flags: ${cmake_args:-llama.cpp defaults})"
  cmake -S "$src" -B "$bld" "${opts[@]}" >"$work/configure.log" 2>&1 \
    || { tail -n 30 "$work/configure.log" >&2; die "cmake configure failed (log: $work/configure.log)"; }
  say "building the llama-server target (-j$JOBS; about 10-20 minutes on 2 cores)"
  cmake --build "$bld" --target llama-server -j"$JOBS" >"$work/build.log" 2>&1 \
    || { tail -n 30 "$work/build.log" >&2; die "build failed (log: $work/build.log)"; }
  [[ -x "$bld/bin/llama-server" ]] || die "llama-server not found at $bld/bin/llama-server"
  cp "$bld/bin/llama-server" "$cache/llama-server.tmp"
  mv "$cache/llama-server.tmp" "$cache/llama-server"
  # The sdist has no .git, so llama.cpp's own build-info says "unknown"; the sdist version identifies it.
  rm -rf "$work/src" "$bld"
else
  say "reusing $cache/llama-server (built earlier with the same flags)"
fi

mkdir -p "$venv/bin" "$(dirname "$record")"
cp "$cache/llama-server" "$venv/bin/llama-server.tmp"
mv "$venv/bin/llama-server.tmp" "$venv/bin/llama-server"
printf '{"runtime": "llama-server", "llama_cpp_python_sdist": "%s", "cmake_args": "%s", "arch": "%s", "key": "%s"}\n' \
  "$ver" "$cmake_args" "$ARCH" "$key" > "$record"
"$venv/bin/llama-server" --version >/dev/null 2>&1 || die "the built llama-server does not start ($venv/bin/llama-server --version)"
say "installed $venv/bin/llama-server"
