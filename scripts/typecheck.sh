#!/usr/bin/env bash
# mypy over the installed layout: the repository folders are the packages edgeprof (agent/),
# edgeprof.collectors, edgeprof.runners, edgeprof.storage (pyproject's package-dir), a mapping mypy cannot
# follow, so it checks a tree of symbolic links laid out as the wheel installs them.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TREE="$ROOT/build/typecheck"
rm -rf "$TREE"
mkdir -p "$TREE/edgeprof"
for f in "$ROOT"/agent/*; do ln -s "$f" "$TREE/edgeprof/$(basename "$f")"; done
for sub in collectors runners storage; do ln -s "$ROOT/$sub" "$TREE/edgeprof/$sub"; done
cd "$TREE"
exec "$ROOT/.venv/bin/python" -m mypy --config-file "$ROOT/pyproject.toml" -p edgeprof "$@"
