#!/usr/bin/env bash
# Build llama.cpp's `llama-server` (the serving runner) and `llama-bench` (what `edgeprof bench` is checked
# against) from the llama.cpp source vendored in the llama-cpp-python sdist, i.e. the same llama.cpp the
# in-process runner links, with the same platform flags, in one build tree.
#
#   scripts/build_llama_server.sh VENV_DIR LLAMA_CPP_PYTHON_VERSION "CMAKE_ARGS"
#
# Only those two targets are built (no tests, examples or other tools; no libcurl) so that the build fits
# the CI budget on 2 cores. Static libraries, so each binary can be copied into VENV_DIR/bin without the
# build tree. The results are cached by a key of (version, flags, machine type) under
# ${EDGEPROF_SERVER_CACHE:-~/.cache/edgeprof/llama-server}/<key>, like the wheel; a build happens only when
# the key changes or a tool is missing from the cache (then only the missing tools are built, so a cache
# from before llama-bench was built keeps its llama-server). The build records go to
# VENV_DIR/share/edgeprof/<tool>.json.
# Environment: JOBS (default: number of CPUs), PYTHON (default VENV_DIR/bin/python).
set -euo pipefail

venv="${1:?usage: build_llama_server.sh VENV_DIR VERSION CMAKE_ARGS}"
ver="${2:?llama-cpp-python version}"
cmake_args="${3-}"
venv="$(cd "$venv" && pwd)"
PYTHON="${PYTHON:-$venv/bin/python}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
ARCH="$(uname -m)"

say() { printf 'setup: llama-server, llama-bench: %s\n' "$*"; }
die() { printf 'setup: error: llama-server, llama-bench: %s\n' "$*" >&2; exit 1; }

key="$(printf 'server|%s|%s|%s' "$ver" "$cmake_args" "$ARCH" | sha256sum | cut -c1-16)"
cache="${EDGEPROF_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/edgeprof/llama-server}/$key"
record="$venv/share/edgeprof/llama-server.json"

TOOLS=(llama-server llama-bench)
installed=1
for tool in "${TOOLS[@]}"; do
  rec="$venv/share/edgeprof/$tool.json"
  if ! [[ -x "$venv/bin/$tool" && -f "$rec" ]] || ! grep -q "\"key\": \"$key\"" "$rec"; then installed=0; fi
done
if [[ $installed == 1 ]]; then
  say "already built with these flags (key $key)"
  exit 0
fi

missing=()
for tool in "${TOOLS[@]}"; do
  if [[ ! -x "$cache/$tool" || "${EDGEPROF_NO_SERVER_CACHE:-0}" == "1" ]]; then missing+=("$tool"); fi
done
if [[ ${#missing[@]} -gt 0 ]]; then
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
  # Only vendor/llama.cpp is unpacked, without the git metadata the wheel's build read its commit from:
  # name the same commit (the sdist's vendor/llama.cpp HEAD) so that llama-bench's build_commit is the
  # wheel's, not "unknown".
  head="$(tar -xzOf "$sdist" "$name/.git/modules/vendor/llama.cpp/HEAD" 2>/dev/null | cut -c1-7 || true)"
  if [[ "$head" =~ ^[0-9a-f]{7}$ ]]; then opts+=(-DLLAMA_BUILD_COMMIT="$head"); fi
  # Newer llama.cpp made LLAMA_CURL a deprecated no-op; pass only the options this tree still declares.
  if grep -qE 'option\(LLAMA_CURL\b' "$src/CMakeLists.txt"; then opts+=(-DLLAMA_CURL=OFF); fi
  if grep -qE 'option\(LLAMA_OPENSSL\b' "$src/CMakeLists.txt"; then opts+=(-DLLAMA_OPENSSL=OFF); fi
  bld="$work/build"
  say "configuring (flags: ${cmake_args:-llama.cpp defaults})"
  cmake -S "$src" -B "$bld" "${opts[@]}" >"$work/configure.log" 2>&1 \
    || { tail -n 30 "$work/configure.log" >&2; die "cmake configure failed (log: $work/configure.log)"; }
  say "building ${missing[*]} (-j$JOBS; about 10-20 minutes on 2 cores)"
  cmake --build "$bld" --target "${missing[@]}" -j"$JOBS" >"$work/build.log" 2>&1 \
    || { tail -n 30 "$work/build.log" >&2; die "build failed (log: $work/build.log)"; }
  for tool in "${missing[@]}"; do
    [[ -x "$bld/bin/$tool" ]] || die "$tool not found at $bld/bin/$tool"
    cp "$bld/bin/$tool" "$cache/$tool.tmp"
    mv "$cache/$tool.tmp" "$cache/$tool"
  done
  # llama.cpp's build number stays 0 (no git history here); the commit and the sdist version identify it.
  rm -rf "$work/src" "$bld"
else
  say "reusing ${TOOLS[*]} in $cache (built earlier with the same flags)"
fi

mkdir -p "$venv/bin" "$(dirname "$record")"
for tool in "${TOOLS[@]}"; do
  cp "$cache/$tool" "$venv/bin/$tool.tmp"
  mv "$venv/bin/$tool.tmp" "$venv/bin/$tool"
  printf '{"runtime": "%s", "llama_cpp_python_sdist": "%s", "cmake_args": "%s", "arch": "%s", "key": "%s"}\n' \
    "$tool" "$ver" "$cmake_args" "$ARCH" "$key" > "$venv/share/edgeprof/$tool.json"
done
"$venv/bin/llama-server" --version >/dev/null 2>&1 || die "the built llama-server does not start ($venv/bin/llama-server --version)"
# llama-bench has no --version; --help exits 0 once its libraries resolve
"$venv/bin/llama-bench" --help >/dev/null 2>&1 || die "the built llama-bench does not start ($venv/bin/llama-bench --help)"
say "installed ${TOOLS[*]} into $venv/bin"
