#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests: its own data folder under a temp dir, 127.0.0.1 only, a free
# port, trust auth (nothing else can reach it). Used by .ci/run; tests/pg_server.py does the same from Python.
#
#   eval "$(bash scripts/pg_test_server.sh start)"   # exports EDGEPROF_TEST_PG_URL and EDGEPROF_TEST_PG_DIR
#   bash scripts/pg_test_server.sh start --owner PID  # ... and stops by itself once process PID is gone
#   bash scripts/pg_test_server.sh stop "$EDGEPROF_TEST_PG_DIR"
set -euo pipefail

die() { printf 'pg_test_server: error: %s\n' "$*" >&2; exit 1; }

pg_bin() {
  local d
  if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then dirname "$(command -v pg_ctl)"; return; fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [[ -x "$d/initdb" && -x "$d/pg_ctl" ]] && { echo "$d"; return; }
  done
  die "PostgreSQL server binaries not found (Debian: apt-get install -y postgresql)"
}

# initdb and postgres refuse to run as root: run them as the postgres user then.
as_owner() {
  if [[ "$(id -u)" == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "${1:-}" in
  start)
    BIN="$(pg_bin)"
    DIR="$(mktemp -d "${TMPDIR:-/tmp}/edgeprof-pg.XXXXXX")"
    [[ "$(id -u)" == 0 ]] && chown postgres "$DIR"
    PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    as_owner "$BIN/initdb" -D "$DIR/data" -U edgeprof --auth=trust -E UTF8 >"$DIR/initdb.log" 2>&1 \
      || { cat "$DIR/initdb.log" >&2; die "initdb failed"; }
    as_owner "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 \
      -o "-h 127.0.0.1 -p $PORT -k $DIR -c fsync=off -c max_connections=200" start >/dev/null \
      || { cat "$DIR/server.log" >&2; die "server did not start"; }
    # --owner PID: stop the server when that process ends, even by SIGKILL or a timeout's SIGTERM (a test
    # session that dies without its teardown must not leave a server running).
    if [[ "${2:-}" == "--owner" && -n "${3:-}" ]]; then
      OWNER="$3"
      nohup bash -c "while kill -0 $OWNER 2>/dev/null; do sleep 2; done; bash '$0' stop '$DIR'" \
        >/dev/null 2>&1 </dev/null &
    fi
    echo "export EDGEPROF_TEST_PG_URL='postgresql+psycopg://edgeprof@127.0.0.1:$PORT/postgres'"
    echo "export EDGEPROF_TEST_PG_DIR='$DIR'"
    ;;
  stop)
    DIR="${2:?usage: stop DIR}"
    [[ -d "$DIR/data" ]] && as_owner "$(pg_bin)/pg_ctl" -D "$DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$DIR"
    ;;
  *) die "usage: $0 start | stop DIR" ;;
esac
